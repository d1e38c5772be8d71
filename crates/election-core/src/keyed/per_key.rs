//! [`PerKeyClaims`]: a lease set over any [`Claim`]: one campaign per key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::keyed::claims::{Claimed, HeldKey, KeyedClaims};
use crate::keyed::engine::HoldReporter;
use crate::term_state::TermState;
use crate::{
    Candidate, Claim, ConfigError, DEFAULT_POLL_INTERVAL, ElectionName, Epoch, Error, Identity,
    Lease, Term, Won, lock,
};

type MakeClaim<C> = Box<dyn Fn(&ElectionName) -> Result<C, Error> + Send + Sync>;

/// A [`LeaseSet`](crate::LeaseSet) backend over any [`Claim`]: each asked
/// key has its own [`Candidate`] (with the claim `make` returns for the
/// key), tried once per claim step of the set's loop and then every poll
/// interval; each held key has its own term, which renews and watches
/// itself (its renewals and its loss are mirrored into the set).
///
/// Works with every backend; the cost is one task, one campaign and (for
/// lease backends) one renewal per key. On [`close`](crate::LeaseSet::close)
/// every held term is resigned, so its claim is released at once.
/// Backends with a cheaper way to hold many keys offer their own
/// [`KeyedClaims`].
pub struct PerKeyClaims<C: Claim> {
    identity: Identity,
    backend: &'static str,
    make: MakeClaim<C>,
    poll_interval: Duration,
    candidates: Mutex<HashMap<ElectionName, Arc<Candidate<C>>>>,
    terms: Arc<Mutex<HashMap<ElectionName, Arc<Term<C>>>>>,
    reporter: OnceLock<HoldReporter>,
    waiting: Arc<Waiting<C>>,
}

