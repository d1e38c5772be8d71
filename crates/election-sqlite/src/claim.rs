//! [`SqliteClaim`]: the claim of one candidate in a [`SqliteElection`](crate::SqliteElection),
//! and its [`SqliteAttempt`]: winning the lease row, waiting (the same-host
//! lock or the poll), renewing (the shared SQL layer's `renew_term`),
//! confirming, releasing.

use std::sync::Arc;

use election_core::{
    Claim, ElectionName, End, Identity, Leader, LeaderValue, TermReporter, WatchGuard, Won,
};
use tokio::sync::oneshot;

use crate::error::Error;
use crate::store::context::Context;
use crate::store::host_lock;
use crate::store::row::{self, ClaimWrite, Found, Observed};

/// The claim of one candidate in a [`SqliteElection`](crate::SqliteElection).
///
/// How a term ends: resign releases the row (conditional on this attempt's
/// nonce); a drop (or a cancelled or failed step that may have committed a
/// claim) starts the same release in the background on the current tokio
/// runtime; if it cannot run, the lease ages out after its TTL. A contender
/// on the same host wakes when the term's attempt is closed (the same-host
/// lock, see the [crate docs](crate)); elsewhere, or without the lock, it
/// learns of a release at its next poll (the candidate's poll interval).
#[derive(Debug)]
pub struct SqliteClaim {
    pub(crate) inner: Arc<Context>,
    pub(crate) name: ElectionName,
    pub(crate) identity: Identity,
}

/// One attempt of a [`SqliteClaim`].
#[derive(Debug)]
pub struct SqliteAttempt {
    nonce: i64,
    observed: Option<Observed>,
    /// Set once a claim may have been committed (before the commit).
    may_hold: bool,
    /// The epoch this attempt won, for the commit-point check.
    epoch: Option<i64>,
    /// The same-host lock (ADR 0026), once taken: held until the attempt
    /// is closed, after its term ended.
    host_lock: Option<std::fs::File>,
    /// A thread waiting in the kernel for the same-host lock.
    lock_wait: Option<oneshot::Receiver<std::io::Result<std::fs::File>>>,
    /// Set when waiting for the lock failed: poll from then on.
    lock_failed: bool,
    /// The holder's term this attempt last gave the lock up to after
    /// losing the row with the lock in hand, and how many times (bounded,
    /// so a holder that never takes the lock cannot make it spin).
    handed_over: Option<(i64, u32)>,
}

/// How many times a waiter gives the same-host lock up to one holder's
/// term whose row it lost with the lock in hand, before it keeps the lock
/// and polls. The holder's own waiting thread normally takes the lock at
/// the first one; more only if this waiter's next wait beat it to the lock.
const MAX_HAND_OVERS: u32 = 16;

