//! The key table of a lease set ([`NatsKeyedClaims`](crate::NatsKeyedClaims)):
//! what this process knows about each asked key and each session, and what
//! to do next about a key, as pure functions of that knowledge and the
//! caller's instant. No I/O: the steps (`steps`) feed it what the server
//! answered and the watches delivered, and act on what it says.
//!
//! Its invariants (property-tested below):
//! - a key held by another session is claimed only once that session is
//!   dead, and after an age-out only after the failover grace;
//! - dead is final: no later news revives a session;
//! - a record under a key this process holds that is not its term's is a
//!   loss, and so is the end of this process's session (every key);
//! - a record of this process's own session is never adopted without a
//!   claim (its bucket incarnation, so its epoch, is unknown);
//! - older news (a lower revision) changes nothing;
//! - a revocation's record is claimed over only once this process has
//!   seen it for the TTL and the failover grace (the deposed holder's keys
//!   run out within a TTL of the record, ADR 0111).

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{ElectionName, Epoch, Identity, Leader, LossReason};
use tokio::time::Instant;

use crate::store::bucket;
use crate::store::record::SessionRecord;
use crate::store::session::Session;

/// The latest record of a key, as this process last saw it.
#[derive(Clone, Debug)]
pub(crate) enum Seen {
    /// Not read yet, or a claim of ours failed and the key must be read.
    Unknown,
    /// No holder: never written (revision 0) or deleted.
    Vacant { revision: u64 },
    /// Written by the session `session` of `identity` at `revision` (the
    /// epoch of that term: keys are written once per term).
    Held {
        revision: u64,
        session: u64,
        identity: Identity,
    },
    /// A revocation's record at `revision` (ADR 0111), written by `by`: no
    /// holder, but claimed over only once seen for the TTL and the grace.
    Revoked { revision: u64, by: Identity },
}

impl Seen {
    /// The revision of the record seen (0: none, or not read).
    fn revision(&self) -> u64 {
        match self {
            Seen::Unknown => 0,
            Seen::Vacant { revision }
            | Seen::Held { revision, .. }
            | Seen::Revoked { revision, .. } => *revision,
        }
    }
}

/// Whether another process's session lives, as this process last saw it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Liveness {
    Alive {
        seen: Instant,
    },
    /// Aged out or deleted; never alive again (its renewals now fail).
    Dead {
        since: Instant,
        clean: bool,
    },
}

/// A key this process held and lost: the core must hear of it at once.
pub(crate) type LostKey = (ElectionName, Epoch, LossReason);

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) name: ElectionName,
    /// The revision (= epoch) of this process's term on the key.
    pub(crate) mine: Option<u64>,
    pub(crate) seen: Seen,
    /// Since when the holder's session has been unknown to this process,
    /// or (for [`Seen::Revoked`]) since when it has seen the revocation.
    pub(crate) unknown_since: Option<Instant>,
}

#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    /// Asked keys, by KV key.
    pub(crate) entries: HashMap<String, Entry>,
    pub(crate) sessions: HashMap<u64, Liveness>,
    /// This process's live session, if any.
    pub(crate) own: Option<Session>,
    /// The creation time (µs) of the keys bucket's incarnation: the base
    /// of every epoch of a key (`keys_base + revision`).
    pub(crate) keys_base: u64,
    /// The creation time (µs) of the sessions bucket's incarnation.
    pub(crate) sessions_base: u64,
}

/// What to do next about a key this process does not hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Claim it: an update expecting `revision`.
    Claim { revision: u64 },
    /// Read the key (and its holder's session) exactly.
    Read,
    /// Nothing before `at` (a failover grace, or a session in doubt);
    /// news from the watches may come first.
    At(Instant),
}

impl KeyTable {
    /// A table with this process's first session `own`, the keys bucket's
    /// incarnation `keys_base` and the sessions bucket's `sessions_base`.
    pub(crate) fn new(own: Session, keys_base: u64, sessions_base: u64) -> KeyTable {
        KeyTable {
            own: Some(own),
            keys_base,
            sessions_base,
            ..KeyTable::default()
        }
    }

