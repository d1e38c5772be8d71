//! [`NatsKeyedClaims`]: the keyed claims of a lease set in two KV buckets,
//! with one renewal per process instead of one per key. The core's keyed
//! engine drives it; the steps (one I/O operation each) are in `steps`,
//! the table of what this process knows about each key and session, and
//! the pure decisions over it, in `key_table`.

pub(crate) mod key_table;
pub(crate) mod steps;

use std::sync::{Arc, Mutex};

use election_core::{
    Claimed, ElectionName, Epoch, HeldKey, HoldReporter, Identity, KeyedClaims, LossReason,
    RenewalPolicy,
};
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::keyed::steps::{SessionRenewal, Steps};
use crate::store::connection::Connection;

/// A [`LeaseSet`](election_core::LeaseSet) backend in NATS KV for many keys per process: one
/// *session* key per process, renewed every renew interval, and one key per
/// lease naming the session that holds it.
///
/// - **Winning a key** is a compare-and-set on it (an update expecting the
///   revision last seen: 0 for a key never written, the delete marker or
///   the dead holder's record); the **epoch is the keys bucket's creation
///   time in microseconds plus the revision of that write** (keys are
///   written once per term, so later terms have higher revisions; a
///   recreated keys bucket has a later creation time, so its epochs are
///   higher still). The win counts only if the keys bucket's creation time
///   after the write is the one read before it.
/// - **Renewal** renews only the session (one request per renew interval
///   for all keys, run by the core's renewal machine while the set holds
///   keys); every key naming it stays held. A set holding nothing lets its
///   session age out and starts a new one with its next claim. Validity is counted
///   from the monotonic instant before the session write, minus the margin
///   (`ttl − ttl/10`), as for single elections. Each renewal also reads
///   both buckets' stream info: a recreated sessions bucket, or a max age
///   below the TTL, loses the session (every key); a recreated keys bucket
///   loses every key held (they are claimed again in the new bucket).
/// - **The keys watch must keep up**: a renewal counts only once the watch
///   of the keys bucket has delivered it up to its last revision, read
///   after the session write, so a record that ended a held key (an
///   operator's revocation, a write by hand) is known before validity
///   grows (ADR 0111).
/// - **A revoked key** (a revocation's record under it, written by
///   [`NatsElection::revoke`](crate::NatsElection::revoke)) is lost by its
///   holder; others claim over it once they have seen it for the TTL and
///   the failover grace.
/// - **Taking a key over** from another process needs its session dead:
///   aged out (the server's TTL marker) or deleted. After an age-out the
///   failover grace applies; after a delete (a clean close) it does not.
///   Session deaths are learned from a watch of the sessions bucket and
///   re-checked with exact reads (through the stream leader) for sessions
///   not seen for a TTL.
/// - **A guard** of a key not held has the set claim it once more (a key
///   in its failover grace is held by another until the grace ends), renews
///   the session first if less than half its validity is left, then runs
///   the commit-point check.
/// - **The commit-point check** of a guard reads the key and the session
///   through the stream leader (concurrently: one round trip): the key must
///   still carry this term, the session must still live.
/// - **Close** deletes the session: every key it held is free for others at
///   once. If the delete cannot be sent (or the process dies), the session
///   ages out after the TTL and the keys move after TTL + grace.
///
/// Buckets: `<bucket>-sessions` (max age = TTL, with TTL markers) and
/// `<bucket>-keys` (no max age). Identities must be unique per process.
pub struct NatsKeyedClaims {
    steps: Arc<Steps>,
    /// The two watch tasks (started by `start`), stopped by `close` or a
    /// drop.
    watches: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for NatsKeyedClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsKeyedClaims")
            .field("identity", &self.steps.identity)
            .finish_non_exhaustive()
    }
}

impl NatsKeyedClaims {
    /// Opens (or creates) the buckets `<bucket>-sessions` and
    /// `<bucket>-keys` and starts this process's session (see
    /// [`NatsElection::lease_set`](crate::NatsElection::lease_set)).
    pub(crate) async fn open(
        conn: Arc<Connection>,
        identity: Identity,
    ) -> Result<NatsKeyedClaims, Error> {
        Ok(NatsKeyedClaims {
            steps: Arc::new(Steps::open(conn, identity).await?),
            watches: Mutex::new(Vec::new()),
        })
    }

    fn stop_watches(&self) {
        for task in self
            .watches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

impl Drop for NatsKeyedClaims {
    fn drop(&mut self) {
        self.stop_watches();
    }
}

impl KeyedClaims for NatsKeyedClaims {
    fn identity(&self) -> &Identity {
        &self.steps.identity
    }

    fn backend(&self) -> &'static str {
        "nats"
    }

    /// The session's: one renewal (of the session) for every key held.
    fn renewal(&self) -> Option<RenewalPolicy> {
        Some(self.steps.policy)
    }

    /// Starts the watches of both buckets; they report losses to
    /// `reporter` and wake [`wait`](KeyedClaims::wait).
    fn start(&self, reporter: HoldReporter) {
        self.steps.set_reporter(reporter);
        let (keys, sessions) = (self.steps.clone(), self.steps.clone());
        let mut watches = self.watches.lock().unwrap_or_else(|p| p.into_inner());
        watches.push(tokio::spawn(async move { keys.follow_keys().await }));
        watches.push(tokio::spawn(
            async move { sessions.follow_sessions().await },
        ));
    }

    async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<Claimed, election_core::Error>> {
        self.steps.claim_keys(keys).await
    }

    /// Renews the session once; every key of `held` it still holds is
    /// renewed with it. A session found over refuses every key.
    async fn renew(
        &self,
        held: &[HeldKey],
    ) -> Result<Vec<(ElectionName, LossReason)>, election_core::Error> {
        let outcome = self.steps.renew_session().await;
        // A set: `held` has every key this set holds (thousands), and a
        // scan of a list per key made each renewal quadratic (ADR 0079).
        let still: std::collections::HashSet<HeldKey> = self.steps.held().into_iter().collect();
        let refused = |detail: &str| {
            held.iter()
                .filter(|k| !still.contains(k))
                .map(|(key, _)| {
                    let detail = detail.into();
                    (key.clone(), LossReason::Revoked { detail })
                })
                .collect()
        };
        match outcome {
            SessionRenewal::Renewed => Ok(refused("the key carries another term")),
            SessionRenewal::Lost => Ok(refused("the lease-set session is gone")),
            SessionRenewal::Failed(e) => match held.first() {
                Some((key, _)) => Err(e.into_core(key)),
                None => Ok(Vec::new()),
            },
        }
    }

    async fn confirm(&self, key: &ElectionName, epoch: Epoch) -> Result<(), election_core::Error> {
        self.steps.confirm(key, epoch).await
    }

    /// Ends the session: every key it held is free for others at once.
    async fn release(&self, _held: &[HeldKey]) {
        self.steps.release_all().await;
    }

    /// Deletes each given key's record, expecting the revision of its
    /// term (never a successor's): free for others at once (a delete: no
    /// failover grace); the session and the other keys run on.
    async fn give(&self, held: &[HeldKey]) {
        self.steps.release_keys(held).await;
    }

    async fn wait(&self) {
        self.steps.wait().await;
    }

    /// Stops the watches and ends the session if `release` did not.
    async fn close(&self) {
        self.stop_watches();
        self.steps.release_all().await;
    }
}