impl SqliteAttempt {
    /// Takes the same-host lock of `name` if it is free (or the waiting
    /// thread got it), before a claim that could commit. Failures only
    /// cost the wake-up: they are logged and the claim goes on.
    fn take_host_lock(&mut self, ctx: &Context, name: &str) {
        let Some(locks) = ctx.host_locks.as_ref() else {
            return;
        };
        if self.host_lock.is_some() || self.lock_failed {
            return;
        }
        if let Some(rx) = self.lock_wait.as_mut() {
            match rx.try_recv() {
                Ok(Ok(file)) => {
                    self.host_lock = Some(file);
                    self.lock_wait = None;
                }
                Ok(Err(e)) => {
                    tracing::debug!(%name, error = %e, "same-host lock failed; polling");
                    self.lock_wait = None;
                    self.lock_failed = true;
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => {
                    self.lock_wait = None;
                    self.lock_failed = true;
                }
            }
            return;
        }
        match host_lock::try_take(&locks.path(name)) {
            Ok(file) => self.host_lock = file,
            Err(e) => {
                tracing::debug!(%name, error = %e, "same-host lock failed; polling");
                self.lock_failed = true;
            }
        }
    }

    /// After a win without the same-host lock (it was held elsewhere, by a
    /// previous holder between its release and its close, or by a waiter
    /// about to claim): waits for it on a thread of its own, so the lock
    /// comes to this term and is freed when its attempt is closed, waking
    /// the next waiter. The row keeps `lock_id` NULL for this term (it was
    /// won without the lock), so no contender takes it over early.
    fn follow_host_lock(&mut self, ctx: &Context, name: &str) {
        let Some(locks) = ctx.host_locks.as_ref() else {
            return;
        };
        if self.host_lock.is_none() && self.lock_wait.is_none() && !self.lock_failed {
            self.lock_wait = Some(host_lock::wait_for(locks.path(name)));
        }
    }

    /// Whether this waiter, holding the same-host lock after losing the
    /// row, gives the lock up (and waits for it again) so the row's holder,
    /// which won without it, can take it and wake this waiter when its
    /// term ends. Not while a claim may be held; not for a vanished row or
    /// an unread one; at most [`MAX_HAND_OVERS`] times per holder's term.
    fn hands_over(&mut self, name: &str) -> bool {
        if self.host_lock.is_none() || self.may_hold {
            return false;
        }
        let Some(term) = self.observed.as_ref().and_then(Observed::held_epoch) else {
            return false;
        };
        let count = match self.handed_over {
            Some((t, n)) if t == term => n,
            _ => 0,
        };
        if count >= MAX_HAND_OVERS {
            return false;
        }
        tracing::debug!(%name, term, "lost the row with the same-host lock in hand; giving it up to the holder");
        self.handed_over = Some((term, count + 1));
        self.host_lock = None;
        true
    }
}

impl SqliteClaim {
    fn core(&self, e: Error) -> election_core::Error {
        e.into_core(&self.name)
    }
}

impl Claim for SqliteClaim {
    type Attempt = SqliteAttempt;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn open(&self) -> Result<SqliteAttempt, election_core::Error> {
        Ok(SqliteAttempt {
            nonce: election_core::attempt_nonce() as i64,
            observed: None,
            may_hold: false,
            epoch: None,
            host_lock: None,
            lock_wait: None,
            lock_failed: false,
            handed_over: None,
        })
    }

    /// One `BEGIN IMMEDIATE` transaction: wins a released or never-held
    /// lease, or one whose holder, epoch and renewal version this attempt
    /// has seen unchanged for a full TTL (a vanished row: seen gone for a
    /// full TTL), with the next epoch written to the lease row and the
    /// epoch state. A database busy past the busy timeout counts as "not
    /// now" (`Ok(None)`); a name whose next epoch would be above
    /// [`Epoch::MAX`](election_core::Epoch::MAX) is [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted) (nothing written);
    /// a database file deleted or replaced since it was opened is
    /// [`Error::FileReplaced`], one with a second name (a hard link, a
    /// mount of its own) [`Error::SecondName`] (both as configuration
    /// errors).
    async fn try_claim(
        &self,
        attempt: &mut SqliteAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let inner = &self.inner;
        inner.check_in_place().map_err(|e| self.core(e))?;
        attempt.take_host_lock(inner, self.name.as_str());
        let sent = inner.clock.now();
        let ttl = inner.options.ttl();
        let observed = &mut attempt.observed;
        let clock = &inner.clock;
        let decide = |found: &Found| row::may_claim(observed, found, ttl, clock.now());
        let lock = attempt
            .host_lock
            .as_ref()
            .zip(inner.host_locks.as_ref())
            .and_then(|(file, locks)| locks.lock_identity(file));
        let may_hold = &mut attempt.may_hold;
        let won = row::claim(
            &inner.pool,
            ClaimWrite {
                name: self.name.as_str(),
                identity: self.identity.as_str(),
                nonce: attempt.nonce,
                ttl_ms: inner.options.times.ttl_ms(),
                wall_ms: inner.clock.wall_unix_ms(),
                lock: lock.as_deref(),
            },
            decide,
            || *may_hold = true,
        )
        .await;
        let won = match won {
            // A busy database delays the campaign; it does not end it. Only
            // while nothing may have been committed: a busy commit is an
            // error the caller must see.
            Err(e) if e.is_busy() && !attempt.may_hold => {
                tracing::debug!(name = %self.name, error = %e, "database busy; trying again later");
                return Ok(None);
            }
            other => other.map_err(|e| self.core(e))?,
        };
        let Some(epoch) = won else { return Ok(None) };
        attempt.observed = None;
        attempt.epoch = Some(epoch);
        attempt.follow_host_lock(inner, self.name.as_str());
        let epoch = row::epoch_of(self.name.as_str(), epoch).map_err(|e| self.core(e))?;
        Ok(Some(Won {
            epoch,
            valid_until: Some(sent + inner.options.validity()),
        }))
    }

