//! Which NVTX range encloses a moment: the innermost (shortest) range around each query time,
//! among a process's candidate ranges (all its threads).
//!
//! [`innermost`] answers many queries in one sweep, O((n + q) log n), for nsys-lens' own rules.
//! [`innermost_scan`] is PithTrain's bounded backward scan (analyses.md §1.5), kept exact for the
//! compatibility mode, limits and all.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

/// A range that may enclose query times: `[start, end)` for the sweep, `[start, end]` for the
/// PithTrain scan. Candidates are given sorted by start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Start, ns.
    pub start: i64,
    /// End, ns (`i64::MAX` for a range that never closes).
    pub end: i64,
}

impl Candidate {
    fn span(&self) -> i64 {
        self.end.saturating_sub(self.start)
    }
}

/// For each query time, the index of the innermost candidate with `start <= t < end`: the
/// shortest one, and among equally short ones the latest-starting (the more nested), then the
/// later in order. `candidates` must be sorted by start; queries may come in any order.
pub fn innermost(candidates: &[Candidate], queries: &[i64]) -> Vec<Option<usize>> {
    debug_assert!(candidates.windows(2).all(|w| w[0].start <= w[1].start));
    let mut order: Vec<usize> = (0..queries.len()).collect();
    order.sort_unstable_by_key(|&q| queries[q]);
    let mut answers = vec![None; queries.len()];
    // Open candidates ordered innermost first, and a min-heap of their ends for expiry.
    let mut open: BTreeSet<(i64, Reverse<i64>, Reverse<usize>)> = BTreeSet::new();
    let mut ends: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut next = 0;
    for q in order {
        let t = queries[q];
        while next < candidates.len() && candidates[next].start <= t {
            let c = candidates[next];
            open.insert((c.span(), Reverse(c.start), Reverse(next)));
            ends.push(Reverse((c.end, next)));
            next += 1;
        }
        while let Some(&Reverse((end, i))) = ends.peek() {
            if end > t {
                break;
            }
            ends.pop();
            let c = candidates[i];
            open.remove(&(c.span(), Reverse(c.start), Reverse(i)));
        }
        answers[q] = open.first().map(|&(_, _, Reverse(i))| i);
    }
    answers
}

/// PithTrain's lookup for one time `t`: among the `limit` candidates that start last at or
/// before `t`, those with `end >= t`; the shortest wins, and on equal spans the first met walking
/// back (the later one). `candidates` must be sorted by start.
pub fn innermost_scan(candidates: &[Candidate], t: i64, limit: usize) -> Option<usize> {
    let upto = candidates.partition_point(|c| c.start <= t);
    let mut best: Option<(i64, usize)> = None;
    for i in (upto.saturating_sub(limit)..upto).rev() {
        let c = candidates[i];
        if c.end >= t && best.is_none_or(|(span, _)| c.span() < span) {
            best = Some((c.span(), i));
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(start: i64, end: i64) -> Candidate {
        Candidate { start, end }
    }

    /// The definition, by brute force.
    fn brute(candidates: &[Candidate], t: i64) -> Option<usize> {
        (0..candidates.len())
            .filter(|&i| candidates[i].start <= t && t < candidates[i].end)
            .min_by_key(|&i| {
                (
                    candidates[i].span(),
                    Reverse(candidates[i].start),
                    Reverse(i),
                )
            })
    }

    #[test]
    fn the_sweep_finds_the_shortest_enclosing_range() {
        // outer [0,100) > stage [10,40) > inner [20,30); a sibling [50,60); an open range at 70.
        let cs = [c(0, 100), c(10, 40), c(20, 30), c(50, 60), c(70, i64::MAX)];
        let got = innermost(&cs, &[25, 5, 30, 55, 60, 99, 200, -1, 10]);
        assert_eq!(
            got,
            [
                Some(2),
                Some(0),
                Some(1),
                Some(3),
                Some(0),
                Some(0),
                Some(4),
                None,
                Some(1)
            ]
        );
    }

    #[test]
    fn the_sweep_agrees_with_brute_force() {
        let mut x = 99u64;
        let mut next = move |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % m) as i64
        };
        for _ in 0..100 {
            let mut cs: Vec<Candidate> = (0..12)
                .map(|_| {
                    let s = next(50);
                    c(s, s + next(30))
                })
                .collect();
            cs.sort_by_key(|c| c.start);
            let queries: Vec<i64> = (0..20).map(|_| next(80) - 5).collect();
            let got = innermost(&cs, &queries);
            for (q, &t) in queries.iter().enumerate() {
                assert_eq!(got[q], brute(&cs, t), "t={t} candidates={cs:?}");
            }
        }
    }

    #[test]
    fn the_scan_is_inclusive_prefers_later_on_ties_and_is_bounded() {
        let cs = [c(0, 10), c(0, 10), c(5, 5)];
        // A zero-length mark exactly at t wins; ends are inclusive.
        assert_eq!(innermost_scan(&cs, 5, 256), Some(2));
        assert_eq!(innermost_scan(&cs, 10, 256), Some(1));
        assert_eq!(innermost_scan(&cs, 11, 256), None);
        // The enclosing range lies 3 candidates back: a limit of 2 cannot see it.
        let cs = [c(0, 100), c(1, 2), c(3, 4), c(5, 6)];
        assert_eq!(innermost_scan(&cs, 50, 3), None);
        assert_eq!(innermost_scan(&cs, 50, 4), Some(0));
    }
}
