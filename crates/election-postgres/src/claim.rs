//! [`PostgresClaim`]: the claim of one candidate in a
//! [`PostgresElection`](crate::PostgresElection), and its
//! [`PostgresAttempt`]: winning the lease row (woken by `NOTIFY` or the
//! poll), renewing (the shared SQL layer's `renew_term`), confirming,
//! releasing.

use std::sync::Arc;

use election_core::{
    Claim, ElectionName, End, Identity, Leader, LeaderValue, TermReporter, WatchGuard, Won,
};
use tokio::sync::broadcast;

use crate::error::Error;
use crate::store::context::Context;
use crate::store::notify::{self, Wake};
use crate::store::row::{self, Observed, Take};

/// The claim of one candidate in a [`PostgresElection`](crate::PostgresElection).
///
/// - `try_claim` reads the name's lease row and epoch record (one
///   statement) and, when the name is released, never held, or held by a
///   term this attempt has seen unchanged (same holder, epoch and renewal
///   version) for a full TTL on its own monotonic clock, wins it with one
///   conditional statement that draws the epoch from the sequence in that
///   very statement (rule 1). A server that cannot be reached before
///   anything was sent is "not now" (`Ok(None)`); a claim statement that
///   failed or timed out after it was sent has an unknown outcome: the
///   campaign closes the attempt, which releases it in the background.
///   An attempt's first look, and its look after a notification about the
///   name woke it (most often a release), read and take a released or
///   never-held name in one statement instead (ADR 0045, ADR 0065): the
///   read comes back with the epoch won, if any, and a row that is held
///   (or a name whose row was deleted but whose epoch record remains) is
///   only read. That statement is a write: if it fails after it was sent,
///   its outcome is unknown as above.
/// - The holder renews every renew interval (one conditional `UPDATE`) and
///   counts validity (`ttl - margin`) from before each renewal was sent; a
///   renewal that fails or times out is retried until that deadline, and
///   the term is lost then (rule 2), or at once when the row shows another
///   term or none.
/// - Resign releases the row (conditional on this attempt's nonce) and
///   notifies waiters; a drop does the same in the background; if that
///   cannot run, the lease ages out after its TTL.
#[derive(Debug)]
pub struct PostgresClaim {
    pub(crate) inner: Arc<Context>,
    pub(crate) name: ElectionName,
    pub(crate) identity: Identity,
}

/// One attempt of a [`PostgresClaim`].
#[derive(Debug)]
pub struct PostgresAttempt {
    nonce: i64,
    observed: Option<Observed>,
    /// Set once a claim statement was sent (its outcome may be a win).
    may_hold: bool,
    /// The epoch this attempt won, for the commit-point check.
    epoch: Option<i64>,
    /// Wake-ups, subscribed before the first read.
    wakes: Option<broadcast::Receiver<Wake>>,
    /// Whether the next look also takes the row if it is released (or the
    /// name was never held): the attempt's first look, and the look after
    /// a notification about this name (or a missed one) woke the last wait.
    woken: bool,
}

impl PostgresClaim {
    /// The win of `epoch` by `attempt`, whose statement was sent at `sent`.
    fn won(
        &self,
        attempt: &mut PostgresAttempt,
        sent: tokio::time::Instant,
        epoch: i64,
    ) -> Result<Option<Won>, election_core::Error> {
        attempt.observed = None;
        attempt.epoch = Some(epoch);
        let epoch = row::epoch_of(self.name.as_str(), epoch).map_err(|e| self.core(e))?;
        Ok(Some(Won {
            epoch,
            valid_until: Some(sent + self.inner.options.validity()),
        }))
    }

    fn core(&self, e: Error) -> election_core::Error {
        e.into_core(&self.name)
    }

    fn not_held(&self) -> election_core::Error {
        election_core::Error::NotHeld {
            name: self.name.clone(),
        }
    }
}

