//! The renewal of a term ([`EtcdClaim`](crate::EtcdClaim)) on the core's
//! renewal driver (rule 2): a keep-alive of the attempt's lease, its
//! validity counted from the monotonic instant before the keep-alive was
//! sent (`renew_until_lost` takes it), never from the TTL etcd reports;
//! then a read of the election key, which must still be on the term's
//! lease (a lease is one attempt's and holds one term). A
//! watch of the key beside it reports a delete (by hand, a revoked lease
//! or an operator's revoke, ADR 0111) at once, and a watch of the transfer request key reports
//! requests (ADR 0112).

use std::sync::Arc;
use std::time::Duration;

use election_core::{
    ElectionName, Epoch, LossReason, RenewalPolicy, Renewed, TermReporter, renew_until_lost,
};
use tokio::time::Instant;

use crate::error::Error;
use crate::store::client::{KeptAlive, Kind, Watched};
use crate::store::proto::EVENT_DELETE;
use crate::store::queue::{self, Line};
use crate::store::{Store, record};

/// The term an attempt holds.
#[derive(Clone, Debug)]
pub(crate) struct HeldTerm {
    pub(crate) epoch: Epoch,
    pub(crate) lease: i64,
}

/// What renews one term.
pub(crate) struct Renewal {
    pub(crate) store: Arc<Store>,
    pub(crate) name: ElectionName,
    pub(crate) key: Vec<u8>,
    /// The transfer request key (ADR 0112).
    pub(crate) requests: Vec<u8>,
    pub(crate) held: HeldTerm,
    /// Where the head of the waiters' line is kept for the release.
    pub(crate) line: Line,
}

fn revoked(detail: &str) -> Renewed {
    Renewed::Refused(LossReason::Revoked {
        detail: detail.into(),
    })
}

impl Renewal {
    fn failed(&self, e: Error) -> Renewed {
        match e {
            e @ Error::ClusterChanged { .. } => Renewed::Refused(LossReason::Revoked {
                detail: e.to_string(),
            }),
            e => Renewed::Failed(e.into_core(&self.name)),
        }
    }

    async fn renew_once(&self) -> Renewed {
        match self.store.client.keep_alive(self.held.lease).await {
            Ok(KeptAlive::Alive) => {}
            Ok(KeptAlive::Gone) => return revoked("the term's etcd lease expired or was revoked"),
            Err(e) => return self.failed(e),
        }
        match self.store.client.range(&self.key, Kind::Read).await {
            Ok((_, Some(kv))) if kv.lease == self.held.lease => Renewed::Landed,
            Ok(_) => revoked("the election key shows another term, or none"),
            Err(e) => self.failed(e),
        }
    }

