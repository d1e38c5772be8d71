//! The epoch: the number of a term.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use crate::error::ConfigError;

/// The number of a term.
///
/// Every term of an election has an epoch, and the epoch of every later term
/// is strictly higher than the epoch of every earlier one, across crashes and
/// restarts of the backend (rule 1 of [`Claim`](crate::Claim)). Epochs start
/// at 1; zero is never an epoch.
///
/// An epoch is written as decimal text, and [`FromStr`] reads exactly that
/// text back (no sign, no leading `+`, no surrounding space):
///
/// ```
/// use election_core::Epoch;
///
/// let epoch = Epoch::new(42).unwrap();
/// assert_eq!(epoch.to_string(), "42");
/// assert_eq!("42".parse::<Epoch>().unwrap(), epoch);
/// assert!("0".parse::<Epoch>().is_err());
/// assert!(Epoch::new(7).unwrap() < Epoch::new(8).unwrap());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(NonZeroU64);

impl Epoch {
    /// The first epoch of a new election: 1.
    pub const FIRST: Epoch = Epoch(NonZeroU64::MIN);

    /// The epoch `value`, or `None` for zero.
    pub const fn new(value: u64) -> Option<Epoch> {
        match NonZeroU64::new(value) {
            Some(v) => Some(Epoch(v)),
            None => None,
        }
    }

    /// The epoch as a number.
    pub const fn get(self) -> u64 {
        self.0.get()
    }

    /// The epoch after this one, or `None` if this is `u64::MAX`.
    pub const fn next(self) -> Option<Epoch> {
        match self.0.checked_add(1) {
            Some(v) => Some(Epoch(v)),
            None => None,
        }
    }

    /// The epoch that follows `previous`, where `None` means "no term yet".
    ///
    /// Backends that store the highest epoch handed out use this to compute
    /// the epoch of the term they are about to win.
    pub fn after(previous: Option<Epoch>) -> Result<Epoch, ConfigError> {
        match previous {
            None => Ok(Epoch::FIRST),
            Some(e) => e.next().ok_or(ConfigError::EpochExhausted),
        }
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The text was not a decimal epoch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not an epoch (a decimal number from 1 to 18446744073709551615): {text:?}")]
pub struct ParseEpochError {
    /// The text that did not parse, cut to 64 bytes.
    pub text: String,
}

impl FromStr for Epoch {
    type Err = ParseEpochError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseEpochError {
            text: s.chars().take(64).collect(),
        };
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let v: u64 = s.parse().map_err(|_| err())?;
        Epoch::new(v).ok_or_else(err)
    }
}

impl From<Epoch> for u64 {
    fn from(e: Epoch) -> u64 {
        e.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_signs_spaces_and_zero() {
        for bad in [
            "",
            "0",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1e3",
            "18446744073709551616",
        ] {
            assert!(bad.parse::<Epoch>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn after_counts_from_one_and_refuses_overflow() {
        assert_eq!(Epoch::after(None).unwrap(), Epoch::FIRST);
        assert_eq!(Epoch::after(Epoch::new(9)).unwrap().get(), 10);
        assert!(Epoch::after(Epoch::new(u64::MAX)).is_err());
    }

    proptest! {
        #[test]
        fn text_round_trips(v in 1u64..) {
            let e = Epoch::new(v).unwrap();
            prop_assert_eq!(e.to_string().parse::<Epoch>().unwrap(), e);
        }

        #[test]
        fn order_matches_numbers(a in 1u64.., b in 1u64..) {
            prop_assert_eq!(Epoch::new(a).unwrap().cmp(&Epoch::new(b).unwrap()), a.cmp(&b));
        }
    }
}
