//! A term's shared state ([`TermState`]) and the [`TermReporter`] a
//! backend's watch uses to report on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::{ElectionName, Epoch, Identity, LeaseLost, LossReason, TransferRequest};

/// Where a term is in its life, as the backend sees it: this decides
/// between release and close after a loss (rule 3).
#[derive(Clone, Debug)]
pub(crate) enum Phase {
    Live,
    /// Resign or drop has begun; losses reported from now on are ignored
    /// (the watch is dropped with this step).
    Ending,
    Lost(LeaseLost),
}

#[derive(Clone, Debug)]
pub(crate) struct Status {
    pub(crate) phase: Phase,
    /// Set the moment the holder ends the term (resign or drop begun, or a
    /// dropped `lead` retiring it while its tasks stop): from then on every
    /// lease reads lost with this reason. The phase may stay `Live` for a
    /// while after (a dropped `lead` keeps the claim, renewed and watched,
    /// until its tasks have stopped).
    pub(crate) ended: Option<LeaseLost>,
    pub(crate) valid_until: Option<Instant>,
    /// When the win or the last renewal was reported: what the health
    /// check measures from.
    pub(crate) renewed_at: Instant,
}

impl Status {
    /// What a lease reads: the holder's end if it came first, else the
    /// backend's loss.
    fn loss(&self) -> Option<LeaseLost> {
        match (&self.ended, &self.phase) {
            (Some(ended), _) => Some(ended.clone()),
            (None, Phase::Lost(l)) => Some(l.clone()),
            _ => None,
        }
    }

    /// The loss the backend reported, if any.
    fn backend_loss(&self) -> Option<LeaseLost> {
        match &self.phase {
            Phase::Lost(l) => Some(l.clone()),
            _ => None,
        }
    }
}

/// The state of one term, shared by the term, its leases and the backend's
/// watch.
#[derive(Debug)]
pub(crate) struct TermState {
    pub(crate) name: ElectionName,
    pub(crate) identity: Identity,
    pub(crate) epoch: Epoch,
    /// The `backend` label of its metrics ([`Claim::backend`](crate::Claim::backend)).
    pub(crate) backend: &'static str,
    status: watch::Sender<Status>,
    /// The latest request that this term be handed over (ADR 0112), as
    /// the backend's watch reported it.
    transfer: watch::Sender<Option<TransferRequest>>,
    /// The latest request of a preferred candidate whose priority is above
    /// this term's.
    preferred: watch::Sender<Option<TransferRequest>>,
    /// This term's priority (`Candidate::with_priority`; 0 without).
    pub(crate) priority: std::sync::atomic::AtomicU32,
    /// What the metrics know of this term: [`FRESH`], [`LEADING`] (counted
    /// won, the leader gauge raised) or [`ENDED`].
    accounting: AtomicU8,
    /// False for a lease set's per-key terms ([`PerKeyClaims`](crate::PerKeyClaims)):
    /// their election is a key, and the set counts them (label `set`).
    pub(crate) instrumented: bool,
}

/// Not handed out yet.
const FRESH: u8 = 0;
/// Handed out as a term: counted won, the leader gauge raised.
const LEADING: u8 = 1;
/// Its end counted (or it ended before it was handed out).
const ENDED: u8 = 2;

impl TermState {
    #[cfg(test)]
    pub(crate) fn new(
        name: ElectionName,
        identity: Identity,
        epoch: Epoch,
        valid_until: Option<Instant>,
    ) -> Arc<Self> {
        Self::with_metrics(name, identity, epoch, valid_until, "test", true)
    }

    /// A term's state, recording no metrics when `instrumented` is false.
    pub(crate) fn with_metrics(
        name: ElectionName,
        identity: Identity,
        epoch: Epoch,
        valid_until: Option<Instant>,
        backend: &'static str,
        instrumented: bool,
    ) -> Arc<Self> {
        let (status, _) = watch::channel(Status {
            phase: Phase::Live,
            ended: None,
            valid_until,
            renewed_at: Instant::now(),
        });
        Arc::new(TermState {
            name,
            identity,
            epoch,
            backend,
            status,
            transfer: watch::channel(None).0,
            preferred: watch::channel(None).0,
            priority: std::sync::atomic::AtomicU32::new(0),
            accounting: AtomicU8::new(if instrumented { FRESH } else { ENDED }),
            instrumented,
        })
    }