    /// Waits in the kernel for the same-host lock (ADR 0026), which the
    /// holder frees when its attempt is closed after its term ended
    /// (resigned, or lost and dropped) or the kernel frees when its process
    /// dies; `poll_interval` is the backstop. An attempt that lost the row
    /// with the lock in hand (the holder won it without the lock) gives the
    /// lock up first and waits for it again, so the holder's thread can take
    /// it and free it when that term ends (a bounded number of times per
    /// holder's term). Without the lock (a shared filesystem, a pool with no
    /// file, a failed wait) or while this attempt keeps it, this sleeps
    /// `poll_interval`.
    ///
    /// Cancel safety: cancel safe; the waiting thread stays with the
    /// attempt (and frees the lock at once if the attempt is gone when it
    /// gets it).
    async fn wait(
        &self,
        attempt: &mut SqliteAttempt,
        poll_interval: std::time::Duration,
    ) -> Result<(), election_core::Error> {
        let sleep = tokio::time::sleep(poll_interval);
        let Some(locks) = self.inner.host_locks.as_ref() else {
            sleep.await;
            return Ok(());
        };
        // A waiter that lost the row with the lock in hand: the holder won
        // without it, so keeping it would leave nobody to wake this waiter
        // when that term ends. Give it up and wait for it again.
        attempt.hands_over(self.name.as_str());
        if attempt.host_lock.is_some() || attempt.lock_failed {
            sleep.await;
            return Ok(());
        }
        let rx = attempt
            .lock_wait
            .get_or_insert_with(|| host_lock::wait_for(locks.path(self.name.as_str())));
        tokio::select! {
            got = rx => {
                attempt.lock_wait = None;
                match got {
                    Ok(Ok(file)) => attempt.host_lock = Some(file),
                    Ok(Err(e)) => {
                        tracing::debug!(name = %self.name, error = %e, "same-host lock failed; polling");
                        attempt.lock_failed = true;
                    }
                    Err(_) => attempt.lock_failed = true,
                }
            }
            () = sleep => {}
        }
        Ok(())
    }

    /// Starts the renewal task (see [`SqliteElection`](crate::SqliteElection)).
    fn watch(
        &self,
        attempt: &mut SqliteAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        election_sql::watch_term(self.inner.clone(), &self.name, attempt.nonce, won, reporter)
    }

    /// The commit-point check: one conditional renewal. In one write
    /// transaction (one autocommit `UPDATE`) it bumps the row's renewal version only
    /// if the row still shows this attempt's nonce and won epoch with a
    /// holder, exactly as the renewal task does; it commits before this
    /// returns `Ok(())`.
    ///
    /// What a success proves: no other candidate held the row when the
    /// transaction committed, and because it moved the renewal version,
    /// every contender restarts its count of a full TTL without renewal from
    /// a moment after that commit. So the write that follows has at least
    /// the lease's validity (`ttl - margin`, counted from before the check
    /// was sent) before anyone else can win the row. The term's own
    /// validity is left as the renewal task last set it (conservative).
    ///
    /// Renewal state: the renewal task's own renewals are conditional on the
    /// nonce and epoch only, never on the version, so a confirm (committed,
    /// rolled back or in doubt) never makes the holder's next renewal fail;
    /// a contender sees it as one more renewal.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the row shows
    /// another holder, a release, a later epoch, or if this attempt never
    /// won, and also when the database file was deleted or replaced (a
    /// process opening the path gets another database) or got a second
    /// name (ADR 0046); then the core
    /// marks the term lost. [`election_core::Error::Unavailable`] if the
    /// database cannot answer (busy past the busy timeout, every pooled
    /// connection in use, I/O errors); [`election_core::Error::OutcomeUnknown`]
    /// if it did not answer within the lease's validity (and, grouped as
    /// [`Error::into_core`] does everywhere, `Config` if the database
    /// became read-only). In each the claim is in doubt for this write (do
    /// not write), and the renewal task decides about the term.
    ///
    /// Cancel safety: cancel safe. Dropped before the commit, the
    /// transaction rolls back; dropped during it, the row is either
    /// unchanged or renewed by this same holder. Neither changes the
    /// holder, nonce or epoch.
    async fn confirm(&self, attempt: &mut SqliteAttempt) -> Result<(), election_core::Error> {
        let (nonce, epoch) = (attempt.nonce, attempt.epoch);
        election_sql::write_term(&self.name, nonce, epoch, |hold| self.inner.confirm(hold)).await
    }

