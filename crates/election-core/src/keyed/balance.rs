//! Balancing a lease set's keys over its live members, as pure functions
//! (ADR 0061): each member's fair share of the keys ([`target`]) and the
//! rendezvous rank of a key for a member ([`rank`]), which orders the keys
//! a member claims (highest first) and gives back (lowest first), so
//! members prefer different keys and a change of members moves few of them.
//!
//! Keys move only through the single-key rules: a member over its share
//! gives keys back ([`Command::Give`](super::book::Command::Give)), after
//! their guards; a member under its share claims free keys; the taker wins
//! with a higher epoch. Nothing here does I/O or reads a clock.

use crate::{ConfigError, Identity};

/// A live member of a balanced lease set, as its membership record says.
///
/// ```
/// use election_core::{Identity, SetMember};
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let me = SetMember::new(Identity::new("node-a")?, 100).with_max_keys(Some(40));
/// assert_eq!(me.cap(), 40);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetMember {
    /// The member's identity (its lease set's).
    pub identity: Identity,
    /// How many keys it offers (asks about).
    pub offered: usize,
    /// The most keys it takes (`None`: no cap).
    pub max_keys: Option<usize>,
}

impl SetMember {
    /// A member offering `offered` keys, with no cap.
    ///
    /// ```
    /// use election_core::{Identity, SetMember};
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// assert_eq!(SetMember::new(Identity::new("node-a")?, 8).cap(), 8);
    /// # Ok(()) }
    /// ```
    pub fn new(identity: Identity, offered: usize) -> Self {
        SetMember {
            identity,
            offered,
            max_keys: None,
        }
    }

    /// Caps the member's share at `max_keys` keys (`None`: no cap).
    ///
    /// ```
    /// use election_core::{Identity, SetMember};
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let capped = SetMember::new(Identity::new("node-a")?, 8).with_max_keys(Some(2));
    /// assert_eq!(capped.cap(), 2);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_max_keys(mut self, max_keys: Option<usize>) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The most keys this member can hold: its cap, at most what it offers.
    ///
    /// ```
    /// use election_core::{Identity, SetMember};
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let m = SetMember::new(Identity::new("node-a")?, 3).with_max_keys(Some(10));
    /// assert_eq!(m.cap(), 3);
    /// # Ok(()) }
    /// ```
    pub fn cap(&self) -> usize {
        self.max_keys.map_or(self.offered, |m| m.min(self.offered))
    }
}

/// How a member of a balanced set behaves: its cap, and how long its
/// membership record lives without a renewal.
///
/// ```
/// use election_core::Balance;
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let balance = Balance::default().with_max_keys(Some(50))?;
/// assert_eq!(balance.max_keys(), Some(50));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Balance {
    max_keys: Option<usize>,
}

impl Balance {
    /// Caps this member's share (`None`: no cap). Zero is refused: a member
    /// that takes no key should not offer any.
    ///
    /// ```
    /// use election_core::Balance;
    /// assert!(Balance::default().with_max_keys(Some(0)).is_err());
    /// ```
    pub fn with_max_keys(mut self, max_keys: Option<usize>) -> Result<Self, ConfigError> {
        if max_keys == Some(0) {
            return Err(ConfigError::BadSetting {
                setting: "max_keys",
                reason: "must be at least 1".into(),
            });
        }
        self.max_keys = max_keys;
        Ok(self)
    }

    /// The cap, if any.
    ///
    /// ```
    /// assert_eq!(election_core::Balance::default().max_keys(), None);
    /// ```
    pub fn max_keys(&self) -> Option<usize> {
        self.max_keys
    }
}

