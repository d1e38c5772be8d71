//! The epoch: the number of a term.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use crate::ConfigError;

/// The number of a term.
///
/// Every term of an election has an epoch, and the epoch of every later term
/// is strictly higher than the epoch of every earlier one, across crashes and
/// restarts of the backend (rule 1 of [`Claim`](crate::Claim)).
///
/// The range is fixed for every backend:
/// - [`Epoch::UNGUARDED`] (1) is the epoch of
///   [`unguarded`](crate::unguarded) write tokens and of no term: it is
///   lower than every epoch a term can get, so a fence that has seen any
///   term's write refuses an unguarded one.
/// - Terms get epochs from [`Epoch::FIRST`] (2) to [`Epoch::MAX`]
///   (`i64::MAX`, the largest integer SQLite and PostgreSQL columns hold, so
///   every fence store can record every epoch). A backend refuses to hand
///   out an epoch above it ([`ConfigError::EpochExhausted`]).
/// - Zero is never an epoch.
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
/// assert!(Epoch::UNGUARDED < Epoch::FIRST);
/// assert_eq!(Epoch::MAX.get(), i64::MAX as u64);
/// assert!(Epoch::new(i64::MAX as u64 + 1).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(NonZeroU64);

impl Epoch {
    /// The epoch of [`unguarded`](crate::unguarded) write tokens: 1. No
    /// term ever has it; it is lower than every term's epoch.
    pub const UNGUARDED: Epoch = Epoch(NonZeroU64::MIN);

    /// The epoch of the first term of a new election: 2.
    pub const FIRST: Epoch = Epoch(NonZeroU64::MIN.saturating_add(1));

    /// The highest epoch: `i64::MAX`, so that every fence store (SQLite,
    /// PostgreSQL `BIGINT`) can hold every epoch.
    pub const MAX: Epoch = Epoch(NonZeroU64::new(i64::MAX as u64).unwrap());

    /// The epoch `value`, or `None` for zero or a value above
    /// [`Epoch::MAX`].
    ///
    /// ```
    /// use election_core::Epoch;
    ///
    /// let stored: u64 = 41; // e.g. read back from a fence store
    /// match Epoch::new(stored) {
    ///     Some(epoch) => assert_eq!(epoch.get(), 41),
    ///     None => unreachable!("0 and values above i64::MAX are no epochs"),
    /// }
    /// assert_eq!(Epoch::new(0), None);
    /// ```
    pub const fn new(value: u64) -> Option<Epoch> {
        if value > Epoch::MAX.get() {
            return None;
        }
        match NonZeroU64::new(value) {
            Some(v) => Some(Epoch(v)),
            None => None,
        }
    }

    /// True if a term may have this epoch: from [`Epoch::FIRST`] to
    /// [`Epoch::MAX`]. [`Epoch::UNGUARDED`] is not a term's epoch.
    ///
    /// ```
    /// use election_core::Epoch;
    ///
    /// assert!(Epoch::FIRST.is_term());
    /// assert!(!Epoch::UNGUARDED.is_term()); // an unguarded write token's epoch
    /// ```
    pub const fn is_term(self) -> bool {
        self.get() >= Epoch::FIRST.get()
    }

    /// The epoch as a number.
    ///
    /// ```
    /// use election_core::Epoch;
    ///
    /// assert_eq!(Epoch::FIRST.get(), 2);
    /// // For a SQL column: `get_i64`, which never fails.
    /// ```
    pub const fn get(self) -> u64 {
        self.0.get()
    }