impl Claim for PostgresClaim {
    type Attempt = PostgresAttempt;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn open(&self) -> Result<PostgresAttempt, election_core::Error> {
        Ok(PostgresAttempt {
            nonce: election_core::attempt_nonce() as i64,
            observed: None,
            may_hold: false,
            epoch: None,
            wakes: None,
            // The first look takes a free name in one statement (ADR 0065).
            woken: true,
        })
    }

    /// One read, then (when the name may be taken) one claim statement;
    /// at an attempt's first look and after a wake-up by notification, one
    /// statement that reads and takes a released or never-held name; see
    /// [`PostgresClaim`]. A name whose next epoch would be above
    /// [`Epoch::MAX`](election_core::Epoch::MAX) is
    /// [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted)
    /// (nothing written).
    async fn try_claim(
        &self,
        attempt: &mut PostgresAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let ctx = &self.inner;
        // Wake-ups from here on concern what the read below may miss.
        let wakes = attempt
            .wakes
            .get_or_insert_with(|| ctx.notifier.subscribe());
        notify::drain(wakes);
        let sent = ctx.clock.now();
        let seen = if std::mem::take(&mut attempt.woken) {
            // The first look, or woken by a notification (most often a
            // release): look and take a released or never-held name in one
            // statement (ADR 0045, ADR 0065).
            attempt.may_hold = true;
            match ctx
                .take_released(self.name.as_str(), attempt.nonce, self.identity.as_str())
                .await
            {
                Ok((_, Some(epoch))) => return self.won(attempt, sent, epoch),
                Ok((seen, None)) => {
                    attempt.may_hold = false;
                    seen
                }
                // Maybe sent, and may have won: the campaign closes the
                // attempt, which releases it in the background (a server
                // down or no connection in time is Unavailable with the
                // cause, which a waiting campaign rides out and reports).
                Err(e) => return Err(self.core(e)),
            }
        } else {
            // A server down is Unavailable with the cause: a waiting
            // campaign reports it and tries again after a backoff; a single
            // try returns it (never "held by another").
            ctx.read_one(self.name.as_str())
                .await
                .map_err(|e| self.core(e))?
        };
        let found = seen.found();
        if !row::may_claim(
            &mut attempt.observed,
            &found,
            ctx.options.ttl(),
            ctx.clock.now(),
        ) {
            return Ok(None);
        }
        let take = Take::new(self.name.as_str(), attempt.nonce, &seen).map_err(|e| self.core(e))?;
        attempt.may_hold = true;
        let won = ctx
            .claim_many(&[take], self.identity.as_str())
            .await
            .map_err(|e| self.core(e))?;
        let Some(&(_, epoch)) = won.first() else {
            // The statement committed and won nothing: the row changed
            // since it was read.
            attempt.may_hold = false;
            attempt.observed = None;
            return Ok(None);
        };
        self.won(attempt, sent, epoch)
    }

    /// Waits for a notification that this name's row was released or won
    /// (`LISTEN`, see the [crate docs](crate)), at most `poll_interval`.
    /// The first wait of a process starts its listener and readies the
    /// pool's connections for the handover in the background (ADR 0040,
    /// ADR 0065).
    ///
    /// Cancel safety: cancel safe.
    async fn wait(
        &self,
        attempt: &mut PostgresAttempt,
        poll_interval: std::time::Duration,
    ) -> Result<(), election_core::Error> {
        let ctx = &self.inner;
        // Subscribed before the listener starts (see `pause_if_unused`).
        let wakes = attempt
            .wakes
            .get_or_insert_with(|| ctx.notifier.subscribe());
        ctx.notifier.start();
        ctx.ready_soon();
        let name = self.name.as_str();
        attempt.woken = tokio::time::timeout(poll_interval, notify::woken(wakes, |n| n == name))
            .await
            .is_ok();
        Ok(())
    }