    /// Counts the term won (the campaign hands it out now, after waiting
    /// `waited`), unless it already ended.
    pub(crate) fn begin_leading(&self, waited: std::time::Duration) {
        if self
            .accounting
            .compare_exchange(FRESH, LEADING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            crate::instrument::term_won(&self.name, self.backend, waited);
        }
    }

    /// Counts the term's end, once, with the first reason its leases read
    /// lost.
    fn note_end(&self, reason: &LossReason) {
        if self.accounting.swap(ENDED, Ordering::AcqRel) == LEADING {
            crate::instrument::term_ended(&self.name, self.backend, reason);
        }
    }

    /// The status as it stands, without turning a passed deadline into a
    /// loss (the health check only reads).
    pub(crate) fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    fn lost_with(&self, reason: LossReason) -> LeaseLost {
        LeaseLost {
            name: self.name.clone(),
            identity: self.identity.clone(),
            epoch: self.epoch,
            reason,
        }
    }

    /// Marks the term lost; returns true if this call lost it.
    pub(crate) fn lose(&self, reason: LossReason) -> bool {
        let mut first_end = false;
        let lost_now = self.status.send_if_modified(|s| {
            let live = matches!(s.phase, Phase::Live);
            if live {
                s.phase = Phase::Lost(self.lost_with(reason.clone()));
                first_end = s.ended.is_none();
            }
            live
        });
        if first_end {
            self.note_end(&reason);
        }
        if lost_now {
            tracing::warn!(name = %self.name, identity = %self.identity, epoch = self.epoch.get(), %reason, "lost");
        }
        lost_now
    }

    fn renewed(&self, valid_until: Instant) {
        let renewed = self.status.send_if_modified(|s| {
            let live = matches!(s.phase, Phase::Live);
            if live {
                s.valid_until = Some(valid_until);
                s.renewed_at = Instant::now();
            }
            live
        });
        if renewed {
            tracing::debug!(name = %self.name, identity = %self.identity, epoch = self.epoch.get(), "renewed");
        }
    }

    /// Marks a live term ended by its holder (`reason`: resigned or
    /// dropped): every lease reads lost from now on, but the phase stays
    /// live, so renewals and a backend loss are still recorded. Does nothing
    /// to a term already lost or ended.
    pub(crate) fn retire(&self, reason: LossReason) {
        self.check_deadline();
        let retired = self.status.send_if_modified(|s| {
            if s.ended.is_none() && matches!(s.phase, Phase::Live) {
                s.ended = Some(self.lost_with(reason.clone()));
                true
            } else {
                false
            }
        });
        if retired {
            self.note_end(&reason);
        }
    }

    /// Moves a live term to `Ending` (its leases read lost with `reason`
    /// from this moment, before any release is sent); returns the backend's
    /// loss if it was lost.
    pub(crate) fn begin_end(&self, reason: LossReason) -> Result<(), LeaseLost> {
        // A term whose known validity ran out counts as lost, in doubt.
        self.check_deadline();
        let mut outcome = Ok(());
        let mut first_end = false;
        self.status.send_if_modified(|s| match &s.phase {
            Phase::Live => {
                s.phase = Phase::Ending;
                if s.ended.is_none() {
                    s.ended = Some(self.lost_with(reason.clone()));
                    first_end = true;
                }
                true
            }
            Phase::Ending => false,
            Phase::Lost(l) => {
                outcome = Err(l.clone());
                false
            }
        });
        if first_end {
            self.note_end(&reason);
        }
        outcome
    }

    fn check_deadline(&self) {
        let expired = {
            let s = self.status.borrow();
            matches!(s.phase, Phase::Live) && s.valid_until.is_some_and(|t| Instant::now() >= t)
        };
        if expired {
            self.lose(LossReason::Expired);
        }
    }

