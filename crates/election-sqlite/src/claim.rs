//! [`SqliteClaim`]: the claim of one candidate in a [`SqliteElection`](crate::SqliteElection),
//! and its [`SqliteAttempt`]: winning the lease row, waiting (the same-host
//! lock or the poll), renewing (the shared SQL layer's `renew_term`),
//! confirming, releasing.

use std::sync::Arc;

use election_core::{Claim, ElectionName, Leader, Won};
use election_sql::{AttemptState, ClaimRows, HeldRow, SqlAttempt, SqlClaim};
use tokio::sync::oneshot;

use crate::error::Error;
use crate::store::context::SqliteStore;
use crate::store::host_lock;
use crate::store::row::{self, ClaimWrite, Found, Observed};

/// The claim of one candidate in a [`SqliteElection`](crate::SqliteElection):
/// the shared SQL claim ([`SqlClaim`]) over this crate's [`SqliteStore`],
/// whose [`ClaimRows`] steps are SQLite's (ADR 0081).
///
/// - `try_claim`: one `BEGIN IMMEDIATE` transaction wins a released or
///   never-held lease, or one whose holder, epoch and renewal version this
///   attempt has seen unchanged for a full TTL (a vanished row: seen gone
///   for a full TTL), with the next epoch written to the lease row and the
///   epoch state. A database busy past the busy timeout counts as "not
///   now" (`Ok(None)`); a name whose next epoch would be above
///   [`Epoch::MAX`](election_core::Epoch::MAX) is
///   [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted)
///   (nothing written); a database file deleted or replaced since it was
///   opened is [`Error::FileReplaced`], one with a second name (a hard
///   link, a mount of its own) [`Error::SecondName`] (both as
///   configuration errors).
/// - `wait`: waits in the kernel for the same-host lock (ADR 0026), which
///   the holder frees when its attempt is closed after its term ended
///   (resigned, or lost and dropped) or the kernel frees when its process
///   dies; `poll_interval` is the backstop. An attempt that lost the row
///   with the lock in hand (the holder won it without the lock) gives the
///   lock up first and waits for it again, so the holder's thread can take
///   it and free it when that term ends (a bounded number of times per
///   holder's term). Without the lock (a shared filesystem, a pool with no
///   file, a failed wait) or while this attempt keeps it, this sleeps
///   `poll_interval`. Cancel safe; the waiting thread stays with the
///   attempt (and frees the lock at once if the attempt is gone when it
///   gets it).
/// - `confirm`, the commit-point check: one conditional renewal. In one
///   write transaction (one autocommit `UPDATE`) it bumps the row's
///   renewal version only if the row still shows this attempt's nonce and
///   won epoch with a holder, exactly as the renewal task does; it commits
///   before this returns `Ok(())`. A success proves that no other
///   candidate held the row when the transaction committed, and because it
///   moved the renewal version, every contender restarts its count of a
///   full TTL without renewal from a moment after that commit: the write
///   that follows has at least the lease's validity (`ttl - margin`,
///   counted from before the check was sent) before anyone else can win
///   the row. The renewal task's own renewals are conditional on the nonce
///   and epoch only, never on the version, so a confirm (committed, rolled
///   back or in doubt) never makes the holder's next renewal fail.
///   [`election_core::Error::NotHeld`] if the row shows another holder, a
///   release, a later epoch, or if this attempt never won, and also when
///   the database file was deleted or replaced or got a second name (ADR
///   0046); [`election_core::Error::Unavailable`] if the database cannot
///   answer (busy past the busy timeout, every pooled connection in use,
///   I/O errors); [`election_core::Error::OutcomeUnknown`] if it did not
///   answer within the lease's validity (and `Config` if the database
///   became read-only). In each the claim is in doubt for this write (do
///   not write). Cancel safe: the row is unchanged or renewed by this same
///   holder.
/// - `proclaim` (ADR 0068): one autocommit `UPDATE` of the row's `value`
///   and `value_epoch`, only if the row still shows this attempt's nonce
///   and won epoch with a holder; moves neither the renewal version nor
///   the renewal time. Failure model as `confirm`.
/// - `leader`: the holder and epoch as the row records them. A holder that
///   died shows until a contender takes its lease over (one TTL), with
///   `renewed` (the row's `renewed_unix_ms`) and `ttl`, so a reader can
///   tell it presumed dead ([`Leader::presumed_dead_at`], display only).
///   `since` is the row's `acquired_unix_ms`: the winner's wall clock (its
///   [`Clock`](crate::Clock)) in the transaction that won the term.
///
/// - Transfer (ADR 0112, `Term::transfer`): one autocommit `UPDATE`,
///   conditional on this attempt's nonce and won epoch as the release is,
///   rewrites the row as held by the pseudo-holder
///   `"\u{1}handed-to <to>\u{1}<from>"`
///   ([`handed_to`](election_sql::lease_row::handed_to)) with no nonce,
///   no same-host lock, the window as its TTL and the ended term's epoch
///   (none drawn). The successor's claim takes the row at once (in one
///   `BEGIN IMMEDIATE` transaction, on the row as read, with the next
///   epoch, as every claim); any other candidate waits it out as a holder
///   that stopped renewing, for the window counted from its own first
///   read of it, and wakes when the window ends at the latest. Waiters on
///   this host wake when the handing attempt is closed (the same-host
///   lock), as after a release. The holder's renewal reads a transfer
///   request stored beside the term (`SqliteElection::request_transfer`)
///   and reports it, so a request reaches the holder within one renew
///   interval.
///
/// How a term ends: resign releases the row (conditional on this attempt's
/// nonce); a drop (or a cancelled or failed step that may have committed a
/// claim) starts the same release in the background on the current tokio
/// runtime; if it cannot run, the lease ages out after its TTL. A contender
/// on the same host wakes when the term's attempt is closed (the same-host
/// lock, see the [crate docs](crate)); elsewhere, or without the lock, it
/// learns of a release at its next poll (the candidate's poll interval).
pub type SqliteClaim = SqlClaim<SqliteStore>;