    /// Publishes `value` (ADR 0068): one autocommit `UPDATE` of the row's
    /// `value` and `value_epoch`, only if the row still shows this
    /// attempt's nonce and won epoch with a holder, so a deposed holder's
    /// value is never written; a reader shows a value only with the epoch
    /// it was written in, so a value never outlives its term. Moves
    /// neither the renewal version nor the renewal time.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the row shows
    /// another holder, a release or a later epoch, or the database file
    /// was deleted, replaced or got a second name; otherwise as
    /// [`confirm`](Claim::confirm). Cancel safety: cancel safe.
    async fn proclaim(
        &self,
        attempt: &mut SqliteAttempt,
        value: &LeaderValue,
    ) -> Result<(), election_core::Error> {
        let (nonce, epoch, value) = (attempt.nonce, attempt.epoch, value.as_str());
        election_sql::write_term(&self.name, nonce, epoch, |hold| {
            self.inner.proclaim(hold, value)
        })
        .await
    }

    /// Releases the row, conditional on this attempt's nonce.
    async fn release(&self, attempt: &mut SqliteAttempt) -> Result<(), election_core::Error> {
        let inner = &self.inner;
        let released = row::release(
            &inner.pool,
            self.name.as_str(),
            attempt.nonce,
            inner.release_sync,
        )
        .await
        .map_err(|e| self.core(e))?;
        attempt.may_hold = false;
        if released {
            Ok(())
        } else {
            Err(election_core::Error::NotHeld {
                name: self.name.clone(),
            })
        }
    }

    /// After a drop, a cancelled or a failed step that may have committed a
    /// claim: releases it in the background (conditional on the nonce).
    fn close(&self, attempt: SqliteAttempt, end: End) {
        let gives_up = matches!(end, End::Dropped | End::Cancelled | End::Failed);
        if !(attempt.may_hold && gives_up) {
            // Dropping the attempt frees the same-host lock: the term (if
            // any) has ended and its row was released or lost.
            return;
        }
        let (pool, name, sync) = (
            self.inner.pool.clone(),
            self.name.clone(),
            self.inner.release_sync,
        );
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if let Err(e) = row::release(&pool, name.as_str(), attempt.nonce, sync).await {
                        tracing::warn!(%name, error = %e, "background release failed; the lease ages out after its TTL");
                    }
                    // Freed after the release, so a waiter it wakes finds
                    // the row released (with the lock a waiting thread may
                    // have got for this term).
                    drop(attempt.host_lock);
                    drop(attempt.lock_wait);
                });
            }
            Err(_) => {
                tracing::warn!(name = %self.name, "no runtime to release on; the lease ages out after its TTL");
            }
        }
    }

    /// The holder and epoch as the row records them. A holder that died
    /// shows until a contender takes its lease over (one TTL), with
    /// `renewed` (the row's `renewed_unix_ms`) and `ttl`, so a reader can
    /// tell it presumed dead ([`Leader::presumed_dead_at`], display only).
    /// `since` is the row's `acquired_unix_ms`: the winner's wall clock
    /// (its [`Clock`](crate::Clock)) in the transaction that won the term.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        let row = row::read(&self.inner.pool, self.name.as_str(), self.inner.values)
            .await
            .map_err(|e| self.core(e))?;
        match row {
            Some(row) => row.leader().map_err(|e| self.core(Error::from(e))),
            None => Ok(None),
        }
    }
}