    /// Key `kv_key` (of lease `name`) is asked about (once: asking again
    /// changes nothing).
    pub(crate) fn ask(&mut self, kv_key: &str, name: &ElectionName) {
        if !self.entries.contains_key(kv_key) {
            self.entries.insert(
                kv_key.to_owned(),
                Entry {
                    name: name.clone(),
                    mine: None,
                    seen: Seen::Unknown,
                    unknown_since: None,
                },
            );
        }
    }

    /// When the next claim of a key not held here is due at the latest
    /// (`renew_every` from `now`, or sooner if a grace or a doubt ends
    /// sooner); news from the watches may come first.
    pub(crate) fn due(
        &self,
        now: Instant,
        ttl: Duration,
        grace: Duration,
        renew_every: Duration,
    ) -> Instant {
        self.entries
            .values()
            .filter(|e| e.mine.is_none())
            .map(|e| match self.next(e, now, ttl, grace) {
                Next::At(at) => at,
                Next::Claim { .. } | Next::Read => now,
            })
            .fold(now + renew_every, Instant::min)
    }

    /// The holder of `entry`'s key as last seen here, if another's.
    pub(crate) fn holder(&self, entry: &Entry) -> Option<Leader> {
        match &entry.seen {
            Seen::Held {
                revision,
                session,
                identity,
            } if self.own.is_none_or(|o| o.id != *session) => Some(Leader {
                identity: identity.clone(),
                epoch: self.epoch_of(*revision).unwrap_or(Epoch::FIRST),
                // Lease-set keys carry no start time.
                since: None,
                renewed: None,
                ttl: None,
                value: None,
            }),
            _ => None,
        }
    }

    /// A claim of `kv_key` by session `session` landed at `revision` (of
    /// term `epoch`) in the keys bucket incarnation `base`, checked after
    /// the write. Held from now on (the answer is the session's validity),
    /// unless the bucket seen here moved on meanwhile or the session ended
    /// (then the key names a dead session).
    pub(crate) fn won(
        &mut self,
        kv_key: &str,
        base: u64,
        revision: u64,
        session: u64,
        identity: &Identity,
    ) -> Option<Instant> {
        let own = self.own;
        if self.keys_base != base {
            return None;
        }
        let entry = self.entries.get_mut(kv_key)?;
        entry.seen = Seen::Held {
            revision,
            session,
            identity: identity.clone(),
        };
        let o = own.filter(|o| o.id == session)?;
        entry.mine = Some(revision);
        tracing::debug!(key = %entry.name, revision, "lease-set key won");
        Some(o.valid_until)
    }

    /// The own session was renewed as `session` (a renewal of a session
    /// already lost or replaced here changes nothing); the keys it holds
    /// are valid until it is.
    pub(crate) fn renewed(&mut self, session: Session) -> bool {
        if self.own.is_none_or(|o| o.id != session.id) {
            return false;
        }
        self.own = Some(session);
        true
    }

    /// The keys held here now, with their epochs.
    pub(crate) fn held(&self) -> Vec<(ElectionName, Epoch)> {
        self.entries
            .values()
            .filter_map(|e| Some((e.name.clone(), self.epoch_of(e.mine?)?)))
            .collect()
    }

    /// The core does not hold `kv_key` (it asks for it, or the commit
    /// point found it taken): not held here either, without a loss notice.
    pub(crate) fn forget(&mut self, kv_key: &str) {
        if let Some(e) = self.entries.get_mut(kv_key) {
            e.mine = None;
        }
    }

    /// Closing: nothing is held from here on; returns the session to end.
    pub(crate) fn release_all(&mut self) -> Option<Session> {
        for entry in self.entries.values_mut() {
            entry.mine = None;
        }
        self.own.take()
    }