/// One attempt of a [`SqliteClaim`].
pub type SqliteAttempt = SqlAttempt<SqliteStore>;

/// What a SQLite attempt keeps of its own: the same-host lock.
#[derive(Debug, Default)]
pub struct HostLockWait {
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

impl HostLockWait {
    /// Takes what the same-host lock's waiting thread answered: the lock,
    /// or (its error, or `None` when the thread is gone) polling from now
    /// on. Either way the wait is over.
    fn settle(&mut self, name: &str, got: Option<std::io::Result<std::fs::File>>) {
        self.lock_wait = None;
        match got {
            Some(Ok(file)) => self.host_lock = Some(file),
            Some(Err(e)) => {
                tracing::debug!(%name, error = %e, "same-host lock failed; polling");
                self.lock_failed = true;
            }
            None => self.lock_failed = true,
        }
    }
}

type Attempt = AttemptState<HostLockWait>;

/// How many times a waiter gives the same-host lock up to one holder's
/// term whose row it lost with the lock in hand, before it keeps the lock
/// and polls. The holder's own waiting thread normally takes the lock at
/// the first one; more only if this waiter's next wait beat it to the lock.
const MAX_HAND_OVERS: u32 = 16;

/// Takes the same-host lock of `name` if it is free (or the waiting
/// thread got it), before a claim that could commit. Failures only
/// cost the wake-up: they are logged and the claim goes on.
fn take_host_lock(attempt: &mut Attempt, ctx: &SqliteStore, name: &str) {
    let Some(locks) = ctx.host_locks.as_ref() else {
        return;
    };
    if attempt.waiting.host_lock.is_some() || attempt.waiting.lock_failed {
        return;
    }
    if let Some(rx) = attempt.waiting.lock_wait.as_mut() {
        match rx.try_recv() {
            Ok(got) => attempt.waiting.settle(name, Some(got)),
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(oneshot::error::TryRecvError::Closed) => attempt.waiting.settle(name, None),
        }
        return;
    }
    match host_lock::try_take(&locks.path(name)) {
        Ok(file) => attempt.waiting.host_lock = file,
        Err(e) => {
            tracing::debug!(%name, error = %e, "same-host lock failed; polling");
            attempt.waiting.lock_failed = true;
        }
    }
}

/// After a win without the same-host lock (it was held elsewhere, by a
/// previous holder between its release and its close, or by a waiter
/// about to claim): waits for it on a thread of its own, so the lock
/// comes to this term and is freed when its attempt is closed, waking
/// the next waiter. The row keeps `lock_id` NULL for this term (it was
/// won without the lock), so no contender takes it over early.
fn follow_host_lock(attempt: &mut Attempt, ctx: &SqliteStore, name: &str) {
    let Some(locks) = ctx.host_locks.as_ref() else {
        return;
    };
    if attempt.waiting.host_lock.is_none()
        && attempt.waiting.lock_wait.is_none()
        && !attempt.waiting.lock_failed
    {
        attempt.waiting.lock_wait = Some(host_lock::wait_for(locks.path(name)));
    }
}

/// Whether this waiter, holding the same-host lock after losing the
/// row, gives the lock up (and waits for it again) so the row's holder,
/// which won without it, can take it and wake this waiter when its
/// term ends. Not while a claim may be held; not for a vanished row or
/// an unread one; at most [`MAX_HAND_OVERS`] times per holder's term.
fn hands_over(attempt: &mut Attempt, name: &str) -> bool {
    if attempt.waiting.host_lock.is_none() || attempt.may_hold {
        return false;
    }
    let Some(term) = attempt.observed.as_ref().and_then(Observed::held_epoch) else {
        return false;
    };
    let count = match attempt.waiting.handed_over {
        Some((t, n)) if t == term => n,
        _ => 0,
    };
    if count >= MAX_HAND_OVERS {
        return false;
    }
    tracing::debug!(%name, term, "lost the row with the same-host lock in hand; giving it up to the holder");
    attempt.waiting.handed_over = Some((term, count + 1));
    attempt.waiting.host_lock = None;
    true
}

impl ClaimRows for SqliteStore {
    const BACKEND: &'static str = "sqlite";

    type Waiting = HostLockWait;

