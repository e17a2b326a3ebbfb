//! A set of small integers, one bit each (dense ids, indices): what a hash set of them would
//! hold in a sixty-fourth of the room.

/// A set of small integers: one bit each, up to the largest inserted.
#[derive(Debug, Default)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    /// Adds `n`; false when it was there.
    pub(crate) fn insert(&mut self, n: u32) -> bool {
        let (word, bit) = (n as usize / 64, n % 64);
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        let had = self.0[word] & (1 << bit) != 0;
        self.0[word] |= 1 << bit;
        !had
    }

    /// Whether `n` is in the set.
    pub(crate) fn contains(&self, n: u32) -> bool {
        let (word, bit) = (n as usize / 64, n % 64);
        self.0.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_in_once_it_is_inserted() {
        let mut bits = Bits::default();
        assert!(bits.insert(130) && bits.insert(0));
        assert!(!bits.insert(130));
        let found: Vec<u32> = (0..200).filter(|&n| bits.contains(n)).collect();
        assert_eq!(found, vec![0, 130]);
    }
}