    /// True once the term is lost or ended by its holder.
    pub(crate) fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// The holder's end or the backend's loss, whichever came first.
    pub(crate) fn loss(&self) -> Option<LeaseLost> {
        self.check_deadline();
        self.status.borrow().loss()
    }

    /// The backend's loss only (or a validity that ran out): what decides
    /// between release and close.
    pub(crate) fn backend_loss(&self) -> Option<LeaseLost> {
        self.check_deadline();
        self.status.borrow().backend_loss()
    }

    pub(crate) fn is_live(&self) -> bool {
        !self.is_lost() && matches!(self.status.borrow().phase, Phase::Live)
    }

    pub(crate) fn valid_until(&self) -> Option<Instant> {
        self.status.borrow().valid_until
    }

    /// Resolves with the holder's end or the backend's loss, whichever
    /// comes first.
    pub(crate) async fn lost(&self) -> LeaseLost {
        self.wait_for_loss(Status::loss).await
    }

    /// Resolves with the backend's loss only; pending forever once the
    /// term is ending (resign or drop began: no loss is recorded after).
    pub(crate) async fn backend_lost(&self) -> LeaseLost {
        self.wait_for_loss(Status::backend_loss).await
    }

    /// Resolves with what `pick` finds; on the way, turns a passed deadline
    /// into a loss, so a backend whose watch stalls still ends the term
    /// (rule 2 is the backend's; this is the core's backstop).
    async fn wait_for_loss(&self, pick: fn(&Status) -> Option<LeaseLost>) -> LeaseLost {
        let mut rx = self.status.subscribe();
        loop {
            // Read the clock before trusting the timer: after a freeze
            // (SIGSTOP, a suspended VM) the timer driver has not yet seen the
            // time pass, and a fresh sleep would stay pending until its next
            // turn, letting a `select!` pick other work on a lapsed term.
            self.check_deadline();
            let (picked, live, deadline) = {
                let s = rx.borrow_and_update();
                (pick(&s), matches!(s.phase, Phase::Live), s.valid_until)
            };
            if let Some(l) = picked {
                return l;
            }
            if !live {
                // Ending (the watch is gone) and nothing picked: nothing
                // will change any more.
                std::future::pending::<()>().await;
            }
            let expiry = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            // `changed` cannot fail: `self` holds the sender.
            tokio::select! {
                _ = rx.changed() => {}
                () = expiry => self.check_deadline(),
            }
        }
    }

    /// Records a request to hand this term over; false (and ignored) if it
    /// names another epoch, names this term's own holder as the successor,
    /// or repeats the one recorded.
    pub(crate) fn transfer_requested(&self, request: TransferRequest) -> bool {
        // Another term's, or asking this holder to hand over to itself.
        if request.epoch != self.epoch || request.to == self.identity {
            return false;
        }
        let channel = match request.priority {
            None => &self.transfer,
            Some(p) if p > self.priority.load(Ordering::Acquire) => &self.preferred,
            // Not above this term's priority: equal priorities keep the
            // race as it was.
            Some(_) => return false,
        };
        channel.send_if_modified(|now| {
            if now.as_ref() == Some(&request) {
                return false;
            }
            *now = Some(request);
            true
        })
    }

    /// The latest request to hand this term over.
    pub(crate) fn transfer_request(&self) -> Option<TransferRequest> {
        self.transfer.borrow().clone()
    }

    /// The latest preferred candidate's request above this term.
    pub(crate) fn preferred_request(&self) -> Option<TransferRequest> {
        self.preferred.borrow().clone()
    }

    /// Resolves with the first explicit request (`preferred` false), or
    /// preferred candidate's request above this term (`preferred` true),
    /// to hand this term over (at once if one was reported).
    pub(crate) async fn wait_transfer_request(&self, preferred: bool) -> TransferRequest {
        let mut rx = if preferred {
            self.preferred.subscribe()
        } else {
            self.transfer.subscribe()
        };
        loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                return r;
            }
            // `changed` cannot fail: `self` holds the sender.
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// A receiver of every change of the term's status (renewals, loss, end).
    pub(crate) fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// Resolves when the term has ended for any reason.
    pub(crate) async fn ended(&self) {
        let mut rx = self.status.subscribe();
        let _ = rx
            .wait_for(|s| !matches!(s.phase, Phase::Live) || s.ended.is_some())
            .await;
    }
}

