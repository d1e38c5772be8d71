//! [`SqliteLeases`]: the keys of a lease set in one SQLite database, as
//! four batch steps over the bottom layer (claim many, renew many, release
//! many, confirm one), each one transaction however many keys it covers.
//! The steps keep what the database needs between them (each held key's
//! term, each contended key's observation); when to call them is the
//! loop's business (`lease_loop.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use election_core::{ConfigError, DEFAULT_POLL_INTERVAL, ElectionName, Epoch, Identity, Leader};
use tokio::time::Instant;

use crate::context::Context;
use crate::error::Error;
use crate::row::{self, Found, Hold, Observed, Take};

/// A [`LeaseSet`](election_core::LeaseSet) backend over one SQLite
/// database: one lease row per key (the same rows, protocol and timings as
/// [`SqliteClaim`](crate::SqliteClaim), so sets and single candidates can
/// contend for the same keys), driven by one loop for all keys.
///
/// - Every renewal interval, one `BEGIN IMMEDIATE` transaction renews every
///   held key (each conditional on its term's nonce and epoch). A key whose
///   row shows another term is lost at once; a key whose renewals fail is
///   lost when its validity (`ttl - margin`, counted from before the last
///   renewal that committed) runs out, which
///   [`held`](election_core::LeaseSet::held) sees by itself.
/// - Every poll interval, one read (no write lock) of the rows and epoch
///   state of the keys not held, then one transaction that claims every
///   key found released, never held, or seen unchanged (same holder, term
///   and renewal version; or its row seen gone, after a deletion by hand)
///   for a full TTL, each only if its row and epoch state are still exactly
///   as read. Each claim writes its epoch to the row and to the epoch state
///   in that transaction (the same rule as
///   [`SqliteClaim`](crate::SqliteClaim), shared code). A key whose next
///   epoch would be above [`Epoch::MAX`] fails with
///   [`ConfigError::EpochExhausted`], nothing written. A database file
///   deleted or replaced since it was opened: no key is claimed.
/// - [`guard`](election_core::LeaseSet::guard)'s commit-point check is one
///   conditional renewal of the key's row, as
///   [`SqliteClaim`](crate::SqliteClaim)'s `confirm`.
/// - On close, one transaction releases every held row (conditional on its
///   term's nonce, never a successor's claim). If it fails, the rows age
///   out: other candidates take them over once they have seen no renewal
///   for a full TTL. A process that dies leaves the same.
///
/// Made by [`SqliteElection::lease_set`](crate::SqliteElection::lease_set) or
/// [`SqliteLeases::new`].
///
/// The backend's part is four steps over the database, each one
/// transaction for any number of keys: claim many (one read and one
/// `BEGIN IMMEDIATE` transaction per poll), renew many (one per renewal
/// interval), release many (one at close) and confirm one (one conditional
/// renewal at a guard's commit point).
#[derive(Debug)]
pub struct SqliteLeases {
    ctx: Arc<Context>,
    identity: Identity,
    poll_interval: Duration,
    /// `(nonce, epoch)` of each held key's term.
    terms: Mutex<HashMap<ElectionName, (i64, i64)>>,
    /// What this set has seen of each key held elsewhere (for the full TTL
    /// without renewal a takeover needs).
    observed: Mutex<HashMap<ElectionName, Observed>>,
}

/// What [`SqliteLeases::claim_many`] did with one key.
#[derive(Debug)]
pub(crate) enum Claimed {
    /// Won in term `epoch`, valid until `valid_until` (counted from before
    /// the claim was sent).
    Won { epoch: Epoch, valid_until: Instant },
    /// Held by another term (`None`: by someone unknown, e.g. a row
    /// deleted by hand, or a holder this crate cannot decode).
    HeldBy(Option<Leader>),
    /// Not claimed now (the database was busy, or the row changed since it
    /// was read): looked at again at the next poll.
    NotNow,
    /// Could not tell: the error, about this key.
    Failed(election_core::Error),
}

