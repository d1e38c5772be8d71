//! Holder heartbeats (ADR 0110): a crashed lease set's keys are taken about one
//! TTL after its last renewal, not one TTL after the others first looked
//! at each of its keys.
//!
//! Every lease set of a SQL backend has a *heartbeat*: one row (`id`,
//! `version`) that each renewal of the set bumps in its own transaction,
//! and names in the rows it renews (the row's `heartbeat`, with
//! `heartbeat_nonce`, the row's nonce then). Every claim clears both, so a
//! row names a heartbeat only once its holder's first renewal did (a row
//! whose nonce differs from `heartbeat_nonce` was won since, and the
//! heartbeat says nothing of it). Each renewal of a set also lists every
//! heartbeat, so a set watches the other sets' heartbeats all along
//! ([`HeartbeatBook::see`]), whether or not it wants their keys yet.
//!
//! **The rule (rule 2).** A contender may take a key row held in a term
//! that names heartbeat `m` once it has seen `m` at one version, unchanged, for
//! a full TTL (the longer of its own and the row's) on its own monotonic
//! clock, counted from the first time it saw that version
//! ([`HeartbeatBook::may_take`]), and only by a claim conditional on `m` still
//! showing that version in the claim's own transaction. The row names `m`
//! only after a renewal that bumped `m`; the claim that won the term came
//! before that, and every statement that extended the holder's validity
//! since (its renewals) bumped `m` in its transaction. None committed
//! after the first sight (the version would differ), so each was sent
//! before it, and the holder's validity (`ttl - margin` from before
//! sending) ran out before the claim.
//!
//! A heartbeat deleted by hand shows no version: the claim's condition fails,
//! and the per-row rule ([`may_claim`](crate::lease_row::may_claim)) still
//! applies. The holder's next bump writes it again from a random version,
//! so a version is not seen twice by chance.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::lease_row::Found;

/// How long a heartbeat no set bumps is kept before a closing set deletes it
/// (a set that crashed leaves its heartbeat behind): a day, in milliseconds of
/// the wall clock (only a cleanup: a deleted heartbeat takes nothing over).
///
/// ```
/// assert_eq!(election_sql::HEARTBEAT_KEPT_MS, 86_400_000);
/// ```
pub const HEARTBEAT_KEPT_MS: i64 = 86_400_000;

/// A heartbeat as read: its id and the version it showed. In a key row's read,
/// the heartbeat that row's term names (and the version in the same read).
///
/// ```
/// use election_sql::Heartbeat;
///
/// let seen = Heartbeat { id: 17, version: 4 };
/// assert_eq!(seen.version, 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Heartbeat {
    /// The heartbeat's id: one per lease set (random).
    pub id: i64,
    /// The version it showed.
    pub version: i64,
}

/// What a lease set has seen of every heartbeat: per id, the version and the
/// first instant it was seen at that version.
///
/// ```
/// use std::time::Duration;
/// use election_sql::{HeartbeatBook, Heartbeat};
/// use election_sql::lease_row::Found;
/// use tokio::time::Instant;
///
/// let mut book = HeartbeatBook::default();
/// let t0 = Instant::now();
/// let ttl = Duration::from_secs(3);
/// let heartbeat = Heartbeat { id: 17, version: 4 };
/// book.see([heartbeat], t0);
/// let found = Found::Held { holder: "node-b".into(), epoch: 3, version: 9, ttl_ms: 3_000 };
/// assert_eq!(book.may_take(&found, Some(heartbeat), ttl, t0 + ttl / 2), None);
/// assert_eq!(book.may_take(&found, Some(heartbeat), ttl, t0 + ttl), Some(4)); // unchanged a full TTL
/// ```
#[derive(Clone, Debug, Default)]
pub struct HeartbeatBook {
    seen: HashMap<i64, (i64, Instant)>,
}