    /// Every key held here is lost for `why`: their losses.
    fn lose_all(&mut self, why: &str) -> Vec<LostKey> {
        let keys_base = self.keys_base;
        self.entries
            .values_mut()
            .filter_map(|e| {
                let epoch = bucket::epoch_at(keys_base, e.mine.take()?).ok()?;
                Some((
                    e.name.clone(),
                    epoch,
                    LossReason::Revoked { detail: why.into() },
                ))
            })
            .collect()
    }

    /// The epoch of a key's term won at `revision` in the keys bucket's
    /// current incarnation.
    pub(crate) fn epoch_of(&self, revision: u64) -> Option<Epoch> {
        bucket::epoch_at(self.keys_base, revision).ok()
    }

    /// The keys bucket was deleted and recreated (its creation time is now
    /// `base`): every key held here is lost (its record is gone, and its
    /// epoch belonged to the old incarnation), and every key is read again.
    pub(crate) fn keys_recreated(&mut self, base: u64) -> Vec<LostKey> {
        tracing::warn!(
            old = self.keys_base,
            new = base,
            "the lease-set keys bucket was recreated: every key held is lost"
        );
        let lost = self.lose_all("the lease-set keys bucket was recreated");
        self.keys_base = base;
        for entry in self.entries.values_mut() {
            entry.seen = Seen::Unknown;
            entry.unknown_since = None;
        }
        lost
    }

    /// What to do about a key this process does not hold, at `now`.
    pub(crate) fn next(&self, entry: &Entry, now: Instant, ttl: Duration, grace: Duration) -> Next {
        match &entry.seen {
            Seen::Unknown => Next::Read,
            Seen::Vacant { revision } => Next::Claim {
                revision: *revision,
            },
            // The deposed holder counts its keys valid for at most a TTL
            // after the record (its renewals prove its keys watch caught
            // up first): seen for a TTL and the grace, it is over.
            Seen::Revoked { revision, .. } => {
                let ready = entry.unknown_since.unwrap_or(now) + ttl + grace;
                if now >= ready {
                    Next::Claim {
                        revision: *revision,
                    }
                } else {
                    Next::At(ready)
                }
            }
            // A record of this process's live session that no claim of
            // it has resolved: refresh it (see `saw_key`).
            Seen::Held {
                revision, session, ..
            } if self.own.is_some_and(|o| o.id == *session) => Next::Claim {
                revision: *revision,
            },
            Seen::Held {
                revision, session, ..
            } => match self.sessions.get(session) {
                Some(Liveness::Dead { since, clean }) => {
                    let ready = if *clean { *since } else { *since + grace };
                    if now >= ready {
                        Next::Claim {
                            revision: *revision,
                        }
                    } else {
                        Next::At(ready)
                    }
                }
                Some(Liveness::Alive { seen }) => {
                    // Renewals show up every renew interval; none for a
                    // whole TTL means the watch may have missed the end.
                    let doubt = *seen + ttl + grace;
                    if now >= doubt {
                        Next::Read
                    } else {
                        Next::At(doubt)
                    }
                }
                None => {
                    let doubt = entry.unknown_since.unwrap_or(now) + ttl + grace;
                    if now >= doubt {
                        Next::Read
                    } else {
                        Next::At(doubt)
                    }
                }
            },
        }
    }

    pub(crate) fn set_session(&mut self, id: u64, liveness: Liveness) {
        match (self.sessions.get(&id), liveness) {
            // Dead is final: a late Put (stale read or watch) cannot revive it.
            (Some(Liveness::Dead { .. }), Liveness::Alive { .. }) => {}
            (Some(Liveness::Dead { .. }), Liveness::Dead { .. }) => {}
            _ => {
                self.sessions.insert(id, liveness);
            }
        }
    }