impl Drop for TermState {
    /// A backstop: a term counted as leading lowers the leader gauge when
    /// its last handle goes (every end path counts it before this).
    fn drop(&mut self) {
        self.note_end(&LossReason::Dropped);
    }
}

/// The handle a backend's watch uses to report a loss or a renewal of the
/// term it watches.
///
/// Cheap to clone. Reports after the term ended (by resign or drop) are
/// ignored.
#[derive(Clone, Debug)]
pub struct TermReporter {
    state: Arc<TermState>,
}

impl TermReporter {
    pub(crate) fn new(state: Arc<TermState>) -> Self {
        TermReporter { state }
    }

    /// Reports that the claim was lost (rule 2: before the backend could
    /// grant it to another candidate). Returns true if this report ended
    /// the term; false if it had already ended or been lost.
    ///
    /// ```
    /// use election_core::{LossReason, TermReporter};
    ///
    /// /// A backend's watch, on hearing that the store gave the claim away.
    /// fn on_taken(reporter: &TermReporter, new_holder: &str) {
    ///     let ended_it = reporter.lose(LossReason::Revoked {
    ///         detail: format!("the store shows {new_holder} as the holder"),
    ///     });
    ///     if !ended_it {
    ///         // The term had ended already (resigned, dropped or lost): nothing to do.
    ///     }
    /// }
    /// # let _ = on_taken;
    /// ```
    pub fn lose(&self, reason: LossReason) -> bool {
        self.state.lose(reason)
    }

    /// Reports a renewal: the claim is known to be held until
    /// `valid_until` (monotonic, counted from before the renewal was sent).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::TermReporter;
    /// use tokio::time::Instant;
    ///
    /// /// A backend's renewal, counted from before the request was sent (rule 2).
    /// async fn renew_once(reporter: &TermReporter, ttl: Duration, margin: Duration) {
    ///     let sent = Instant::now();
    ///     // ... send the renewal and wait for the store's yes ...
    ///     reporter.renewed(sent + ttl - margin);
    /// }
    /// # let _ = renew_once;
    /// ```
    pub fn renewed(&self, valid_until: Instant) {
        self.state.renewed(valid_until)
    }

    /// True once the backend's loss was reported (or the term's known
    /// validity has run out). A term its holder ended (resign, drop) does
    /// not count here: while a dropped [`lead`](crate::Term::lead) waits for its
    /// tasks, the watch must go on renewing and reporting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::TermReporter;
    ///
    /// /// A backend's renewal loop stops once the term is lost.
    /// async fn renew_loop(reporter: TermReporter) {
    ///     while !reporter.is_lost() {
    ///         // ... renew, report with `renewed` or `lose` ...
    ///         tokio::time::sleep(Duration::from_secs(1)).await;
    ///     }
    /// }
    /// # let _ = renew_loop;
    /// ```
    pub fn is_lost(&self) -> bool {
        self.state.backend_loss().is_some()
    }

    /// Reports a request, read from the store, that the holder hand this
    /// term to a successor ([`Election::request_transfer`](crate::Election::request_transfer)).
    /// Returns true if it was new; a request for another epoch (an earlier
    /// term's), one naming this holder as its own successor, and a
    /// preferred candidate's not above the term's priority are ignored.
    /// The term only reports it
    /// ([`Term::transfer_requested`](crate::Term::transfer_requested)): the
    /// holder decides whether and when to hand over.
    ///
    /// ```
    /// use election_core::{Identity, TermReporter, TransferRequest};
    ///
    /// /// A backend's renewal found a request stored beside the term.
    /// fn on_request(reporter: &TermReporter, to: &str, by: &str) -> Result<bool, election_core::Error> {
    ///     let request = TransferRequest::new(Identity::new(to)?, Identity::new(by)?, reporter.epoch(), None);
    ///     Ok(reporter.transfer_requested(request))
    /// }
    /// # let _ = on_request;
    /// ```
    pub fn transfer_requested(&self, request: TransferRequest) -> bool {
        self.state.transfer_requested(request)
    }