impl HeartbeatBook {
    /// Takes in a listing of every heartbeat, read before `now`: a heartbeat at the
    /// version it was seen at before keeps its first sight; a heartbeat at
    /// another version, or new, is first seen `now`; a heartbeat missing from
    /// the listing is forgotten.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::{HeartbeatBook, Heartbeat};
    /// use election_sql::lease_row::Found;
    /// use tokio::time::Instant;
    ///
    /// let mut book = HeartbeatBook::default();
    /// let (t0, ttl) = (Instant::now(), Duration::from_secs(3));
    /// let found = Found::Held { holder: "node-b".into(), epoch: 3, version: 9, ttl_ms: 3_000 };
    /// book.see([Heartbeat { id: 17, version: 4 }], t0);
    /// book.see([Heartbeat { id: 17, version: 5 }], t0 + ttl); // bumped: seen afresh
    /// let bumped = Some(Heartbeat { id: 17, version: 5 });
    /// assert_eq!(book.may_take(&found, bumped, ttl, t0 + ttl), None);
    /// book.see([], t0 + ttl); // gone from the listing: forgotten
    /// assert_eq!(book.may_take(&found, bumped, ttl, t0 + 3 * ttl), None);
    /// ```
    pub fn see(&mut self, listed: impl IntoIterator<Item = Heartbeat>, now: Instant) {
        let mut next = HashMap::new();
        for m in listed {
            let since = match self.seen.get(&m.id) {
                Some(&(version, since)) if version == m.version => since,
                _ => now,
            };
            next.insert(m.id, (m.version, since));
        }
        self.seen = next;
    }