/// The rendezvous (highest random weight) rank of `key` for `member`: a
/// stable 64-bit hash of both (FNV-1a, then a SplitMix64 finaliser), the
/// same in every process and build.
pub(crate) fn rank(key: &str, member: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in member.bytes().chain([0xff]).chain(key.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The fair share of `me` among the live `members` (`me` among them):
/// with K keys (the most any member offers) and P members, ⌊K/P⌋ or
/// ⌈K/P⌉ each, where members capped below that take their cap and the
/// others share the rest the same way (water-filling). Which members take
/// the one key more is decided by identity order, the same on every
/// member. `None` if `me` is not among `members`.
pub(crate) fn target(me: &Identity, members: &[SetMember]) -> Option<usize> {
    let keys = members.iter().map(|m| m.offered).max()?;
    let mut order: Vec<&SetMember> = members.iter().collect();
    // Capped first (lowest cap), then by identity: deterministic.
    order.sort_by(|a, b| {
        a.cap()
            .cmp(&b.cap())
            .then(a.identity.as_str().cmp(b.identity.as_str()))
    });
    order.dedup_by(|a, b| a.identity == b.identity);
    let mut left = keys;
    let mut rest = order.len();
    let mut shares: Vec<(&Identity, usize)> = Vec::with_capacity(order.len());
    let mut uncapped: Vec<&SetMember> = Vec::new();
    for m in &order {
        let fair = left.div_ceil(rest.max(1));
        if m.cap() < fair {
            shares.push((&m.identity, m.cap()));
            left -= m.cap();
            rest -= 1;
        } else {
            uncapped.push(m);
        }
    }
    uncapped.sort_by(|a, b| a.identity.as_str().cmp(b.identity.as_str()));
    let n = uncapped.len().max(1);
    let (base, extra) = (left / n, left % n);
    for (i, m) in uncapped.iter().enumerate() {
        shares.push((&m.identity, (base + usize::from(i < extra)).min(m.cap())));
    }
    shares
        .into_iter()
        .find(|(id, _)| *id == me)
        .map(|(_, share)| share)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(i: usize) -> Identity {
        Identity::new(format!("node-{i}")).unwrap()
    }

    fn members(n: usize, keys: usize) -> Vec<SetMember> {
        (0..n).map(|i| SetMember::new(id(i), keys)).collect()
    }

    #[test]
    fn equal_members_share_floor_or_ceiling() {
        let ms = members(3, 100);
        let shares: Vec<usize> = (0..3).map(|i| target(&id(i), &ms).unwrap()).collect();
        assert_eq!(shares, vec![34, 33, 33]);
        assert_eq!(target(&id(9), &ms), None);
    }

    #[test]
    fn a_capped_member_takes_its_cap_and_the_others_the_rest() {
        let mut ms = members(3, 100);
        ms[0].max_keys = Some(10);
        let shares: Vec<usize> = (0..3).map(|i| target(&id(i), &ms).unwrap()).collect();
        assert_eq!(shares, vec![10, 45, 45]);
    }

    #[test]
    fn rank_is_stable() {
        // Pinned: every process and build must agree.
        assert_eq!(rank("shard-1", "node-a"), rank("shard-1", "node-a"));
        assert_ne!(rank("shard-1", "node-a"), rank("shard-1", "node-b"));
        assert_eq!(
            rank("k", "m"),
            0x45be_3e04_1653_2f0d,
            "{:#x}",
            rank("k", "m")
        );
    }

    proptest! {
        /// Shares add up to the keys (or every cap), each within its cap,
        /// and uncapped members differ by at most one.
        #[test]
        fn shares_are_fair(n in 1..8usize, keys in 0..300usize, caps in proptest::collection::vec(proptest::option::of(1..120usize), 8)) {
            let ms: Vec<SetMember> = (0..n).map(|i| SetMember::new(id(i), keys).with_max_keys(caps[i])).collect();
            let shares: Vec<usize> = (0..n).map(|i| target(&id(i), &ms).unwrap()).collect();
            let total: usize = shares.iter().sum();
            let capacity: usize = ms.iter().map(SetMember::cap).sum();
            prop_assert_eq!(total, keys.min(capacity));
            for (m, s) in ms.iter().zip(&shares) {
                prop_assert!(*s <= m.cap());
            }
            let full: Vec<usize> = ms.iter().zip(&shares).filter(|(m, s)| **s < m.cap()).map(|(_, s)| *s).collect();
            if let (Some(lo), Some(hi)) = (full.iter().min(), shares.iter().max()) {
                prop_assert!(hi - lo <= 1, "uneven shares {:?}", shares);
            }
            if caps.iter().take(n).all(Option::is_none) && n > 0 {
                for s in &shares {
                    prop_assert!(*s == keys / n || *s == keys.div_ceil(n), "{:?}", shares);
                }
            }
        }
    }
}