    /// The epoch of the watched term.
    ///
    /// ```
    /// use election_core::TermReporter;
    ///
    /// /// A backend's watch, checking that the store still shows its term.
    /// fn still_ours(reporter: &TermReporter, stored_epoch: u64) -> bool {
    ///     stored_epoch == reporter.epoch().get()
    /// }
    /// # let _ = still_ours;
    /// ```
    pub fn epoch(&self) -> Epoch {
        self.state.epoch
    }

    pub(crate) fn name(&self) -> &ElectionName {
        &self.state.name
    }

    /// The `backend` label of the term's metrics.
    pub(crate) fn backend(&self) -> &'static str {
        self.state.backend
    }

    /// False for a lease set's per-key terms: no per-key series.
    pub(crate) fn instrumented(&self) -> bool {
        self.state.instrumented
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    /// What a term hears: requests of its own epoch only, never one naming
    /// its own holder, and preferred candidates above its priority only;
    /// explicit and preferred requests apart.
    #[test]
    fn a_term_hears_only_requests_meant_for_it() {
        let id = |s: &str| Identity::new(s).unwrap();
        let epoch = Epoch::new(5).unwrap();
        let state = TermState::new(ElectionName::new("jobs").unwrap(), id("a"), epoch, None);
        state.priority.store(3, Ordering::Release);
        let ask = |to: &str, e: u64| {
            TransferRequest::new(id(to), id("ops"), Epoch::new(e).unwrap(), None)
        };
        assert!(
            !state.transfer_requested(ask("b", 4)),
            "an earlier term's request"
        );
        assert!(
            !state.transfer_requested(ask("a", 5)),
            "a request to the holder itself"
        );
        assert!(
            !state.transfer_requested(ask("b", 5).with_priority(3)),
            "an equal priority"
        );
        assert_eq!(
            (state.transfer_request(), state.preferred_request()),
            (None, None)
        );
        assert!(state.transfer_requested(ask("b", 5)));
        assert!(
            !state.transfer_requested(ask("b", 5)),
            "the same request twice"
        );
        assert!(state.transfer_requested(ask("c", 5).with_priority(4)));
        assert_eq!(state.transfer_request().map(|r| r.to), Some(id("b")));
        assert_eq!(state.preferred_request().map(|r| r.to), Some(id("c")));
    }

    fn term(valid_for: Duration) -> Arc<TermState> {
        TermState::new(
            ElectionName::new("freeze").expect("a valid name"),
            Identity::new("a").expect("a valid identity"),
            Epoch::new(1).expect("a valid epoch"),
            Some(Instant::now() + valid_for),
        )
    }

    /// A process frozen (SIGSTOP) past its term's deadline resumes with a
    /// timer driver that has not yet seen the time pass. A `lost()` made
    /// then must resolve on its first poll, so a `select!` between it and a
    /// queued command cannot pick the command; it must not wait for the
    /// driver's next turn.
    #[test]
    fn lost_resolves_on_its_first_poll_after_a_freeze_past_the_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let state = term(Duration::from_millis(5));
            // The freeze: this thread does not run, and the runtime does
            // not park, while the deadline passes.
            std::thread::sleep(Duration::from_millis(30));
            let lost = state.lost().now_or_never();
            let lost = lost.expect("lost() pending on its first poll after the deadline passed");
            assert!(matches!(lost.reason, LossReason::Expired), "{lost:?}");
            assert!(state.backend_lost().now_or_never().is_some());
        });
    }

    #[test]
    fn lost_stays_pending_while_the_term_is_valid() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let state = term(Duration::from_secs(3600));
            assert!(state.lost().now_or_never().is_none());
            assert!(!state.is_lost());
        });
    }
}