    /// Watches the election key from after the term's epoch (the revision
    /// that won it); returns the reason when it shows the term gone: the
    /// key deleted, or put on another lease (an operator's or a passed
    /// term's, ADR 0119). A broken watch is set up again after a read.
    async fn watch_key(&self) -> LossReason {
        let lease = self.held.lease;
        let mut from = self.held.epoch.get_i64() + 1;
        loop {
            if let Ok(mut watch) = self.store.client.watch(&self.key, &[], from).await {
                while let Ok(Watched::Events(events)) = watch.next().await {
                    for e in events {
                        let kv = e.kv.unwrap_or_default();
                        if e.r#type == EVENT_DELETE || kv.lease != lease {
                            return LossReason::Revoked {
                                detail: "the election key was deleted, or put on another lease"
                                    .into(),
                            };
                        }
                        from = from.max(kv.mod_revision + 1);
                    }
                }
            }
            // Broken or compacted: the renewals still guard the term; look
            // again after a while, from the key as it is now.
            tokio::time::sleep(self.store.options.renew_every() / 2).await;
            match self.store.client.range(&self.key, Kind::Read).await {
                Ok((revision, Some(kv))) if kv.lease == lease => from = revision + 1,
                Ok(_) => {
                    return LossReason::Revoked {
                        detail: "the election key shows another term, or none".into(),
                    };
                }
                Err(_) => {}
            }
        }
    }

    /// Reports every transfer request stored for this election (the core
    /// ignores one of another epoch): one read, then a watch from after
    /// it; a broken watch is made again after a pause. Never returns.
    async fn watch_requests(&self, reporter: &TermReporter) {
        let report = |value: &[u8]| match record::decode_request(&self.requests, value) {
            Ok(request) => {
                if reporter.transfer_requested(request.clone()) {
                    tracing::info!(name = %self.name, %request, "a transfer was requested");
                }
            }
            Err(e) => {
                tracing::warn!(name = %self.name, error = %e, "an unreadable transfer request")
            }
        };
        loop {
            if let Ok((revision, kv)) = self.store.client.range(&self.requests, Kind::Read).await {
                if let Some(kv) = kv {
                    report(&kv.value);
                }
                if let Ok(mut watch) = self
                    .store
                    .client
                    .watch(&self.requests, &[], revision + 1)
                    .await
                {
                    while let Ok(Watched::Events(events)) = watch.next().await {
                        for e in events {
                            if e.r#type != EVENT_DELETE
                                && let Some(kv) = e.kv
                            {
                                report(&kv.value);
                            }
                        }
                    }
                }
            }
            tokio::time::sleep(self.store.options.renew_every() / 2).await;
        }
    }

    /// Keeps `line` at the head of the waiters' line (ADR 0119), so that
    /// the release passes the term without a read first: one read, then a
    /// watch of the line from after it; a waiter that joins ahead of the
    /// one kept takes its place, and when the one kept leaves, the line is
    /// read again. A broken watch is made again after a pause (meanwhile
    /// the head kept may be stale: the pass compares it, and a release
    /// that cannot pass revokes). Never returns.
    async fn follow_line(&self) {
        let set = |head: Option<crate::store::proto::KeyValue>| {
            *self
                .line
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = head;
        };
        let prefix = record::waiters_prefix(self.store.options.key_prefix(), &self.name);
        let end = record::prefix_end(&prefix);
        'line: loop {
            if let Ok((revision, mut head)) = queue::head(&self.store, &self.name).await {
                set(head.clone());
                if let Ok(mut watch) = self.store.client.watch(&prefix, &end, revision + 1).await {
                    while let Ok(Watched::Events(events)) = watch.next().await {
                        for e in events {
                            let Some(kv) = e.kv else { continue };
                            let is_head = head.as_ref().is_some_and(|h| h.key == kv.key);
                            if e.r#type == EVENT_DELETE {
                                if is_head {
                                    set(None);
                                    continue 'line; // the head left: read the line again now
                                }
                            } else if is_head
                                || head
                                    .as_ref()
                                    .is_none_or(|h| kv.create_revision < h.create_revision)
                            {
                                head = Some(kv);
                                set(head.clone());
                            }
                        }
                    }
                }
            }
            set(None);
            tokio::time::sleep(self.store.options.renew_every() / 2).await;
        }
    }

    pub(crate) async fn run(self, valid_until: Instant, reporter: TermReporter) {
        let options = &self.store.options;
        let policy = RenewalPolicy::new(options.validity(), options.renew_every())
            .and_then(|p| {
                p.with_retry_after((options.renew_every() / 4).max(Duration::from_millis(10)))
            })
            .and_then(|p| p.with_attempt_timeout(options.timeout()));
        let policy = match policy {
            Ok(p) => p,
            Err(e) => {
                // EtcdOptions refuses such settings; never renew blindly.
                reporter.lose(LossReason::Failed(Arc::new(e)));
                return;
            }
        };
        let this = &self;
        let renewals = renew_until_lost(policy, valid_until, &reporter, |_budget| async move {
            this.renew_once().await
        });
        tokio::select! {
            lost = renewals => {
                if let Some(reason) = lost {
                    tracing::warn!(epoch = %self.held.epoch, %reason, "the term is lost");
                }
            }
            reason = self.watch_key() => {
                tracing::warn!(epoch = %self.held.epoch, %reason, "the term is lost");
                reporter.lose(reason);
            }
            () = self.watch_requests(&reporter) => {}
            () = self.follow_line() => {}
        }
    }
}