/// What [`SqliteLeases::renew_many`] did.
#[derive(Debug)]
pub(crate) struct Renewed {
    /// Until when the renewed keys are valid (counted from before the
    /// renewal was sent).
    pub(crate) valid_until: Instant,
    /// Per key asked, in order: its term's epoch if renewed, `None` if its
    /// row shows another term (lost).
    pub(crate) keys: Vec<Option<Epoch>>,
}

/// What [`SqliteLeases::confirm_one`] found.
#[derive(Debug)]
pub(crate) enum Confirmed {
    /// Still held in term `epoch`, from a moment after the check committed.
    Held(Epoch),
    /// This set holds no term of the key.
    NoTerm,
    /// Lost: the row shows another term, or the database file was deleted
    /// or replaced. The term is forgotten; mark the key not held.
    Lost,
    /// In doubt for this write (or the term changed while it was checked):
    /// the error, about this key.
    Failed(election_core::Error),
}

/// `error`, about election `name` (a batch failure concerns every key).
fn for_key(error: &election_core::Error, name: &ElectionName) -> election_core::Error {
    use election_core::Error as E;
    match error.clone() {
        E::Unavailable { source, .. } => E::Unavailable {
            name: name.clone(),
            source,
        },
        E::OutcomeUnknown { source, .. } => E::OutcomeUnknown {
            name: name.clone(),
            source,
        },
        E::Corrupt { source, .. } => E::Corrupt {
            name: name.clone(),
            source,
        },
        other => other,
    }
}

/// `error` as the failure of every key of `names` (about the first).
fn failed_all(error: Error, names: &[&ElectionName]) -> Vec<Claimed> {
    let Some(first) = names.first() else {
        return Vec::new();
    };
    let error = error.into_core(first);
    names
        .iter()
        .map(|name| Claimed::Failed(for_key(&error, name)))
        .collect()
}

impl SqliteLeases {
    /// The keys of process `identity` over the database of `ctx`.
    pub(crate) fn over(ctx: Arc<Context>, identity: Identity) -> Self {
        SqliteLeases {
            ctx,
            identity,
            poll_interval: DEFAULT_POLL_INTERVAL,
            terms: Mutex::new(HashMap::new()),
            observed: Mutex::new(HashMap::new()),
        }
    }

    /// Sets how often the keys not held are looked at (and a vacant or
    /// expired one claimed): between 1 ms and 1 h.
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Result<Self, Error> {
        if poll_interval < Duration::from_millis(1) || poll_interval > Duration::from_secs(3600) {
            return Err(ConfigError::BadSetting {
                setting: "poll_interval",
                reason: format!("{poll_interval:?} is not between 1ms and 1h"),
            }
            .into());
        }
        self.poll_interval = poll_interval;
        Ok(self)
    }

    /// How often the keys not held are looked at.
    pub(crate) fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// The connection context the steps use.
    pub(crate) fn context(&self) -> &Context {
        &self.ctx
    }

    /// This set's process.
    pub(crate) fn identity(&self) -> &Identity {
        &self.identity
    }

    fn terms(&self) -> MutexGuard<'_, HashMap<ElectionName, (i64, i64)>> {
        self.terms.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn observed(&self) -> MutexGuard<'_, HashMap<ElectionName, Observed>> {
        self.observed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets the term of `name` (lost or given up); returns its epoch.
    pub(crate) fn forget(&self, name: &ElectionName) -> Option<i64> {
        self.terms().remove(name).map(|(_, epoch)| epoch)
    }