    fn waiting(&self) -> HostLockWait {
        HostLockWait::default()
    }

    /// One `BEGIN IMMEDIATE` transaction (see [`SqliteClaim`]).
    async fn try_claim(
        claim: &SqliteClaim,
        attempt: &mut Attempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let inner = &**claim.store();
        let name = claim.name();
        inner.check_in_place().map_err(|e| claim.core(e))?;
        take_host_lock(attempt, inner, name.as_str());
        let sent = inner.clock.now();
        let ttl = inner.options.ttl();
        let observed = &mut attempt.observed;
        let clock = &inner.clock;
        let me = claim.identity().as_str();
        let decide = |found: &Found| row::may_claim_as(observed, found, ttl, clock.now(), me);
        let lock = attempt
            .waiting
            .host_lock
            .as_ref()
            .zip(inner.host_locks.as_ref())
            .and_then(|(file, locks)| locks.lock_identity(file));
        let may_hold = &mut attempt.may_hold;
        let won = row::claim(
            &inner.pool,
            ClaimWrite {
                name: name.as_str(),
                identity: claim.identity().as_str(),
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
                tracing::debug!(%name, error = %e, "database busy; trying again later");
                return Ok(None);
            }
            other => other.map_err(|e| claim.core(e))?,
        };
        let Some(epoch) = won else { return Ok(None) };
        attempt.observed = None;
        attempt.epoch = Some(epoch);
        follow_host_lock(attempt, inner, name.as_str());
        let epoch = row::epoch_of(name.as_str(), epoch).map_err(|e| claim.core(e))?;
        Ok(Some(Won {
            epoch,
            valid_until: Some(sent + inner.options.validity()),
        }))
    }

    /// Waits for the same-host lock, at most `poll` (see [`SqliteClaim`]).
    async fn wait(
        claim: &SqliteClaim,
        attempt: &mut Attempt,
        poll: std::time::Duration,
    ) -> Result<(), election_core::Error> {
        // A handover to another candidate seen (ADR 0112): awake when its
        // window ends, at the latest.
        let poll = match attempt.observed.as_ref().and_then(Observed::handover_ends) {
            Some(ends) => poll.min(ends.saturating_duration_since(claim.store().clock.now())),
            None => poll,
        };
        let sleep = tokio::time::sleep(poll);
        let name = claim.name();
        let Some(locks) = claim.store().host_locks.as_ref() else {
            sleep.await;
            return Ok(());
        };
        // A waiter that lost the row with the lock in hand: the holder won
        // without it, so keeping it would leave nobody to wake this waiter
        // when that term ends. Give it up and wait for it again.
        hands_over(attempt, name.as_str());
        let waiting = &mut attempt.waiting;
        if waiting.host_lock.is_some() || waiting.lock_failed {
            sleep.await;
            return Ok(());
        }
        let rx = waiting
            .lock_wait
            .get_or_insert_with(|| host_lock::wait_for(locks.path(name.as_str())));
        tokio::select! {
            got = rx => waiting.settle(name.as_str(), got.ok()),
            () = sleep => {}
        }
        Ok(())
    }

    async fn proclaim(&self, hold: HeldRow<'_>, value: &str) -> Result<bool, Error> {
        SqliteStore::proclaim(self, hold, value).await
    }

    async fn release(&self, name: &str, nonce: i64) -> Result<bool, Error> {
        row::release(&self.pool, name, nonce, self.release_sync).await
    }

    /// One autocommit `UPDATE` (see [`SqliteClaim`](crate::SqliteClaim)); waiters on this host
    /// wake when the handing attempt is closed (the same-host lock), as
    /// after a release.
    async fn release_to(
        &self,
        hold: HeldRow<'_>,
        holder: &str,
        window_ms: i64,
    ) -> Result<bool, Error> {
        let wall_ms = self.clock.wall_unix_ms();
        row::release_to(&self.pool, hold, holder, window_ms, wall_ms).await
    }

    /// Releases in a task of its own, then frees the same-host lock.
    fn release_later(self: &Arc<Self>, name: &ElectionName, attempt: Attempt) {
        let (pool, name, sync) = (self.pool.clone(), name.clone(), self.release_sync);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if let Err(e) = row::release(&pool, name.as_str(), attempt.nonce, sync).await {
                        tracing::warn!(%name, error = %e, "background release failed; the lease ages out after its TTL");
                    }
                    // Freed after the release, so a waiter it wakes finds
                    // the row released (with the lock a waiting thread may
                    // have got for this term).
                    drop(attempt.waiting.host_lock);
                    drop(attempt.waiting.lock_wait);
                });
            }
            Err(_) => {
                tracing::warn!(%name, "no runtime to release on; the lease ages out after its TTL");
            }
        }
    }

    async fn leader(&self, name: &ElectionName) -> Result<Option<Leader>, election_core::Error> {
        let row = row::read(&self.pool, name.as_str(), self.values)
            .await
            .map_err(|e| e.into_core(name))?;
        match row {
            Some(row) => row.leader().map_err(|e| Error::from(e).into_core(name)),
            None => Ok(None),
        }
    }
}