    /// The version a claim of a row found as `found`, whose term names
    /// `heartbeat` (as read with the row), may be conditioned on: `Some` if the
    /// row is held, and this book has seen that heartbeat at that very version
    /// for a full TTL (the longer of `ttl` and the row's) by `now`.
    /// `None` otherwise (the per-row rule decides).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::{HeartbeatBook, Heartbeat};
    /// use election_sql::lease_row::Found;
    /// use tokio::time::Instant;
    ///
    /// let mut book = HeartbeatBook::default();
    /// let (t0, ttl) = (Instant::now(), Duration::from_secs(3));
    /// book.see([Heartbeat { id: 17, version: 4 }], t0);
    /// // The row's holder runs a longer TTL: that one counts.
    /// let found = Found::Held { holder: "node-b".into(), epoch: 3, version: 9, ttl_ms: 10_000 };
    /// let heartbeat = Some(Heartbeat { id: 17, version: 4 });
    /// assert_eq!(book.may_take(&found, heartbeat, ttl, t0 + ttl), None);
    /// assert_eq!(book.may_take(&found, heartbeat, ttl, t0 + Duration::from_secs(10)), Some(4));
    /// assert_eq!(book.may_take(&found, None, ttl, t0 + Duration::from_secs(10)), None); // no heartbeat
    /// ```
    pub fn may_take(
        &self,
        found: &Found,
        heartbeat: Option<Heartbeat>,
        ttl: Duration,
        now: Instant,
    ) -> Option<i64> {
        let Found::Held { ttl_ms, .. } = found else {
            return None;
        };
        let heartbeat = heartbeat?;
        let &(version, since) = self.seen.get(&heartbeat.id)?;
        if version != heartbeat.version {
            return None;
        }
        let holders = Duration::from_millis(u64::try_from(*ttl_ms).unwrap_or(u64::MAX));
        (now.saturating_duration_since(since) >= ttl.max(holders)).then_some(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One statement of the holder: sent at `sent` ms, committed at
    /// `sent + lag` ms (each bumps the heartbeat at its commit).
    #[derive(Clone, Debug)]
    struct Statement {
        sent: u64,
        lag: u64,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The rule keeps rule 2: whatever the holder's statements (sent,
        /// committed late, in any order) and whenever the contender lists
        /// the heartbeats and tries, a take the book allows (conditional on the
        /// version at the try being the one allowed) comes after the end of
        /// the validity of every statement that committed before it. And it
        /// is not late: once the holder stops, a contender listing every
        /// `every` ms may take by its last commit + `every` + TTL.
        #[test]
        fn a_take_by_heartbeat_comes_after_every_validity_and_about_a_ttl_after_the_last(
            mut statements in proptest::collection::vec((0u64..20_000, 0u64..400), 0..30),
            every in 1u64..2_000,
            tries in proptest::collection::vec(0u64..40_000, 1..40),
        ) {
            let ttl_ms = 3_000u64;
            let ttl = Duration::from_millis(ttl_ms);
            let validity = ttl_ms - ttl_ms / 10;
            statements.sort_by_key(|&(sent, lag)| sent + lag);
            let statements: Vec<Statement> =
                statements.into_iter().map(|(sent, lag)| Statement { sent, lag }).collect();
            let t0 = Instant::now();
            let at = |ms: u64| t0 + Duration::from_millis(ms);
            // The heartbeat's version at `ms`: statements committed by then.
            let version_at = |ms: u64| {
                i64::try_from(statements.iter().filter(|s| s.sent + s.lag <= ms).count()).unwrap_or(i64::MAX)
            };
            let found = Found::Held { holder: "a".into(), epoch: 2, version: 1, ttl_ms: ttl_ms.cast_signed() };
            let mut book = HeartbeatBook::default();
            let mut listed_until = 0;
            let mut tries = tries;
            tries.sort_unstable();
            for t in tries {
                // Listings every `every` ms up to the try (each read at
                // its instant).
                while listed_until + every <= t {
                    listed_until += every;
                    book.see([Heartbeat { id: 1, version: version_at(listed_until) }], at(listed_until));
                }
                let now_version = version_at(t);
                let heartbeat = Some(Heartbeat { id: 1, version: now_version });
                if let Some(v) = book.may_take(&found, heartbeat, ttl, at(t)) {
                    prop_assert_eq!(v, now_version);
                    for s in statements.iter().filter(|s| s.sent + s.lag <= t) {
                        prop_assert!(s.sent + validity <= t,
                            "taken at {} ms; a statement sent at {} ms is valid until {} ms",
                            t, s.sent, s.sent + validity);
                    }
                }
                // The first listing at or after the last commit.
                let last = statements.last().map_or(0, |s| s.sent + s.lag);
                let first_listing = last.div_ceil(every).max(1) * every;
                if t >= first_listing + ttl_ms {
                    prop_assert!(book.may_take(&found, heartbeat, ttl, at(t)).is_some(),
                        "not taken at {} ms: last commit {} ms, listed at {} ms", t, last, first_listing);
                }
            }
        }
    }

    #[test]
    fn a_heartbeat_at_another_version_or_unlisted_allows_nothing() {
        let (t0, ttl) = (Instant::now(), Duration::from_secs(3));
        let found = Found::Held {
            holder: "b".into(),
            epoch: 3,
            version: 9,
            ttl_ms: 3_000,
        };
        let mut book = HeartbeatBook::default();
        book.see([Heartbeat { id: 1, version: 4 }], t0);
        let later = t0 + 2 * ttl;
        assert_eq!(
            book.may_take(&found, Some(Heartbeat { id: 1, version: 5 }), ttl, later),
            None,
            "the row's read saw a newer version than the book"
        );
        assert_eq!(
            book.may_take(&found, Some(Heartbeat { id: 2, version: 4 }), ttl, later),
            None,
            "a heartbeat never listed"
        );
        assert_eq!(
            book.may_take(
                &Found::Vacant,
                Some(Heartbeat { id: 1, version: 4 }),
                ttl,
                later
            ),
            None,
            "only a held row is taken by heartbeat"
        );
        book.see([Heartbeat { id: 1, version: 5 }], later);
        book.see([Heartbeat { id: 1, version: 4 }], later + ttl);
        assert_eq!(
            book.may_take(
                &found,
                Some(Heartbeat { id: 1, version: 4 }),
                ttl,
                later + ttl
            ),
            None,
            "a version seen again (the heartbeat written anew) counts from its new sight"
        );
    }
}