    /// The epoch as a signed 64-bit integer, the type of a SQL `BIGINT` /
    /// `INTEGER` column. Never fails and never wraps: every epoch fits,
    /// since [`Epoch::MAX`] is `i64::MAX`.
    ///
    /// ```
    /// use election_core::Epoch;
    ///
    /// let column: i64 = Epoch::FIRST.get_i64(); // bind it as a BIGINT
    /// assert_eq!(column, 2);
    /// assert_eq!(Epoch::MAX.get_i64(), i64::MAX);
    /// assert_eq!(i64::from(Epoch::FIRST), 2);
    /// ```
    #[allow(
        clippy::cast_possible_wrap,
        reason = "lossless: `new` refuses every value above i64::MAX"
    )]
    pub const fn get_i64(self) -> i64 {
        self.0.get() as i64
    }

    /// The epoch read back from a signed 64-bit column, or `None` for zero
    /// or a negative number (no epoch): the checked way back from
    /// [`get_i64`](Epoch::get_i64).
    ///
    /// ```
    /// use election_core::Epoch;
    ///
    /// let stored: i64 = 41; // e.g. `SELECT epoch FROM ...`
    /// assert_eq!(Epoch::from_i64(stored), Epoch::new(41));
    /// assert_eq!(Epoch::from_i64(0), None);
    /// assert_eq!(Epoch::from_i64(-5), None);
    /// ```
    #[allow(clippy::cast_sign_loss, reason = "lossless: `value` is positive here")]
    pub const fn from_i64(value: i64) -> Option<Epoch> {
        if value <= 0 {
            return None;
        }
        Epoch::new(value as u64)
    }

    /// The epoch after this one, or `None` if this is [`Epoch::MAX`].
    ///
    /// ```
    /// use election_core::Epoch;
    ///
    /// assert_eq!(Epoch::FIRST.next(), Epoch::new(3));
    /// assert_eq!(Epoch::MAX.next(), None);
    /// ```
    pub const fn next(self) -> Option<Epoch> {
        Epoch::new(self.get().saturating_add(1))
    }

    /// The epoch that follows `previous`, where `None` means "no term yet":
    /// never below [`Epoch::FIRST`], and [`ConfigError::EpochExhausted`]
    /// past [`Epoch::MAX`].
    ///
    /// Backends that store the highest epoch handed out use this to compute
    /// the epoch of the term they are about to win.
    ///
    /// ```
    /// use election_core::{ConfigError, Epoch};
    ///
    /// # fn main() -> Result<(), ConfigError> {
    /// // A backend's winning step: the epoch after the highest one stored.
    /// let mut highest: Option<Epoch> = None; // a new election
    /// let first = Epoch::after(highest)?;
    /// assert_eq!(first, Epoch::FIRST);
    /// highest = Some(first);
    /// assert!(Epoch::after(highest)? > first);
    /// assert!(matches!(Epoch::after(Some(Epoch::MAX)), Err(ConfigError::EpochExhausted)));
    /// # Ok(()) }
    /// ```
    pub fn after(previous: Option<Epoch>) -> Result<Epoch, ConfigError> {
        match previous {
            None => Ok(Epoch::FIRST),
            Some(e) => e
                .next()
                .map(|n| n.max(Epoch::FIRST))
                .ok_or(ConfigError::EpochExhausted),
        }
    }
}

impl From<Epoch> for i64 {
    /// [`Epoch::get_i64`]: every epoch fits.
    fn from(epoch: Epoch) -> i64 {
        epoch.get_i64()
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The text was not a decimal epoch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not an epoch (a decimal number from 1 to 9223372036854775807): {text:?}")]
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
            "9223372036854775808",
        ] {
            assert!(bad.parse::<Epoch>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn after_counts_from_first_and_refuses_past_max() {
        assert_eq!(Epoch::after(None).unwrap(), Epoch::FIRST);
        assert_eq!(Epoch::after(Some(Epoch::UNGUARDED)).unwrap(), Epoch::FIRST);
        assert_eq!(Epoch::after(Epoch::new(9)).unwrap().get(), 10);
        let last = Epoch::new(i64::MAX as u64 - 1).unwrap();
        assert_eq!(Epoch::after(Some(last)).unwrap(), Epoch::MAX);
        assert!(Epoch::after(Some(Epoch::MAX)).is_err());
        assert!(Epoch::MAX.next().is_none());
        assert!(Epoch::new(u64::MAX).is_none());
        assert!(!Epoch::UNGUARDED.is_term() && Epoch::FIRST.is_term() && Epoch::MAX.is_term());
    }

    proptest! {
        #[test]
        fn text_round_trips(v in 1u64..=i64::MAX as u64) {
            let e = Epoch::new(v).unwrap();
            prop_assert_eq!(e.to_string().parse::<Epoch>().unwrap(), e);
        }

        #[test]
        fn order_matches_numbers(a in 1u64..=i64::MAX as u64, b in 1u64..=i64::MAX as u64) {
            prop_assert_eq!(Epoch::new(a).unwrap().cmp(&Epoch::new(b).unwrap()), a.cmp(&b));
        }

        #[test]
        fn i64_round_trips_and_keeps_order(v in any::<i64>(), w in any::<i64>()) {
            // Exactly the positive numbers are epochs, each back unchanged,
            // and order is kept both ways.
            let (e, f) = (Epoch::from_i64(v), Epoch::from_i64(w));
            prop_assert_eq!(e.is_some(), v > 0);
            if let (Some(e), Some(f)) = (e, f) {
                prop_assert_eq!(e.get_i64(), v);
                prop_assert_eq!(i64::from(e), v);
                prop_assert_eq!(e.cmp(&f), v.cmp(&w));
            }
        }

        #[test]
        fn new_accepts_exactly_one_to_max(v in any::<u64>()) {
            prop_assert_eq!(Epoch::new(v).is_some(), (1..=i64::MAX as u64).contains(&v));
        }

        #[test]
        fn after_is_a_term_epoch_above_previous(v in 1u64..=i64::MAX as u64) {
            let prev = Epoch::new(v).unwrap();
            match Epoch::after(Some(prev)) {
                Ok(next) => prop_assert!(next > prev && next.is_term()),
                Err(_) => prop_assert_eq!(prev, Epoch::MAX),
            }
        }
    }
}
