//! A small deterministic generator (SplitMix64): the same seed gives the same export everywhere.

/// SplitMix64 state.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`, decorrelated per `stream` (e.g. one per rank).
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `base` ns varied uniformly by up to `jitter` (a fraction, e.g. 0.1), at least 1 ns.
    pub fn around(&mut self, base: i64, jitter: f64) -> i64 {
        let factor = 1.0 + jitter * (2.0 * self.unit() - 1.0);
        ((base as f64) * factor).round().max(1.0) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_bounded() {
        let (mut a, mut b) = (Rng::new(7, 1), Rng::new(7, 1));
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(Rng::new(7, 2).next_u64(), Rng::new(7, 1).next_u64());
        for _ in 0..1000 {
            let v = a.around(1000, 0.1);
            assert!((900..=1100).contains(&v));
            assert!((0.0..1.0).contains(&a.unit()));
        }
    }
}