/// The campaigns of keys held elsewhere, run in the background so a key is
/// won the moment the backend's own wake-up (a freed lock) allows.
struct Waiting<C: Claim> {
    campaigns: Mutex<HashMap<ElectionName, tokio::task::JoinHandle<()>>>,
    /// Terms won by a background campaign, until the next claim step.
    won: Mutex<HashMap<ElectionName, Term<C>>>,
    woken: tokio::sync::Notify,
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
    ///
    /// ```
    /// use election_core::{Identity, LeaseSet, PerKeyClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let me = Identity::new("node-a")?;
    /// // One claim per key, made on demand: any Claim backend runs a lease set so.
    /// let keys = PerKeyClaims::new(me.clone(), move |key| backend.claim(key.as_str(), me.as_str()));
    /// let set = LeaseSet::new(keys);
    /// assert!(set.ask("shard-1").await?);
    /// set.close().await; // resigns every held term
    /// # Ok(()) }
    /// ```
    pub fn new(
        identity: Identity,
        make: impl Fn(&ElectionName) -> Result<C, Error> + Send + Sync + 'static,
    ) -> Self {
        PerKeyClaims {
            identity,
            backend: "custom",
            make: Box::new(make),
            poll_interval: DEFAULT_POLL_INTERVAL,
            candidates: Mutex::new(HashMap::new()),
            terms: Arc::new(Mutex::new(HashMap::new())),
            reporter: OnceLock::new(),
            waiting: Arc::new(Waiting {
                campaigns: Mutex::new(HashMap::new()),
                won: Mutex::new(HashMap::new()),
                woken: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Names the backend whose claims `make` makes (`"file"`, ...): the
    /// `backend` label of the lease set's metrics
    /// ([`KeyedClaims::backend`]); `"custom"` if not named.
    ///
    /// ```
    /// use election_core::{Identity, KeyedClaims, PerKeyClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let me = Identity::new("node-a")?;
    /// let keys = PerKeyClaims::new(me.clone(), move |key| backend.claim(key.as_str(), me.as_str()))
    ///     .with_backend("memory");
    /// assert_eq!(keys.backend(), "memory");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_backend(mut self, backend: &'static str) -> Self {
        self.backend = backend;
        self
    }

    /// Sets each key's campaign poll interval (see
    /// [`Candidate::with_poll_interval`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Identity, LeaseSet, PerKeyClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let me = Identity::new("node-a")?;
    /// let keys = PerKeyClaims::new(me.clone(), move |key| backend.claim(key.as_str(), me.as_str()))
    ///     .with_poll_interval(Duration::from_secs(1))?;
    /// let set = LeaseSet::new(keys);
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Result<Self, ConfigError> {
        self.poll_interval = crate::campaign::check_poll_interval(poll_interval)?;
        Ok(self)
    }

    fn candidate(&self, key: &ElectionName) -> Result<Arc<Candidate<C>>, Error> {
        let mut candidates = lock(&self.candidates);
        if let Some(c) = candidates.get(key) {
            return Ok(c.clone());
        }
        let c = Arc::new(
            Candidate::new((self.make)(key)?)
                .with_poll_interval_unchecked(self.poll_interval)
                .without_metrics(),
        );
        candidates.insert(key.clone(), c.clone());
        Ok(c)
    }

    /// One try of one key's campaign.
    async fn claim_one(&self, key: &ElectionName) -> Result<Claimed, Error> {
        let candidate = self.candidate(key)?;
        let won = lock(&self.waiting.won).remove(key);
        // A term won in the background may have been taken since: checked.
        let won = match won {
            Some(term) if term.confirm().await.is_ok() => Some(term),
            _ => None,
        };
        let term = match won {
            Some(term) => term,
            None => match candidate.try_campaign().await? {
                Some(term) => term,
                None => {
                    self.campaign_in_background(key, &candidate);
                    return Ok(Claimed::HeldBy(candidate.leader().await.ok().flatten()));
                }
            },
        };
        let won = Won {
            epoch: term.epoch(),
            valid_until: term.valid_until(),
        };
        if let Some(reporter) = self.reporter.get() {
            let terms = self.terms.clone();
            let (state, key, reporter) = (term.state().clone(), key.clone(), reporter.clone());
            tokio::spawn(async move {
                mirror(&state, &key, reporter).await;
                // Ended: a lost term is dropped at once (its attempt closes).
                let mut terms = lock(&terms);
                if terms.get(&key).is_some_and(|t| t.epoch() == state.epoch) {
                    terms.remove(&key);
                }
            });
        }
        lock(&self.terms).insert(key.clone(), Arc::new(term));
        Ok(Claimed::Won(won))
    }

    /// Starts a campaign for `key` unless one runs: its win wakes the set.
    fn campaign_in_background(&self, key: &ElectionName, candidate: &Arc<Candidate<C>>) {
        let mut campaigns = lock(&self.waiting.campaigns);
        if campaigns.get(key).is_some_and(|c| !c.is_finished()) {
            return;
        }
        let (waiting, candidate, name) = (self.waiting.clone(), candidate.clone(), key.clone());
        let task = tokio::spawn(async move {
            if let Ok(term) = candidate.campaign().await {
                lock(&waiting.won).insert(name, term);
                waiting.woken.notify_one();
            }
        });
        campaigns.insert(key.clone(), task);
    }

    fn term(&self, key: &ElectionName, epoch: Epoch) -> Option<Arc<Term<C>>> {
        lock(&self.terms)
            .get(key)
            .filter(|t| t.epoch() == epoch)
            .cloned()
    }
}

/// Mirrors a held term's renewals and its end (a loss, its validity run
/// out, or its release) into the set, until the term ends.
async fn mirror(state: &TermState, key: &ElectionName, reporter: HoldReporter) {
    let mut status = state.subscribe();
    let lost = state.lost();
    tokio::pin!(lost);
    loop {
        let valid_until = status.borrow_and_update().valid_until;
        if let Some(until) = valid_until {
            reporter.renewed(key, state.epoch, until);
        }
        tokio::select! {
            biased;
            lost = &mut lost => {
                reporter.lose(key, state.epoch, lost.reason);
                return;
            }
            changed = status.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

impl<C: Claim> KeyedClaims for PerKeyClaims<C> {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        self.backend
    }

    fn start(&self, reporter: HoldReporter) {
        let _ = self.reporter.set(reporter);
    }

    async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<Claimed, Error>> {
        let mut answers = futures::future::join_all(keys.iter().map(|k| self.claim_one(k))).await;
        // A term lost while the other keys were tried is not answered won
        // (checked last, with no await before the set records the wins).
        for (key, answer) in keys.iter().zip(answers.iter_mut()) {
            if let Ok(Claimed::Won(won)) = answer
                && self.term(key, won.epoch).is_none_or(|t| t.is_lost())
            {
                *answer = Ok(Claimed::HeldBy(None));
                if let Ok(candidate) = self.candidate(key) {
                    self.campaign_in_background(key, &candidate);
                }
            }
        }
        answers
    }

    async fn confirm(&self, key: &ElectionName, epoch: Epoch) -> Result<(), Error> {
        match self.term(key, epoch) {
            Some(term) => term.confirm().await,
            None => Err(Error::NotHeld { name: key.clone() }),
        }
    }

    /// Resigns each held key's term, so its claim is released at once.
    async fn release(&self, held: &[HeldKey]) {
        let terms: Vec<_> = {
            let mut terms = lock(&self.terms);
            held.iter()
                .filter_map(|(k, e)| {
                    let term = terms.get(k).filter(|t| t.epoch() == *e).cloned()?;
                    terms.remove(k);
                    Some(term)
                })
                .collect()
        };
        futures::future::join_all(terms.iter().map(|t| t.resign())).await;
    }

    /// Stops the background campaigns of `keys` and resigns the terms
    /// they won and the set never took (their claims are released).
    async fn pass(&self, keys: &[ElectionName]) {
        let mut stopped = Vec::new();
        {
            let mut campaigns = lock(&self.waiting.campaigns);
            for key in keys {
                if let Some(task) = campaigns.remove(key) {
                    task.abort();
                    stopped.push(task);
                }
            }
        }
        for task in stopped {
            let _ = task.await;
        }
        let won: Vec<_> = {
            let mut won = lock(&self.waiting.won);
            keys.iter().filter_map(|k| won.remove(k)).collect()
        };
        futures::future::join_all(won.iter().map(|t| t.resign())).await;
    }

    /// Until a background campaign won its key (the backend's wake-up,
    /// e.g. a freed lock), or one poll interval.
    async fn wait(&self) {
        tokio::select! {
            () = self.waiting.woken.notified() => {}
            () = tokio::time::sleep(self.poll_interval) => {}
        }
    }

    /// Stops the background campaigns (each closes its attempt) and drops
    /// what is left: terms won in the background and not yet handed to the
    /// set, terms of lost keys (their attempts close, giving up any claim).
    async fn close(&self) {
        let campaigns: Vec<_> = lock(&self.waiting.campaigns).drain().collect();
        for (_, task) in campaigns {
            task.abort();
            let _ = task.await;
        }
        lock(&self.waiting.won).clear();
        lock(&self.terms).clear();
        lock(&self.candidates).clear();
    }
}
