//! The loop that drives [`SqliteLeases`]' steps for a
//! [`LeaseSet`](election_core::LeaseSet): when to claim, renew and release,
//! and what each key's [`KeyState`] shows. It decides nothing about the
//! database; the steps (`lease_set.rs`) do.

use std::sync::Arc;
use std::time::Duration;

use election_core::{Asked, ElectionName, Epoch, Identity, KeyState, KeyedClaims};
use futures::FutureExt;
use tokio::time::Instant;

use crate::error::Error;
use crate::lease_set::{Claimed, Confirmed, SqliteLeases};

/// A key as the loop tracks it.
#[derive(Debug)]
struct Key {
    state: Arc<KeyState>,
    /// `Some((epoch, valid_until))` while held.
    held: Option<(Epoch, Instant)>,
}

impl Key {
    fn is_held(&self) -> bool {
        self.held.is_some()
    }

    fn name(&self) -> &ElectionName {
        self.state.name()
    }
}

impl SqliteLeases {
    /// Records `key` as not held (lost, expired or given up).
    fn lose(&self, key: &mut Key, why: &str) {
        key.state.release();
        self.forget(key.name());
        if let Some((epoch, _)) = key.held.take() {
            tracing::info!(name = %key.name(), epoch = epoch.get(), identity = %self.identity(), "lost: {why}");
        }
    }

    /// One renewal of every held key; returns when to renew next.
    async fn renew(&self, keys: &mut [Key]) -> Instant {
        let ctx = self.context();
        let options = ctx.options;
        let sent = ctx.clock.now();
        for key in keys.iter_mut() {
            if key.held.is_some_and(|(_, until)| until <= sent) {
                self.lose(key, "its renewals failed until its validity ran out");
            }
        }
        let held: Vec<ElectionName> = keys
            .iter()
            .filter(|k| k.is_held())
            .map(|k| k.name().clone())
            .collect();
        let Some(deadline) = keys.iter().filter_map(|k| k.held.map(|(_, u)| u)).min() else {
            return sent + options.renew_interval();
        };
        let retry = sent + (options.renew_interval() / 4).max(Duration::from_millis(1));
        let renewed = match self
            .renew_many(&held.iter().collect::<Vec<_>>(), deadline)
            .await
        {
            Ok(renewed) => renewed,
            Err(e @ Error::FileReplaced { .. }) => {
                let why = e.to_string();
                for key in keys.iter_mut().filter(|k| k.is_held()) {
                    self.lose(key, &why);
                }
                return sent + options.renew_interval();
            }
            Err(Error::OutcomeUnknown { .. }) => {
                // In doubt: each key keeps the validity of its last
                // committed renewal and is lost when that runs out.
                tracing::warn!(identity = %self.identity(), keys = held.len(), "renewal timed out; retrying until the leases run out");
                return ctx.clock.now();
            }
            Err(e) => {
                tracing::warn!(identity = %self.identity(), keys = held.len(), error = %e, "renewal failed; retrying until the leases run out");
                return retry.max(ctx.clock.now());
            }
        };
        let mut answers = renewed.keys.into_iter();
        for key in keys.iter_mut().filter(|k| k.is_held()) {
            match answers.next().flatten() {
                Some(epoch) => {
                    key.held = Some((epoch, renewed.valid_until));
                    key.state.renewed(epoch, renewed.valid_until);
                }
                None => self.lose(key, "the lease row shows another term"),
            }
        }
        sent + options.renew_interval()
    }

    /// Looks at every key not held: records who holds it, and claims those
    /// found vacant or seen unchanged for a full TTL.
    async fn poll(&self, keys: &mut [Key]) {
        let free: Vec<ElectionName> = keys
            .iter()
            .filter(|k| !k.is_held())
            .map(|k| k.name().clone())
            .collect();
        let outcomes = self.claim_many(&free.iter().collect::<Vec<_>>()).await;
        let mut outcomes = outcomes.into_iter();
        for key in keys.iter_mut().filter(|k| !k.is_held()) {
            match outcomes.next() {
                Some(Claimed::Won { epoch, valid_until }) => {
                    key.held = Some((epoch, valid_until));
                    key.state.hold(epoch, self.identity(), Some(valid_until));
                }
                Some(Claimed::HeldBy(leader)) => key.state.held_by(leader),
                Some(Claimed::Failed(e)) => key.state.failed(e),
                Some(Claimed::NotNow) | None => {}
            }
        }
    }

    /// Gives every held key up: not held from here on, then one
    /// transaction releases the rows.
    async fn release_all(&self, keys: &mut [Key]) {
        let mut held = Vec::new();
        for key in keys.iter_mut() {
            if key.held.take().is_some() {
                key.state.release();
                held.push(key.name().clone());
            }
        }
        self.release_many(&held.iter().collect::<Vec<_>>()).await;
    }
}

impl KeyedClaims for SqliteLeases {
    fn identity(&self) -> &Identity {
        SqliteLeases::identity(self)
    }

    async fn run(self: Arc<Self>, mut asked: Asked) {
        let clock = self.context().clock.clone();
        let mut keys: Vec<Key> = Vec::new();
        let mut next_renew = clock.now();
        let mut next_poll = clock.now();
        let new_key = |state| Key { state, held: None };
        'run: loop {
            let any_held = keys.iter().any(Key::is_held);
            let any_free = keys.iter().any(|k| !k.is_held());
            let wake = match (any_held, any_free) {
                (true, true) => next_renew.min(next_poll),
                (true, false) => next_renew,
                (false, true) => next_poll,
                (false, false) => clock.now() + Duration::from_secs(3600),
            };
            tokio::select! {
                biased;
                key = asked.next() => {
                    let Some(key) = key else { break 'run };
                    keys.push(new_key(key));
                    // Take every key already asked, then look at them at once.
                    loop {
                        match asked.next().now_or_never() {
                            Some(Some(key)) => keys.push(new_key(key)),
                            Some(None) => break 'run,
                            None => break,
                        }
                    }
                    next_poll = clock.now();
                }
                () = tokio::time::sleep_until(wake) => {}
            }
            if keys.iter().any(Key::is_held) && clock.now() >= next_renew {
                next_renew = self.renew(&mut keys).await;
            }
            if clock.now() >= next_poll {
                self.poll(&mut keys).await;
                next_poll = clock.now() + self.poll_interval();
                if !any_held && keys.iter().any(Key::is_held) {
                    next_renew = clock.now() + self.context().options.renew_interval();
                }
            }
        }
        self.release_all(&mut keys).await;
    }

    /// One conditional renewal of the key's row (see
    /// [`SqliteClaim`](crate::SqliteClaim)'s `confirm` for what a success
    /// proves). A row that shows another term marks the key lost at once.
    async fn commit(&self, key: &Arc<KeyState>) -> Result<Epoch, election_core::Error> {
        match self.confirm_one(key.name()).await {
            Confirmed::Held(epoch) => Ok(epoch),
            Confirmed::NoTerm => Err(key.not_held_error()),
            Confirmed::Lost => {
                key.release();
                Err(election_core::Error::NotHeld {
                    name: key.name().clone(),
                })
            }
            Confirmed::Failed(e) => Err(e),
        }
    }
}
