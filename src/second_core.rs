//! Work for a second core: reading a sequence ahead of a pass over it (a pass over a
//! capture's sorted events spends much of its time merging spilled runs and decoding them),
//! and sorting a large vector's halves side by side.

use std::ops::Range;
use std::sync::mpsc::sync_channel;

/// Items handed over at a time.
const BATCH: usize = 1024;

/// Batches read and not yet handed over, at most: what the reader holds ahead of the pass.
const IN_FLIGHT: usize = 4;

/// Where a pass reads the sequence it goes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// On the pass's own thread: a light pass (handing items from core to core would cost it
    /// more than its own work), or one run beside other work.
    Inline,
    /// On a thread of its own, a few batches ahead: a pass whose own work per item is heavy.
    Ahead,
}

/// Hands `f` every item of `items`, in order, read as `reading` says; stops at `f`'s first
/// error (a reader ahead then stops too) and returns it.
pub fn each<T: Send, E>(
    mut items: impl Iterator<Item = T> + Send,
    reading: Reading,
    mut f: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    if reading == Reading::Inline {
        return items.try_for_each(f);
    }
    std::thread::scope(|scope| {
        let (send, batches) = sync_channel::<Vec<T>>(IN_FLIGHT);
        // Emptied batches go back to the reader, so that no batch is allocated per turn.
        let (give_back, emptied) = sync_channel::<Vec<T>>(IN_FLIGHT + 2);
        scope.spawn(move || {
            loop {
                let mut batch = emptied
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                batch.extend(items.by_ref().take(BATCH));
                // A pass that stopped early takes no more.
                if batch.is_empty() || send.send(batch).is_err() {
                    return;
                }
            }
        });
        for mut batch in batches {
            for item in batch.drain(..) {
                f(item)?;
            }
            let _ = give_back.try_send(batch);
        }
        Ok(())
    })
}

/// `f` over the first half of `0..n` and, on a second core, over the second half.
pub fn halves<R: Send>(n: usize, f: impl Fn(Range<usize>) -> R + Sync) -> (R, R) {
    let half = n / 2;
    std::thread::scope(|scope| {
        let high = scope.spawn(|| f(half..n));
        let low = f(0..half);
        let high = high.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        (low, high)
    })
}

/// Sorts `items` by `key` as `sort_unstable_by_key` would (items of equal keys in any order):
/// its halves on two cores, then merged (a stable sort finds the two runs), with scratch
/// room for half of them.
pub fn sort_by_key<T: Send, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K + Sync) {
    let (low, high) = items.split_at_mut(items.len() / 2);
    std::thread::scope(|scope| {
        scope.spawn(|| low.sort_unstable_by_key(&key));
        high.sort_unstable_by_key(&key);
    });
    items.sort_by_key(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_arrives_in_order() {
        let mut seen = Vec::new();
        let done: Result<(), ()> = each(0..10 * BATCH as u32 + 7, Reading::Ahead, |i| {
            seen.push(i);
            Ok(())
        });
        assert_eq!(done, Ok(()));
        assert_eq!(seen, (0..10 * BATCH as u32 + 7).collect::<Vec<_>>());
    }

    #[test]
    fn the_first_error_stops_the_pass_and_the_reader() {
        let mut seen = 0;
        // Endless: the reader stops only because the pass did.
        let done = each(0u64.., Reading::Ahead, |i| {
            seen += 1;
            match i {
                5_000 => Err(i),
                _ => Ok(()),
            }
        });
        assert_eq!((done, seen), (Err(5_000), 5_001));
    }

    #[test]
    fn two_halves_cover_every_index_once() {
        for n in [0, 1, 2, 5] {
            let (low, high) = halves(n, |range| range.collect::<Vec<_>>());
            assert_eq!([low, high].concat(), (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn halves_sorted_apart_merge_into_one_order() {
        let mut items: Vec<(u32, u32)> = (0..10_001u32).map(|i| (i * 7919 % 1000, i)).collect();
        let mut expected = items.clone();
        expected.sort_unstable();
        sort_by_key(&mut items, |&pair| pair);
        assert_eq!(items, expected);
    }
}
