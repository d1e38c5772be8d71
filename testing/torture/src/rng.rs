//! A tiny seeded PRNG (splitmix64): the same seed gives the same fault
//! schedule, so a failing run can be replayed from its seed.
//!
//! Not for cryptography; good enough to draw faults, targets and pauses.
//!
//! ```
//! use torture::rng::Rng;
//!
//! let mut a = Rng::new(7);
//! let mut b = Rng::new(7);
//! assert_eq!(a.next_u64(), b.next_u64());
//! let pause = a.range_ms(300, 2000);
//! assert!((300..=2000).contains(&pause));
//! ```

/// The splitmix64 generator (Steele, Lea, Flood 2014; the seeder of the
/// xorshift and xoshiro families).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index in `0..len`, uniformly, as [`below`](Rng::below) draws
    /// it; 0 if `len` is 0.
    pub fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).expect("below `len`, a usize")
    }

    /// A number in `0..n`, uniformly (no modulo bias); 0 if `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Reject the lowest `2^64 mod n` values so the rest split evenly.
        let threshold = n.wrapping_neg() % n;
        loop {
            let x = self.next_u64();
            if x >= threshold {
                return x % n;
            }
        }
    }

    /// A number of milliseconds in `a..=b` (the bounds in either order).
    pub fn range_ms(&mut self, a: u64, b: u64) -> u64 {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(), // the whole range of u64
        }
    }

    /// True with probability `p` (clamped to `0.0..=1.0`; NaN is never).
    pub fn chance(&mut self, p: f64) -> bool {
        // 53 random bits: a uniform f64 in [0, 1).
        let x = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        x < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let draw = |seed| {
            let mut r = Rng::new(seed);
            (0..64)
                .map(|i| match i % 4 {
                    0 => r.next_u64(),
                    1 => r.below(10),
                    2 => r.range_ms(300, 2000),
                    _ => u64::from(r.chance(0.5)),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
    }

    #[test]
    fn matches_the_reference_splitmix64() {
        // The first outputs of splitmix64 seeded with 0 (reference C code).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn bounds_hold() {
        let mut r = Rng::new(1);
        let mut seen = [false; 7];
        for _ in 0..2000 {
            let x = r.below(7);
            seen[usize::try_from(x).unwrap()] = true;
            let ms = r.range_ms(20, 25);
            assert!((20..=25).contains(&ms));
            assert_eq!(r.range_ms(5, 5), 5);
            assert!((3..=9).contains(&r.range_ms(9, 3)));
        }
        assert!(seen.iter().all(|s| *s), "every value of below(7) drawn");
        assert_eq!(r.below(0), 0);
        let _ = r.range_ms(0, u64::MAX);
        assert!(!(0..100).any(|_| r.chance(0.0)));
        assert!((0..100).all(|_| r.chance(1.0)));
        let heads = (0..10_000).filter(|_| r.chance(0.3)).count();
        assert!((2500..3500).contains(&heads), "{heads}");
    }
}