    /// Claim many: one read (no write lock) of the rows and epoch state of
    /// `names` (keys not held), then one `BEGIN IMMEDIATE` transaction that
    /// claims every key found released, never held, or seen unchanged for a
    /// full TTL, each only if its row and epoch state are still exactly as
    /// read. Returns what happened to each key of `names`, in order.
    ///
    /// A database file deleted or replaced since it was opened: nothing is
    /// claimed, every key fails. A commit in doubt (the transaction failed
    /// after its writes) releases those claims in the background.
    ///
    /// Cancel safety: not cancel safe once the transaction's writes are
    /// done (a claim may commit unrecorded and then ages out); call it to
    /// completion.
    pub(crate) async fn claim_many(&self, names: &[&ElectionName]) -> Vec<Claimed> {
        if names.is_empty() {
            return Vec::new();
        }
        if let Err(e) = self.ctx.check_in_place() {
            return failed_all(e, names);
        }
        let strs: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        let rows = match row::read_many(&self.ctx.pool, &strs).await {
            Ok(rows) => rows,
            Err(e) => return failed_all(e, names),
        };
        let now = self.ctx.clock.now();
        let ttl = self.ctx.options.ttl();
        let mut outcomes: Vec<Claimed> = Vec::with_capacity(names.len());
        let mut takes: Vec<(usize, Take<'_>)> = Vec::new();
        {
            let mut observed = self.observed();
            for (i, name) in names.iter().enumerate() {
                let seen = rows.get(name.as_str()).cloned().unwrap_or_default();
                let found = Found::of(seen.lease.as_ref(), seen.recorded);
                let mut seen_before = observed.remove(*name);
                let may = row::may_claim(&mut seen_before, &found, ttl, now);
                if let Some(o) = seen_before {
                    observed.insert((*name).clone(), o);
                }
                if !may {
                    let leader = seen.lease.as_ref().and_then(|r| r.leader().ok().flatten());
                    outcomes.push(Claimed::HeldBy(leader));
                    continue;
                }
                outcomes.push(Claimed::NotNow);
                takes.push((
                    i,
                    Take {
                        name: name.as_str(),
                        nonce: election_core::attempt_nonce() as i64,
                        seen: seen.lease.map(|r| (r.version, r.epoch)),
                        recorded: seen.recorded.map(|r| r.epoch),
                    },
                ));
            }
        }
        if !takes.is_empty() {
            self.take(names, takes, &mut outcomes).await;
        }
        outcomes
    }

    /// The claim transaction of [`claim_many`](SqliteLeases::claim_many):
    /// fills in `outcomes` for the keys of `takes`.
    async fn take(
        &self,
        names: &[&ElectionName],
        takes: Vec<(usize, Take<'_>)>,
        outcomes: &mut [Claimed],
    ) {
        let ctx = &self.ctx;
        let batch: Vec<Take<'_>> = takes.iter().map(|(_, t)| *t).collect();
        let sent = ctx.clock.now();
        let mut may_commit = false;
        let result = row::claim_many(
            &ctx.pool,
            &batch,
            self.identity.as_str(),
            ctx.options.ttl_ms(),
            ctx.clock.wall_unix_ms(),
            || may_commit = true,
        )
        .await;
        let claimed = match result {
            Ok(claimed) => claimed,
            Err(e) if e.is_busy() && !may_commit => {
                tracing::debug!(identity = %self.identity, error = %e, "database busy; claiming again at the next poll");
                return;
            }
            Err(e) => {
                if may_commit {
                    self.release_in_background(&batch);
                }
                let error = e.into_core(names[takes[0].0]);
                for (i, _) in &takes {
                    outcomes[*i] = Claimed::Failed(for_key(&error, names[*i]));
                }
                return;
            }
        };
        let valid_until = sent + ctx.options.validity();
        let won: HashMap<&str, i64> = claimed.won.iter().map(|(n, e)| (n.as_str(), *e)).collect();
        let mut observed = self.observed();
        for (i, take) in takes {
            let name = names[i];
            observed.remove(name);
            if claimed.exhausted.iter().any(|n| n == name.as_str()) {
                tracing::error!(%name, "every epoch up to Epoch::MAX has been handed out; the key cannot be won again");
                outcomes[i] =
                    Claimed::Failed(Error::Config(ConfigError::EpochExhausted).into_core(name));
                continue;
            }
            // Not won: changed since it was read, looked at again next poll.
            let Some(&epoch) = won.get(name.as_str()) else {
                continue;
            };
            outcomes[i] = match row::epoch_of(name.as_str(), epoch) {
                Ok(e) => {
                    self.terms().insert(name.clone(), (take.nonce, epoch));
                    tracing::info!(%name, epoch, identity = %self.identity, "elected");
                    Claimed::Won {
                        epoch: e,
                        valid_until,
                    }
                }
                Err(e) => Claimed::Failed(e.into_core(name)),
            };
        }
    }

    /// Releases claims whose commit is in doubt, conditional on their
    /// nonces, in the background; if that fails they age out.
    fn release_in_background(&self, batch: &[Take<'_>]) {
        let pool = self.ctx.pool.clone();
        let holds: Vec<(String, i64)> =
            batch.iter().map(|t| (t.name.to_owned(), t.nonce)).collect();
        tokio::spawn(async move {
            let holds: Vec<Hold<'_>> = holds
                .iter()
                .map(|(name, nonce)| Hold {
                    name,
                    nonce: *nonce,
                    epoch: 0,
                })
                .collect();
            if let Err(e) = row::release_many(&pool, &holds).await {
                tracing::warn!(error = %e, "releasing claims in doubt failed; they age out after the TTL");
            }
        });
    }

    /// Renew many: one `BEGIN IMMEDIATE` transaction renews the terms of
    /// `names` (held keys), each conditional on its nonce and epoch, within
    /// `deadline` (the earliest validity among them). A key whose row shows
    /// another term (or that has no term here any more) is forgotten and
    /// reported lost.
    ///
    /// Failure model: [`Error::FileReplaced`] if the database file was
    /// deleted or replaced (every key is lost); [`Error::OutcomeUnknown`] if
    /// it did not answer by `deadline` (each key keeps the validity of its
    /// last committed renewal); any other error: nothing renewed.
    ///
    /// Cancel safety: cancel safe (a renewal dropped in flight renews this
    /// set's own terms, or nothing).
    pub(crate) async fn renew_many(
        &self,
        names: &[&ElectionName],
        deadline: Instant,
    ) -> Result<Renewed, Error> {
        let ctx = &self.ctx;
        if let Some(db) = ctx.db_file.as_ref().filter(|db| !db.in_place()) {
            return Err(Error::FileReplaced {
                path: db.path.clone(),
            });
        }
        let terms: Vec<Option<(i64, i64)>> = {
            let terms = self.terms();
            names.iter().map(|n| terms.get(*n).copied()).collect()
        };
        let holds: Vec<Hold<'_>> = names
            .iter()
            .zip(&terms)
            .filter_map(|(name, term)| {
                let (nonce, epoch) = (*term)?;
                Some(Hold {
                    name: name.as_str(),
                    nonce,
                    epoch,
                })
            })
            .collect();
        let sent = ctx.clock.now();
        let renewal = row::renew_many(&ctx.pool, &holds, ctx.clock.wall_unix_ms());
        let bound = deadline.saturating_duration_since(sent);
        let renewed = match tokio::time::timeout(bound, renewal).await {
            Ok(renewed) => renewed?,
            Err(_) => return Err(Error::OutcomeUnknown { after: bound }),
        };
        let mut keys = Vec::with_capacity(names.len());
        for (name, term) in names.iter().zip(terms) {
            let epoch = term
                .filter(|_| renewed.contains(name.as_str()))
                .and_then(|(_, epoch)| row::epoch_of(name.as_str(), epoch).ok());
            if epoch.is_none() {
                self.forget_if(name, term);
            }
            keys.push(epoch);
        }
        Ok(Renewed {
            valid_until: sent + ctx.options.validity(),
            keys,
        })
    }

    /// Forgets the term of `name` if it is still `term` (a newer one is
    /// kept); true if it did.
    fn forget_if(&self, name: &ElectionName, term: Option<(i64, i64)>) -> bool {
        let mut terms = self.terms();
        let same = term.is_some() && terms.get(name).copied() == term;
        if same {
            terms.remove(name);
        }
        same
    }

    /// Release many: forgets the terms of `names` and releases their rows
    /// in one `BEGIN IMMEDIATE` transaction (each conditional on its term's
    /// nonce, never a successor's claim), given at most the lease's
    /// validity; if that fails the rows age out after the TTL.
    ///
    /// Cancel safety: cancel safe (the rows are released or age out).
    pub(crate) async fn release_many(&self, names: &[&ElectionName]) {
        let held: Vec<(&ElectionName, (i64, i64))> = {
            let mut terms = self.terms();
            names
                .iter()
                .filter_map(|n| Some((*n, terms.remove(*n)?)))
                .collect()
        };
        if held.is_empty() {
            return;
        }
        let batch: Vec<Hold<'_>> = held
            .iter()
            .map(|(name, (nonce, epoch))| Hold {
                name: name.as_str(),
                nonce: *nonce,
                epoch: *epoch,
            })
            .collect();
        let bound = self.ctx.options.validity();
        match tokio::time::timeout(bound, row::release_many(&self.ctx.pool, &batch)).await {
            Ok(Ok(())) => {
                tracing::info!(identity = %self.identity, keys = batch.len(), "resigned");
            }
            Ok(Err(e)) => {
                tracing::warn!(identity = %self.identity, error = %e, "release failed; the leases age out after the TTL");
            }
            Err(_) => {
                tracing::warn!(identity = %self.identity, "release timed out; the leases age out after the TTL");
            }
        }
    }

    /// Confirm one: the commit-point check of `name`'s term, one
    /// conditional renewal of its row (see
    /// [`SqliteClaim`](crate::SqliteClaim)'s `confirm` for what a success
    /// proves); see [`Confirmed`] for the answers.
    ///
    /// Cancel safety: cancel safe (the row is unchanged or renewed by this
    /// same term).
    pub(crate) async fn confirm_one(&self, name: &ElectionName) -> Confirmed {
        let Some((nonce, epoch)) = self.terms().get(name).copied() else {
            return Confirmed::NoTerm;
        };
        let hold = Hold {
            name: name.as_str(),
            nonce,
            epoch,
        };
        match self.ctx.confirm(hold).await {
            Ok(true) => match row::epoch_of(name.as_str(), epoch) {
                Ok(epoch) => Confirmed::Held(epoch),
                Err(e) => Confirmed::Failed(e.into_core(name)),
            },
            Ok(false) if self.forget_if(name, Some((nonce, epoch))) => Confirmed::Lost,
            Ok(false) => Confirmed::Failed(election_core::Error::NotHeld { name: name.clone() }),
            Err(e) => Confirmed::Failed(e.into_core(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::SqliteOptions;

    async fn context() -> (tempfile::TempDir, Arc<Context>) {
        let dir = tempfile::tempdir().expect("dir");
        // The renewal interval is never waited for here: every step is
        // called by hand.
        let options =
            SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(10)).expect("options");
        let ctx = Context::open(&dir.path().join("app.db"), options)
            .await
            .expect("open");
        (dir, Arc::new(ctx))
    }

    fn set(ctx: &Arc<Context>, identity: &str) -> SqliteLeases {
        SqliteLeases::over(ctx.clone(), Identity::new(identity).expect("identity"))
    }

    fn key(name: &str) -> ElectionName {
        ElectionName::new(name).expect("name")
    }

    /// `(holder, epoch, version)` of `name`'s row.
    async fn row(ctx: &Context, name: &str) -> (Option<String>, i64, i64) {
        sqlx::query_as("SELECT holder, epoch, version FROM election_leases WHERE name = ?1")
            .bind(name)
            .fetch_one(&ctx.pool)
            .await
            .expect("select")
    }

    fn won(claimed: &Claimed) -> Epoch {
        match claimed {
            Claimed::Won { epoch, .. } => *epoch,
            other => panic!("expected a win, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_steps_claim_renew_confirm_and_release_many_keys() {
        let (_dir, ctx) = context().await;
        let (a, b) = (set(&ctx, "a"), set(&ctx, "b"));
        let (k1, k2) = (key("k1"), key("k2"));

        let claimed = a.claim_many(&[&k1, &k2]).await;
        assert_eq!(claimed.len(), 2);
        assert_eq!(won(&claimed[0]), Epoch::FIRST);
        assert_eq!(won(&claimed[1]), Epoch::FIRST);
        match &b.claim_many(&[&k1]).await[..] {
            [Claimed::HeldBy(Some(leader))] => {
                assert_eq!(leader.identity.as_str(), "a");
                assert_eq!(leader.epoch, Epoch::FIRST);
            }
            other => panic!("expected k1 held by a, got {other:?}"),
        }

        // One renewal of both keys bumps each version once.
        let before = (row(&ctx, "k1").await.2, row(&ctx, "k2").await.2);
        let far = ctx.clock.now() + Duration::from_secs(30);
        let renewed = a.renew_many(&[&k1, &k2], far).await.expect("renewed");
        assert_eq!(renewed.keys, vec![Some(Epoch::FIRST), Some(Epoch::FIRST)]);
        assert_eq!(row(&ctx, "k1").await.2, before.0 + 1);
        assert_eq!(row(&ctx, "k2").await.2, before.1 + 1);

        // A row deleted by hand: its key is lost at the next renewal, and
        // its term forgotten; the other key goes on.
        sqlx::query("DELETE FROM election_leases WHERE name = 'k2'")
            .execute(&ctx.pool)
            .await
            .expect("delete");
        let renewed = a.renew_many(&[&k1, &k2], far).await.expect("renewed");
        assert_eq!(renewed.keys, vec![Some(Epoch::FIRST), None]);
        assert!(matches!(a.confirm_one(&k2).await, Confirmed::NoTerm));
        assert!(matches!(
            a.confirm_one(&k1).await,
            Confirmed::Held(e) if e == Epoch::FIRST
        ));

        // Another term in the row: the commit point finds the loss.
        sqlx::query("UPDATE election_leases SET nonce = 0 WHERE name = 'k1'")
            .execute(&ctx.pool)
            .await
            .expect("take k1");
        assert!(matches!(a.confirm_one(&k1).await, Confirmed::Lost));
        assert!(matches!(a.confirm_one(&k1).await, Confirmed::NoTerm));
    }

    #[tokio::test]
    async fn release_many_gives_only_this_sets_terms_up() {
        let (_dir, ctx) = context().await;
        let (a, b) = (set(&ctx, "a"), set(&ctx, "b"));
        let (k1, k2) = (key("k1"), key("k2"));
        a.claim_many(&[&k1]).await;
        b.claim_many(&[&k2]).await;
        // a never held k2: its release leaves b's row alone.
        a.release_many(&[&k1, &k2]).await;
        assert_eq!(row(&ctx, "k1").await.0, None, "released");
        assert_eq!(row(&ctx, "k2").await.0.as_deref(), Some("b"));
        assert!(matches!(a.confirm_one(&k1).await, Confirmed::NoTerm));
        // Released: won at once elsewhere, with the next epoch.
        let claimed = b.claim_many(&[&k1]).await;
        assert_eq!(won(&claimed[0]).get(), Epoch::FIRST.get() + 1);
    }

    #[tokio::test]
    async fn a_replaced_database_file_fails_every_step() {
        let (dir, ctx) = context().await;
        let a = set(&ctx, "a");
        let (k1, k2) = (key("k1"), key("k2"));
        a.claim_many(&[&k1]).await;
        let path = dir.path().join("app.db");
        std::fs::rename(&path, dir.path().join("moved.db")).expect("move");
        std::fs::write(&path, b"").expect("replace");

        match &a.claim_many(&[&k2]).await[..] {
            [Claimed::Failed(election_core::Error::Config(_))] => {}
            other => panic!("expected a configuration failure, got {other:?}"),
        }
        let far = ctx.clock.now() + Duration::from_secs(30);
        assert!(matches!(
            a.renew_many(&[&k1], far).await,
            Err(Error::FileReplaced { .. })
        ));
        assert!(matches!(a.confirm_one(&k1).await, Confirmed::Lost));
    }
}
