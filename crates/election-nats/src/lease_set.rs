//! [`NatsLeases`]: a lease set in two KV buckets, with one renewal per
//! process instead of one per key.

use std::sync::Arc;

use election_core::{Asked, Closing, Epoch, Identity, KeyState, KeyedClaims};

use crate::connection::Connection;
use crate::error::Error;
use crate::lease_steps::Steps;

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
///   for all keys); every key naming it stays held. Validity is counted
///   from the monotonic instant before the session write, minus the margin
///   (`ttl − ttl/10`), as for single elections. Each renewal also reads
///   both buckets' stream info: a recreated sessions bucket, or a max age
///   below the TTL, loses the session (every key); a recreated keys bucket
///   loses every key held (they are claimed again in the new bucket).
/// - **Taking a key over** from another process needs its session dead:
///   aged out (the server's TTL marker) or deleted. After an age-out the
///   failover grace applies; after a delete (a clean close) it does not.
///   Session deaths are learned from a watch of the sessions bucket and
///   re-checked with exact reads (through the stream leader) for sessions
///   not seen for a TTL.
/// - **A guard** claims the key if it is free (waiting out a failover grace
///   that ends soon), renews the session first if less than half its
///   validity is left, then runs the commit-point check.
/// - **The commit-point check** of a guard reads the key and the session
///   through the stream leader (concurrently: one round trip): the key must
///   still carry this term, the session must still live.
/// - **Close** deletes the session: every key it held is free for others at
///   once. If the delete cannot be sent (or the process dies), the session
///   ages out after the TTL and the keys move after TTL + grace.
///
/// Buckets: `<bucket>-sessions` (max age = TTL, with TTL markers) and
/// `<bucket>-keys` (no max age). Identities must be unique per process.
pub struct NatsLeases {
    steps: Steps,
}

impl std::fmt::Debug for NatsLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsLeases")
            .field("identity", &self.steps.identity)
            .finish_non_exhaustive()
    }
}

impl NatsLeases {
    /// Opens (or creates) the buckets `<bucket>-sessions` and
    /// `<bucket>-keys` and starts this process's session (see
    /// [`NatsElection::lease_set`](crate::NatsElection::lease_set)).
    pub(crate) async fn open(
        conn: Arc<Connection>,
        identity: Identity,
    ) -> Result<NatsLeases, Error> {
        Ok(NatsLeases {
            steps: Steps::open(conn, identity).await?,
        })
    }

    /// Keeps the session alive; starts a new one after a loss.
    async fn keep_session(&self, closing: Closing) {
        let options = self.steps.options();
        let mut ok = true;
        loop {
            // After a failure, retry soon: the deadline leaves room for
            // several tries (validity >= 2 renew intervals).
            let wait = if ok {
                options.renew_every()
            } else {
                options.renew_every() / 4
            };
            tokio::select! {
                biased;
                () = closing.closed() => return,
                () = tokio::time::sleep(wait) => {}
            }
            ok = self.steps.renew_session().await;
        }
    }

    /// Reads or claims every asked key that needs it, then sleeps until
    /// the next look is due or a watch or an ask rings.
    async fn claim_loop(&self, closing: Closing) {
        loop {
            let (work, due) = self.steps.plan();
            self.steps.claim_many(work).await;
            tokio::select! {
                biased;
                () = closing.closed() => return,
                () = self.steps.wake.notified() => {}
                () = tokio::time::sleep_until(due) => {}
            }
        }
    }
}

impl KeyedClaims for NatsLeases {
    fn identity(&self) -> &Identity {
        &self.steps.identity
    }

    async fn run(self: Arc<Self>, mut asked: Asked) {
        let closing = asked.closing();
        let asks = async {
            while let Some(state) = asked.next().await {
                self.steps.ask(state);
            }
        };
        tokio::join!(
            self.steps.follow_keys(&closing),
            self.steps.follow_sessions(&closing),
            asks,
            self.keep_session(closing.clone()),
            self.claim_loop(closing.clone())
        );
        self.steps.release_all().await;
    }

    async fn commit(&self, state: &Arc<KeyState>) -> Result<Epoch, election_core::Error> {
        self.steps.confirm(state).await
    }
}