    /// Starts the renewal task (see [`PostgresClaim`]), and readies the
    /// pool for the term's release in the background if no wait did
    /// (ADR 0065).
    fn watch(
        &self,
        attempt: &mut PostgresAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        self.inner.ready_soon();
        // A term waits for nothing: with no one else of this process
        // subscribed, its listener closes now, not at the handover that
        // ends the term (ADR 0071).
        attempt.wakes = None;
        self.inner.notifier.pause_if_unused();
        election_sql::watch_term(self.inner.clone(), &self.name, attempt.nonce, won, reporter)
    }

    /// The commit-point check: one conditional renewal, which bumps the
    /// row's renewal version only while the row still shows this attempt's
    /// nonce and won epoch with a holder, and commits before this returns
    /// `Ok(())`.
    ///
    /// What a success proves: no other candidate held the row when the
    /// statement committed, and because it moved the renewal version,
    /// every contender restarts its count of a full TTL from a moment
    /// after that commit: the write that follows has at least the lease's
    /// validity (`ttl - margin`, counted from before the check was sent)
    /// before anyone else can win the row.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the row shows
    /// another term, a release, or none, or if this attempt never won;
    /// `Unavailable` if the server cannot answer; `OutcomeUnknown` if it
    /// did not answer within the lease's validity. In each the claim is in
    /// doubt for this write (do not write); the renewal task decides about
    /// the term.
    ///
    /// Cancel safety: cancel safe: the row is unchanged or renewed by this
    /// same term.
    async fn confirm(&self, attempt: &mut PostgresAttempt) -> Result<(), election_core::Error> {
        let (nonce, epoch) = (attempt.nonce, attempt.epoch);
        election_sql::write_term(&self.name, nonce, epoch, |hold| self.inner.confirm(hold)).await
    }

    /// Publishes `value` (ADR 0068): one statement updates the row's
    /// `value` and `value_epoch` only if it still shows this attempt's
    /// nonce and won epoch with a holder, and notifies observers at commit.
    /// A deposed holder's value is never written; a read shows a value only
    /// with the epoch it was written in, so a value never outlives its
    /// term. Moves neither the renewal version nor the renewal time.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the row shows
    /// another holder, a release or a later epoch;
    /// [`election_core::Error::Unavailable`] /
    /// [`election_core::Error::OutcomeUnknown`] (bounded by the lease's
    /// validity) as [`confirm`](Claim::confirm). Cancel safety: cancel
    /// safe (the value is written or not; nothing else changes).
    async fn proclaim(
        &self,
        attempt: &mut PostgresAttempt,
        value: &LeaderValue,
    ) -> Result<(), election_core::Error> {
        let (nonce, epoch, value) = (attempt.nonce, attempt.epoch, value.as_str());
        election_sql::write_term(&self.name, nonce, epoch, |hold| {
            self.inner.proclaim(hold, value)
        })
        .await
    }

    /// Releases the row (conditional on this attempt's nonce) and notifies
    /// waiters, in one statement.
    async fn release(&self, attempt: &mut PostgresAttempt) -> Result<(), election_core::Error> {
        let released = self
            .inner
            .release_many(&[(self.name.as_str(), attempt.nonce)])
            .await
            .map_err(|e| self.core(e))?;
        attempt.may_hold = false;
        if released.contains(self.name.as_str()) {
            Ok(())
        } else {
            Err(self.not_held())
        }
    }

    /// After a drop, a cancelled or a failed step that may have committed a
    /// claim: releases it in the background (conditional on the nonce).
    fn close(&self, attempt: PostgresAttempt, end: End) {
        let gives_up = matches!(end, End::Dropped | End::Cancelled | End::Failed);
        if attempt.may_hold && gives_up {
            self.inner
                .release_in_background(vec![(self.name.as_str().to_owned(), attempt.nonce)]);
        }
    }

    /// The holder and epoch as the row records them. A holder that died
    /// shows until a contender takes its lease over (one TTL). `since` is
    /// the winner's wall clock (its [`Clock`](crate::Clock)) when it won the term.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        self.inner.read_leader(&self.name).await
    }
}