    /// Records the latest record of `kv_key`; a change under a key this
    /// process holds is a loss (returned).
    pub(crate) fn saw_key(&mut self, kv_key: &str, seen: Seen, now: Instant) -> Option<LostKey> {
        let own = self.own;
        let keys_base = self.keys_base;
        let sessions = &self.sessions;
        let entry = self.entries.get_mut(kv_key)?;
        let revision = seen.revision();
        let current = entry.seen.revision();
        if revision != 0 && revision < current {
            return None; // older news
        }
        let mut lost = None;
        if let Some(mine) = entry.mine
            && revision != mine
            && revision != 0
        {
            tracing::warn!(key = %entry.name, mine, revision, "lease-set key changed under its holder: lost");
            entry.mine = None;
            lost = bucket::epoch_at(keys_base, mine).ok().map(|epoch| {
                let detail = match &seen {
                    Seen::Revoked { by, .. } => format!("revoked by {by}"),
                    _ => "another record under the key".into(),
                };
                (entry.name.clone(), epoch, LossReason::Revoked { detail })
            });
        }
        if let Seen::Revoked { .. } = &seen {
            // Counted from the first sighting of this record.
            if revision != current || entry.unknown_since.is_none() {
                entry.unknown_since = Some(now);
            }
            entry.seen = seen;
            return lost;
        }
        if let Seen::Held { session, .. } = &seen {
            if let Some(own) = own
                && own.id == *session
            {
                // Our own live session wrote it (a claim whose answer was
                // lost, or a racing claim of this process). Not adopted
                // here: which bucket incarnation it landed in is not known
                // (a recreated keys bucket restarts revisions), so its epoch
                // is not either. The claim loop refreshes it (an update
                // expecting its revision, checked like any claim).
                entry.seen = seen;
                return lost;
            }
            entry.unknown_since = match sessions.get(session) {
                None => entry.unknown_since.or(Some(now)),
                Some(_) => None,
            };
        }
        entry.seen = seen;
        lost
    }

    /// The session `id` is over: every key it held is lost here
    /// (returned, if it was this process's session).
    pub(crate) fn lose_session(&mut self, id: u64, now: Instant) -> Vec<LostKey> {
        self.set_session(
            id,
            Liveness::Dead {
                since: now,
                clean: false,
            },
        );
        if self.own.is_none_or(|s| s.id != id) {
            return Vec::new();
        }
        self.own = None;
        tracing::warn!(
            session = id,
            "lease-set session lost: every key it held is lost"
        );
        self.lose_all("the lease-set session is gone")
    }
}

