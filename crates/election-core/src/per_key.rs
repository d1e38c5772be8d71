//! [`PerKeyClaims`]: a lease set over any [`Claim`]: one campaign per key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;

use crate::lease_set::{Asked, Closing, KeyedClaims};
use crate::term::Phase;
use crate::{
    Candidate, Claim, ConfigError, DEFAULT_POLL_INTERVAL, ElectionName, Epoch, Error, Identity,
    KeyState, Lease, Term,
};

type MakeClaim<C> = Box<dyn Fn(&ElectionName) -> Result<C, Error> + Send + Sync>;
type TermCell<C> = Arc<Mutex<Option<Arc<Term<C>>>>>;

/// A [`LeaseSet`](crate::LeaseSet) backend over any [`Claim`]: each asked
/// key runs its own campaign (a [`Candidate`] with the claim `make`
/// returns for the key), and each held key its own term and renewals.
///
/// Works with every backend; the cost is one task, one campaign and (for
/// lease backends) one renewal per key. On [`close`](crate::LeaseSet::close)
/// every held term is resigned, so its claim is released at once.
/// Backends with a cheaper way to hold many keys offer their own
/// [`KeyedClaims`].
pub struct PerKeyClaims<C: Claim> {
    identity: Identity,
    make: MakeClaim<C>,
    poll_interval: Duration,
    terms: Mutex<HashMap<ElectionName, TermCell<C>>>,
}

impl<C: Claim> std::fmt::Debug for PerKeyClaims<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerKeyClaims")
            .field("identity", &self.identity)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

impl<C: Claim> PerKeyClaims<C> {
    /// Claims made by `make` for each key, all with `identity` (which the
    /// claims should carry too).
    pub fn new(
        identity: Identity,
        make: impl Fn(&ElectionName) -> Result<C, Error> + Send + Sync + 'static,
    ) -> Self {
        PerKeyClaims {
            identity,
            make: Box::new(make),
            poll_interval: DEFAULT_POLL_INTERVAL,
            terms: Mutex::new(HashMap::new()),
        }
    }

    /// Sets each key's campaign poll interval (see
    /// [`Candidate::with_poll_interval`]).
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Result<Self, ConfigError> {
        // Validated the same way as a candidate's.
        if poll_interval < Duration::from_millis(1) || poll_interval > Duration::from_secs(3600) {
            return Err(ConfigError::BadSetting {
                setting: "poll_interval",
                reason: format!("{poll_interval:?} is not between 1ms and 1h"),
            });
        }
        self.poll_interval = poll_interval;
        Ok(self)
    }

    fn cell(&self, key: &ElectionName) -> Option<TermCell<C>> {
        self.terms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    /// One key's life: campaign, hold, campaign again after a loss; resign
    /// when the set closes.
    async fn follow(self: Arc<Self>, state: Arc<KeyState>, cell: TermCell<C>, closing: Closing) {
        let claim = match (self.make)(state.name()) {
            Ok(claim) => claim,
            Err(e) => return state.failed(e),
        };
        let candidate = Candidate::new(claim).with_poll_interval_unchecked(self.poll_interval);
        let mut first = true;
        loop {
            let outcome = tokio::select! {
                biased;
                () = closing.closed() => return,
                outcome = async {
                    if first {
                        candidate.try_campaign().await
                    } else {
                        candidate.campaign().await.map(Some)
                    }
                } => outcome,
            };
            first = false;
            match outcome {
                Ok(Some(term)) => {
                    let term = Arc::new(term);
                    // The term first, then the hold: a guard that sees the
                    // key held finds its term for the commit point.
                    *cell.lock().unwrap_or_else(|p| p.into_inner()) = Some(term.clone());
                    state.hold(term.epoch(), term.identity(), term.valid_until());
                    let closed = hold(&state, &term, &closing).await;
                    // Not held from here on, before the claim is given up.
                    state.release();
                    cell.lock().unwrap_or_else(|p| p.into_inner()).take();
                    if closed {
                        let _ = term.resign().await;
                        return;
                    }
                }
                Ok(None) => {
                    let holder = tokio::select! {
                        biased;
                        () = closing.closed() => return,
                        holder = candidate.leader() => holder.ok().flatten(),
                    };
                    state.held_by(holder);
                }
                Err(e) => {
                    let permanent = e.is_permanent();
                    state.failed(e);
                    if permanent {
                        return;
                    }
                    tokio::select! {
                        biased;
                        () = closing.closed() => return,
                        () = tokio::time::sleep(self.poll_interval) => {}
                    }
                }
            }
        }
    }
}

/// Mirrors a held term's renewals into `state` until the term is lost
/// (false) or the set closes (true).
async fn hold<C: Claim>(state: &KeyState, term: &Term<C>, closing: &Closing) -> bool {
    let mut status = term.state().subscribe();
    let lost = term.lost();
    tokio::pin!(lost);
    loop {
        tokio::select! {
            biased;
            _ = &mut lost => return false,
            () = closing.closed() => return true,
            changed = status.changed() => {
                if changed.is_err() {
                    return false;
                }
                let (phase, valid_until) = {
                    let s = status.borrow_and_update();
                    (s.phase.clone(), s.valid_until)
                };
                if !matches!(phase, Phase::Live) {
                    return false;
                }
                if let Some(until) = valid_until {
                    state.renewed(term.epoch(), until);
                }
            }
        }
    }
}

impl<C: Claim> KeyedClaims for PerKeyClaims<C> {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    async fn run(self: Arc<Self>, mut asked: Asked) {
        let mut tasks = JoinSet::new();
        while let Some(state) = asked.next().await {
            let cell: TermCell<C> = Arc::new(Mutex::new(None));
            self.terms
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(state.name().clone(), cell.clone());
            tasks.spawn(self.clone().follow(state, cell, asked.closing()));
            while tasks.try_join_next().is_some() {}
        }
        // Closing: every key task resigns its term and returns.
        while tasks.join_next().await.is_some() {}
    }

    async fn commit(&self, key: &Arc<KeyState>) -> Result<Epoch, Error> {
        let term = self
            .cell(key.name())
            .and_then(|cell| cell.lock().unwrap_or_else(|p| p.into_inner()).clone());
        match term {
            Some(term) => {
                term.confirm().await?;
                Ok(term.epoch())
            }
            None => Err(key.not_held_error()),
        }
    }
}
