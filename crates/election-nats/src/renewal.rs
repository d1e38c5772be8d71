//! The renewal of a single claim's term ([`NatsClaim`](crate::NatsClaim)):
//! the term an attempt holds ([`HeldTerm`]), and the loop that renews it on
//! the core's renewal driver (rule 2), each renewal a compare-and-set
//! update of the key. (A lease set renews its one session instead:
//! `keyed/steps.rs`, `store/session.rs`.)

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{
    ElectionName, Epoch, Identity, LeaderValue, LossReason, RenewalPolicy, Renewed, TermReporter,
    renew_until_lost,
};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::Error;
use crate::store::connection::Connection;
use crate::store::record::ClaimRecord;
use crate::store::settled::settled;

/// The term an attempt holds: its epoch and the revision last written.
#[derive(Clone, Debug)]
pub(crate) struct HeldTerm {
    pub(crate) epoch: Epoch,
    pub(crate) revision: u64,
    pub(crate) nonce: u64,
    /// The creation time (µs) of the bucket incarnation the term was won
    /// in: the base of its epoch.
    pub(crate) base: u64,
    /// The wall-clock time of the term's first write (the winning create),
    /// carried unchanged by every later write of the term.
    pub(crate) since_unix_ms: Option<u64>,
    /// The value the term published last (ADR 0068), carried by every
    /// later write of the term.
    pub(crate) value: Option<LeaderValue>,
}

impl HeldTerm {
    /// The value every write after the win carries: the epoch, and the
    /// term's start time (not the time of this write).
    pub(crate) fn value(&self, identity: &Identity) -> bytes::Bytes {
        ClaimRecord {
            identity: identity.clone(),
            nonce: self.nonce,
            epoch: Some(self.epoch),
            since_unix_ms: self.since_unix_ms,
            base: Some(self.base),
            value: self.value.clone(),
        }
        .encode()
    }
}

/// The term an attempt holds, shared by the attempt and its renewal loop.
pub(crate) type Shared = Arc<Mutex<Option<HeldTerm>>>;

/// The holder's renewal loop.
pub(crate) struct Renewal {
    pub(crate) conn: Arc<Connection>,
    pub(crate) name: ElectionName,
    pub(crate) key: String,
    pub(crate) identity: Identity,
    pub(crate) nonce: u64,
    pub(crate) holding: Shared,
}

impl Renewal {
    /// One renewal: an update expecting the revision last written (the
    /// same value every time: the term's epoch and start time), then a
    /// check that the bucket is still the term's incarnation with a max
    /// age not below the TTL. A refusal whose cause may be an earlier
    /// update of ours that landed unanswered (the key still carries this
    /// attempt's nonce) catches up on its revision and updates again.
    ///
    /// Cancel safety: if dropped, the update may or may not land; the next
    /// renewal catches up on it by the nonce.
    async fn renew_once(&self) -> Renewed {
        let core = |e: Error| Renewed::Failed(e.into_core(&self.name));
        let mut holding = self.holding.lock().await;
        let Some(h) = holding.as_mut() else {
            // Released or closed meanwhile: the term is over here.
            return Renewed::Refused(LossReason::Revoked {
                detail: "the term has ended".into(),
            });
        };
        for _ in 0..2 {
            let value = h.value(&self.identity);
            let update =
                settled(|| self.conn.kv.update(&self.key, value.clone(), h.revision)).await;
            match update {
                Ok(rev) => {
                    h.revision = rev;
                    // A bucket recreated or reconfigured while held could
                    // expire the key before the validity counted here.
                    return match self.conn.check_incarnation(h.base).await {
                        Ok(None) => Renewed::Landed,
                        Ok(Some(why)) => Renewed::Refused(LossReason::Revoked { detail: why }),
                        // The renewal landed, unchecked: not counted.
                        Err(e) => core(e),
                    };
                }
                Err(e) if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                    match self.conn.own_revision(&self.key, self.nonce).await {
                        Ok(Some(revision)) => h.revision = revision,
                        Ok(None) => {
                            return Renewed::Refused(LossReason::Revoked {
                                detail: "the bucket shows another holder, or none".into(),
                            });
                        }
                        Err(e) => return core(e),
                    }
                }
                Err(e) => return core(Error::unavailable("renew the lease", e)),
            }
        }
        core(Error::Unavailable {
            what: "renew the lease (the key kept moving under this term's own writes)",
            source: None,
        })
    }

    /// Renews on the core's renewal driver (rule 2: the loss at, never
    /// after, the deadline of the last renewal known to have landed);
    /// a refusal takes the holding before the loss is reported.
    pub(crate) async fn run(self, valid_until: Instant, reporter: TermReporter) {
        let options = &self.conn.options;
        let policy = RenewalPolicy::new(options.validity(), options.renew_every())
            .and_then(|p| {
                p.with_retry_after((options.renew_every() / 4).max(Duration::from_millis(10)))
            })
            .and_then(|p| p.with_attempt_timeout(options.timeout()));
        let policy = match policy {
            Ok(p) => p,
            Err(e) => {
                // NatsOptions refuses such settings; never renew blindly.
                tracing::error!(name = %self.name, error = %e, "no renewal policy");
                reporter.lose(LossReason::Failed(Arc::new(e)));
                return;
            }
        };
        let this = &self;
        let lost = renew_until_lost(policy, valid_until, &reporter, |_budget| async move {
            let renewed = this.renew_once().await;
            if let Renewed::Refused(_) = &renewed {
                // Not held from here on, before anyone hears of it.
                this.holding.lock().await.take();
            }
            renewed
        })
        .await;
        if let Some(reason) = lost {
            tracing::warn!(name = %self.name, %reason, "the term is lost");
        }
        self.holding.lock().await.take();
    }
}