pub(crate) fn seen_of(key: &str, operation: kv::Operation, revision: u64, value: &[u8]) -> Seen {
    match operation {
        kv::Operation::Put if crate::store::record::is_revoked(value) => {
            match crate::store::record::key_revocation_of(key, value) {
                Ok(Some(r)) => Seen::Revoked { revision, by: r.by },
                _ => {
                    tracing::warn!(key, "unreadable lease-set revocation");
                    Seen::Unknown
                }
            }
        }
        kv::Operation::Put => match SessionRecord::decode(key, value) {
            Ok(r) => Seen::Held {
                revision,
                session: r.session,
                identity: r.identity,
            },
            // Not ours to interpret: treat as held by an unknown session
            // (it will be read again, never taken over blindly).
            Err(e) => {
                tracing::warn!(key, error = %e, "unreadable lease-set record");
                Seen::Unknown
            }
        },
        kv::Operation::Delete | kv::Operation::Purge => Seen::Vacant { revision },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use election_core::ElectionName;
    use proptest::prelude::*;

    const TTL: Duration = Duration::from_secs(3);
    const GRACE: Duration = Duration::from_secs(1);

    fn entry(seen: Seen) -> Entry {
        Entry {
            name: ElectionName::new("k").unwrap(),
            mine: None,
            seen,
            unknown_since: None,
        }
    }

    /// A table whose own session (id 9) is valid for a TTL from `now`.
    fn with_own(now: Instant) -> KeyTable {
        let own = Session {
            id: 9,
            revision: 1,
            valid_until: now + TTL,
        };
        KeyTable::new(own, 1_000_000, 1_000_000)
    }

    /// An entry held here, won at `revision`.
    fn held_here(revision: u64) -> Entry {
        let mut e = entry(Seen::Unknown);
        e.mine = Some(revision);
        e
    }

    fn held_by(session: u64) -> Seen {
        Seen::Held {
            revision: 7,
            session,
            identity: Identity::new("other").unwrap(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_taken_over_only_from_a_dead_session() {
        let now = Instant::now();
        let mut table = KeyTable::default();
        assert_eq!(
            table.next(&entry(Seen::Unknown), now, TTL, GRACE),
            Next::Read
        );
        assert_eq!(
            table.next(&entry(Seen::Vacant { revision: 4 }), now, TTL, GRACE),
            Next::Claim { revision: 4 }
        );
        // A live session: nothing until it could have been missed.
        table.set_session(1, Liveness::Alive { seen: now });
        assert_eq!(
            table.next(&entry(held_by(1)), now, TTL, GRACE),
            Next::At(now + TTL + GRACE)
        );
        assert_eq!(
            table.next(&entry(held_by(1)), now + TTL + GRACE, TTL, GRACE),
            Next::Read
        );
        // Aged out: the grace first.
        table.set_session(
            1,
            Liveness::Dead {
                since: now,
                clean: false,
            },
        );
        assert_eq!(
            table.next(&entry(held_by(1)), now, TTL, GRACE),
            Next::At(now + GRACE)
        );
        assert_eq!(
            table.next(&entry(held_by(1)), now + GRACE, TTL, GRACE),
            Next::Claim { revision: 7 }
        );
        // Dead is final.
        table.set_session(1, Liveness::Alive { seen: now });
        assert!(matches!(
            table.sessions.get(&1),
            Some(Liveness::Dead { .. })
        ));
        // Deleted cleanly: no grace.
        table.set_session(
            2,
            Liveness::Dead {
                since: now,
                clean: true,
            },
        );
        assert_eq!(
            table.next(&entry(held_by(2)), now, TTL, GRACE),
            Next::Claim { revision: 7 }
        );
        // Never seen: a full TTL (+ grace) of doubt, then an exact read.
        let mut unknown = entry(held_by(3));
        unknown.unknown_since = Some(now);
        assert_eq!(
            table.next(&unknown, now, TTL, GRACE),
            Next::At(now + TTL + GRACE)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_foreign_record_under_a_held_key_is_a_loss() {
        let now = Instant::now();
        let mut table = with_own(now);
        table.entries.insert("k".into(), held_here(5));
        assert_eq!(table.held().len(), 1);
        let lost = table.saw_key("k", held_by(1), now);
        let (name, epoch, _) = lost.expect("another session's record under our key");
        assert_eq!((name.as_str(), epoch.get()), ("k", 1_000_005));
        assert_eq!(table.entries["k"].mine, None);
        assert!(table.held().is_empty());
    }

    /// A record of our own session seen on the watch (or by a read) is not
    /// held until a claim refreshed and checked it: it may have landed in
    /// a recreated keys bucket, where its revision gives no epoch.
    #[tokio::test(start_paused = true)]
    async fn an_own_record_is_refreshed_not_adopted() {
        let now = Instant::now();
        let mut table = with_own(now);
        table.entries.insert("k".into(), entry(Seen::Unknown));
        assert!(table.saw_key("k", held_by(9), now).is_none());
        assert_eq!(table.entries["k"].mine, None, "adopted without a refresh");
        assert_eq!(
            table.next(&table.entries["k"], now, TTL, GRACE),
            Next::Claim { revision: 7 }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn losing_the_session_loses_every_key() {
        let now = Instant::now();
        let mut table = with_own(now);
        for (i, k) in ["a", "b"].into_iter().enumerate() {
            let mut e = held_here(i as u64 + 1);
            e.name = ElectionName::new(k).unwrap();
            table.entries.insert(k.into(), e);
        }
        assert!(table.lose_session(1, now).is_empty(), "another's session");
        let mut lost: Vec<_> = table
            .lose_session(9, now)
            .into_iter()
            .map(|l| l.0.as_str().to_owned())
            .collect();
        lost.sort();
        assert_eq!(lost, ["a", "b"]);
        assert!(table.held().is_empty());
        assert!(table.own.is_none());
    }

    /// One thing that can happen to a table with one asked key `k`, held
    /// at first by nobody; sessions 1 and 2 are other processes', 9 this
    /// process's own.
    #[derive(Clone, Debug)]
    enum Op {
        Advance(u64),
        Alive(u64),
        Dead(u64, bool),
        SawHeld(u64, u64),
        SawVacant(u64),
        /// An operator's revocation's record at a revision (ADR 0111).
        SawRevoked(u64),
        /// A claim as [`KeyTable::next`] says, if it says so: won one revision
        /// above the highest seen.
        Win,
        LoseOwn,
    }

    fn op() -> impl Strategy<Value = Op> {
        let session = prop_oneof![Just(1u64), Just(2), Just(OWN)];
        prop_oneof![
            (0u64..2_500).prop_map(Op::Advance),
            prop_oneof![Just(1u64), Just(2)].prop_map(Op::Alive),
            (prop_oneof![Just(1u64), Just(2)], any::<bool>()).prop_map(|(s, c)| Op::Dead(s, c)),
            (1u64..30, session).prop_map(|(r, s)| Op::SawHeld(r, s)),
            (1u64..30).prop_map(Op::SawVacant),
            (1u64..30).prop_map(Op::SawRevoked),
            Just(Op::Win),
            Just(Op::Win),
            Just(Op::LoseOwn),
        ]
    }

    const OWN: u64 = 9;
    const BASE: u64 = 1_000_000;

    fn revision_of(seen: &Seen) -> u64 {
        match seen {
            Seen::Unknown => 0,
            Seen::Vacant { revision }
            | Seen::Held { revision, .. }
            | Seen::Revoked { revision, .. } => *revision,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The decision table's invariants over any sequence of news.
        #[test]
        fn the_decision_table_keeps_its_invariants(ops in proptest::collection::vec(op(), 1..60)) {
            let start = Instant::now();
            let mut now = start;
            let me = Identity::new("me").unwrap();
            let mut table = KeyTable::new(
                Session { id: OWN, revision: 1, valid_until: start + Duration::from_secs(3600) },
                BASE,
                BASE,
            );
            table.ask("k", &ElectionName::new("k").unwrap());
            // The model: each session's first death (dead is final).
            let mut deaths: HashMap<u64, (Instant, bool)> = HashMap::new();
            // What each revision of the key is (a revision is one write:
            // news of it always says the same).
            let mut writes: HashMap<u64, Op> = HashMap::new();
            // When this process first saw each revocation's record.
            let mut revoked_seen: HashMap<u64, Instant> = HashMap::new();
            for op in ops {
                let op = match op {
                    Op::SawHeld(r, _) | Op::SawVacant(r) | Op::SawRevoked(r) => {
                        writes.entry(r).or_insert(op).clone()
                    }
                    other => other,
                };
                let before = table.entries["k"].seen.clone();
                let mine_before = table.entries["k"].mine;
                let mut lost = Vec::new();
                match op.clone() {
                    Op::Advance(ms) => now += Duration::from_millis(ms),
                    Op::Alive(s) => table.set_session(s, Liveness::Alive { seen: now }),
                    Op::Dead(s, clean) => {
                        deaths.entry(s).or_insert((now, clean));
                        table.set_session(s, Liveness::Dead { since: now, clean });
                    }
                    Op::SawHeld(revision, session) => {
                        let identity = Identity::new(if session == OWN { "me" } else { "other" }).unwrap();
                        lost.extend(table.saw_key("k", Seen::Held { revision, session, identity }, now));
                    }
                    Op::SawVacant(revision) => lost.extend(table.saw_key("k", Seen::Vacant { revision }, now)),
                    Op::SawRevoked(revision) => {
                        if revision >= revision_of(&before) {
                            revoked_seen.entry(revision).or_insert(now);
                        }
                        let by = Identity::new("ops").unwrap();
                        lost.extend(table.saw_key("k", Seen::Revoked { revision, by }, now));
                    }
                    Op::Win => {
                        let e = &table.entries["k"];
                        if e.mine.is_none()
                            && let Next::Claim { revision } = table.next(e, now, TTL, GRACE)
                        {
                            // The takeover rule, checked where it is used.
                            if let Seen::Held { session, .. } = &e.seen
                                && *session != OWN
                            {
                                let (since, clean) = deaths.get(session).copied()
                                    .expect("a key taken from a session never seen dead");
                                let ready = if clean { since } else { since + GRACE };
                                prop_assert!(now >= ready, "taken {:?} before the grace ended", ready - now);
                            }
                            // A revocation is claimed over only once seen
                            // for the TTL and the grace.
                            if let Seen::Revoked { revision: r, .. } = &e.seen {
                                let first = revoked_seen[r];
                                prop_assert!(now >= first + TTL + GRACE, "a revocation claimed over {:?} early", first + TTL + GRACE - now);
                            }
                            let won = revision.max(writes.keys().copied().max().unwrap_or(0)) + 1;
                            writes.insert(won, Op::SawHeld(won, OWN));
                            // Held only with a live own session.
                            let held = table.won("k", BASE, won, OWN, &me).is_some();
                            prop_assert_eq!(held, table.own.is_some());
                        }
                    }
                    Op::LoseOwn => lost = table.lose_session(OWN, now),
                }
                let e = &table.entries["k"];
                // A key held here stops being held only with a loss
                // notice for its term, and a notice only for a key held.
                let ended = mine_before.filter(|_| e.mine.is_none());
                let noticed: Vec<_> = lost.iter().map(|(n, epoch, _)| (n.as_str(), epoch.get())).collect();
                let expected: Vec<_> = ended.map(|m| ("k", BASE + m)).into_iter().collect();
                prop_assert_eq!(noticed, expected);
                // No session: nothing held, nothing won.
                if table.own.is_none() {
                    prop_assert!(e.mine.is_none());
                }
                // Dead is final, from its first death.
                for (s, (since, clean)) in &deaths {
                    match table.sessions.get(s) {
                        Some(Liveness::Dead { since: d, clean: c }) => {
                            prop_assert_eq!((d, c), (since, clean));
                        }
                        other => prop_assert!(false, "session {} revived: {:?}", s, other),
                    }
                }
                if let Op::SawHeld(revision, _) | Op::SawVacant(revision) | Op::SawRevoked(revision) = op {
                    if revision < revision_of(&before) {
                        // Older news changes nothing.
                        prop_assert_eq!(revision_of(&e.seen), revision_of(&before));
                        prop_assert_eq!(e.mine, mine_before);
                    } else if mine_before.is_some_and(|m| m != revision) {
                        // Another record under a held key: lost.
                        prop_assert!(e.mine.is_none());
                    }
                    // An own record is never adopted without a claim.
                    if mine_before.is_none() {
                        prop_assert!(e.mine.is_none());
                    }
                }
                // Only a key held by a session seen dead is ever claimed
                // from another process, and never before its grace ends.
                if e.mine.is_none()
                    && let Seen::Held { session, .. } = &e.seen
                    && *session != OWN
                    && let Next::Claim { .. } = table.next(e, now, TTL, GRACE)
                {
                    let (since, clean) = deaths[session];
                    let ready = if clean { since } else { since + GRACE };
                    prop_assert!(now >= ready, "claimable before the grace ended");
                }
            }
        }
    }
}
