//! [`PostgresClaim`]: the claim of one candidate in a
//! [`PostgresElection`](crate::PostgresElection), and its
//! [`PostgresAttempt`]: winning the lease row (in line in the name's
//! waiters' queue, the head woken by `NOTIFY`, the rest by the poll),
//! renewing (the shared SQL layer's `renew_term`), confirming,
//! releasing.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::store::context::PostgresStore;
use crate::store::notify::{self, Wakes};
use crate::store::row::{self, Found, Take};
use election_core::{Claim, ElectionName, Leader, Won};
use election_sql::{AttemptState, ClaimRows, HeldRow, SqlAttempt, SqlClaim};

/// The claim of one candidate in a [`PostgresElection`](crate::PostgresElection):
/// the shared SQL claim ([`SqlClaim`]) over this crate's [`PostgresStore`],
/// whose [`ClaimRows`] steps are PostgreSQL's (ADR 0081).
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
///   its outcome is unknown as above. A name whose next epoch would be
///   above [`Epoch::MAX`](election_core::Epoch::MAX) is
///   [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted)
///   (nothing written).
/// - `wait` (ADR 0108): the attempt's first wait writes its row in the
///   name's waiters' queue (its place drawn from a sequence, its expiry a
///   TTL from then by the server's clock, the channel of this process's
///   session), which a task renews every renew interval; the process's
///   session listens on its own channel while a waiter of it is in line.
///   A release passes the term to the queue's head (the first unexpired,
///   fresh row whose server process runs; ADR 0120) or else wakes it, on
///   its process's channel, naming its attempt: the wait returns when
///   that notification names this attempt, at most `poll_interval`, and
///   a pass is the next try's win, with no statement (validity from
///   before the waiter-row write the pass saw). Behind the head, the poll
///   is the backstop: a look after a poll that finds the name free claims
///   it only if the look before found the same vacancy (the head did not
///   claim within a poll interval: dead, paused, cut off); while the row's
///   last write found a term holding the name and a live row ahead, no
///   look at all (ADR 0121). A win (in its winning statement) or a close (in
///   the background) takes the row out; a dead waiter's row stops
///   counting once it expires. An attempt whose row could not be written
///   waits for a notification about the name, as every waiter did before
///   the queue. The first wait of a process readies the session for the
///   handover in the background (ADR 0040, ADR 0065). After a look that
///   lost the race for a free name to another winner, the look a
///   notification brings comes no sooner than 20 ms after that look
///   (still within `poll_interval`), past the winner's start (ADR 0096).
///   Cancel safe.
/// - `watch` starts the renewal task, and readies the pool for the term's
///   release in the background if no wait did (ADR 0065); with no one
///   else of this process subscribed, the listener closes 100 ms later
///   (ADR 0071, 0094).
///   The holder renews every renew interval (one conditional `UPDATE`) and
///   counts validity (`ttl - margin`) from before each renewal was sent; a
///   renewal that fails or times out is retried until that deadline, and
///   the term is lost then (rule 2), or at once when the row shows another
///   term or none.
/// - `confirm`, the commit-point check: one conditional renewal, which
///   bumps the row's renewal version only while the row still shows this
///   attempt's nonce and won epoch with a holder, and commits before this
///   returns `Ok(())`. A success proves that no other candidate held the
///   row when the statement committed, and because it moved the renewal
///   version, every contender restarts its count of a full TTL from a
///   moment after that commit: the write that follows has at least the
///   lease's validity (`ttl - margin`, counted from before the check was
///   sent) before anyone else can win the row.
///   [`election_core::Error::NotHeld`] if the row shows another term, a
///   release, or none, or if this attempt never won; `Unavailable` if the
///   server cannot answer; `OutcomeUnknown` if it did not answer within
///   the lease's validity. In each the claim is in doubt for this write (do
///   not write). Cancel safe: the row is unchanged or renewed by this same
///   term.
/// - `proclaim` (ADR 0068): one statement updates the row's `value` and
///   `value_epoch` only if it still shows this attempt's nonce and won
///   epoch with a holder, and notifies observers at commit. Moves neither
///   the renewal version nor the renewal time. Failure model as `confirm`.
/// - Resign releases the row (conditional on this attempt's nonce), or
///   passes it to the head of its waiters' queue in a new epoch drawn in
///   that statement (ADR 0120), and notifies the name's channel
///   (observers, lease sets, waiters of older versions) and the head, in
///   one statement; a drop does the same in the background; if that
///   cannot run, the lease ages out after its TTL.
/// - Transfer (ADR 0112, `Term::transfer`): one statement, conditional on
///   this attempt's nonce and won epoch as the release is, rewrites the
///   row as held by the pseudo-holder `"\u{1}handed-to <to>\u{1}<from>"`
///   ([`handed_to`](election_sql::lease_row::handed_to)) with no nonce,
///   the window as its TTL and the ended term's epoch (none drawn), and
///   notifies the name's channel and every unexpired waiter of the name
///   (the successor may be anywhere in line). The successor's look takes
///   the row at once (conditional on the row as read, the next epoch from
///   the sequence, as every claim; its look after the notification reads
///   and takes the row handed to it in one statement, as a released one);
///   any other candidate waits it out as a
///   holder that stopped renewing, for the window counted from its own
///   first read of it, and wakes when the window ends at the latest. The
///   holder's renewal reads a transfer request stored beside the term
///   (`PostgresElection::request_transfer`) and reports it, so a request
///   reaches the holder within one renew interval.
/// - `leader`: the holder and epoch as the row records them. A holder that
///   died shows until a contender takes its lease over (one TTL). `since`
///   is the winner's wall clock (its [`Clock`](crate::Clock)) when it won
///   the term.
pub type PostgresClaim = SqlClaim<PostgresStore>;

/// One attempt of a [`PostgresClaim`].
pub type PostgresAttempt = SqlAttempt<PostgresStore>;

/// What a PostgreSQL attempt keeps of its own: its wake-ups and its place
/// in the name's waiters' queue.
#[derive(Debug)]
pub struct WakeWait {
    /// Wake-ups, subscribed before the first read.
    wakes: Option<Wakes>,
    /// Whether the next look also takes the row if it is released (or the
    /// name was never held): the attempt's first look, and the look after
    /// a wake-up (a release that found this attempt at the head of the
    /// queue, a notification about this name while not queued, or a
    /// missed one) ended the last wait.
    woken: bool,
    /// A release passed the term to this attempt (ADR 0120): the epoch and
    /// the ticket of the waiter-row write it saw, for the next try.
    passed: Option<(i64, i64)>,
    /// When this attempt's last look lost the race for a free name to
    /// another winner (ADR 0093): the look that the next notification
    /// brings waits until [`LOST_RACE_PAUSE`] after it (ADR 0096).
    lost_race: Option<tokio::time::Instant>,
    /// The attempt's row in the waiters' queue (ADR 0108), once written;
    /// dropped (the row deleted in the background) with the attempt or at
    /// its win.
    queue: Option<Queued>,
    /// The vacancy (the released row's renewal version; `None`: never
    /// held) that this queued attempt's last look after a poll found and
    /// let be, for the head to take (ADR 0108).
    backstop: Option<Option<i64>>,
}

/// How many of a waiter's last row writes it remembers the send instants
/// of (ADR 0120): a release passes the term only to a row written less
/// than one and a half renew intervals ago (`fresh_until`), so only the
/// last two can be the one a pass names.
const TICKETS_KEPT: usize = 8;

/// A waiter's row writes (ADR 0120): the number of each and the instant
/// taken before it was sent, the last [`TICKETS_KEPT`]; whether a
/// renewal found the name held by this attempt (a pass it did not hear);
/// and what the last write that landed said of the line.
#[derive(Debug, Default)]
struct Tickets {
    sent: std::collections::VecDeque<(i64, tokio::time::Instant)>,
    holds: bool,
    line: Option<Seat>,
}

/// What a waiter-row write said of the line (ADR 0121), and when it was
/// sent.
#[derive(Clone, Copy, Debug)]
struct Seat {
    sent: tokio::time::Instant,
    /// A term held the name (not released, not handed over).
    held: bool,
    /// Rows ahead of this one that a release could choose as the head.
    ahead: i64,
}

impl Tickets {
    /// The next write's number, sent after `at`.
    fn next(&mut self, at: tokio::time::Instant) -> i64 {
        let ticket = self.sent.back().map_or(1, |&(t, _)| t + 1);
        if self.sent.len() == TICKETS_KEPT {
            self.sent.pop_front();
        }
        self.sent.push_back((ticket, at));
        ticket
    }

    /// The instant taken before write `ticket` was sent, if remembered.
    fn sent_at(&self, ticket: i64) -> Option<tokio::time::Instant> {
        self.sent
            .iter()
            .find(|&&(t, _)| t == ticket)
            .map(|&(_, at)| at)
    }

    /// What write `ticket` answered: `None`, the name held by this
    /// attempt; else whether a term held it and the rows ahead.
    fn answered(&mut self, ticket: i64, answer: Option<(bool, i64)>) {
        match answer {
            None => self.holds = true,
            Some((held, ahead)) => {
                if let Some(sent) = self.sent_at(ticket) {
                    self.line = Some(Seat { sent, held, ahead });
                }
            }
        }
    }

    /// Whether a look at `now` can wait (ADR 0121): the last write, sent
    /// less than `fresh` ago, found a term holding the name and this row
    /// behind another, and no renewal found the name held by this
    /// attempt. The head of the line looks at every poll (it takes over a
    /// term that ran out; a release passes it the term or wakes it); a
    /// waiter behind it learns from its row's renewals that the name is
    /// free or that it is the head, and looks then.
    fn at_rest(&self, now: tokio::time::Instant, fresh: Duration) -> bool {
        !self.holds
            && self
                .line
                .is_some_and(|s| s.held && s.ahead > 0 && now < s.sent + fresh)
    }
}

/// A waiting attempt's row in the waiters' queue of its name (ADR 0108),
/// renewed every renew interval by a task of its own; dropping this stops
/// the renewals and deletes the row, in the background (if that cannot
/// run, the row expires after a TTL). Dropped without [`Queued::won`], a
/// row found gone may have been passed the term (ADR 0120): the task then
/// releases it.
#[derive(Debug)]
struct Queued {
    /// The row's writes.
    tickets: Arc<std::sync::Mutex<Tickets>>,
    /// Sent by [`Queued::won`]; dropped: the task deletes the row and ends.
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Queued {
    /// Writes the row of `attempt`'s `nonce` in the queue of `name`
    /// (bounded by the request timeout) and starts its renewals; with it,
    /// whether the name's lease row was held when the write locked it
    /// (`false`: released or gone, by a release that no notification
    /// brought this attempt, which was not in line yet).
    async fn join(
        store: &Arc<PostgresStore>,
        name: &str,
        (nonce, identity): (i64, &str),
    ) -> Result<(Queued, bool), Error> {
        let tickets = Arc::new(std::sync::Mutex::new(Tickets::default()));
        let ticket = lock(&tickets).next(store.clock.now());
        let answer = store
            .waiter_renew(name, (nonce, identity), ticket, true)
            .await?;
        lock(&tickets).answered(ticket, answer);
        let held = answer.is_none_or(|(held, _)| held);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let line = Line {
            name: name.to_owned(),
            nonce,
            identity: identity.to_owned(),
            tickets: tickets.clone(),
        };
        tokio::spawn(keep_in_line(store.clone(), line, stopped));
        let queued = Queued { tickets, stop };
        Ok((queued, held))
    }

    /// The attempt won: the row is deleted (the win took it out of line
    /// already), and a row found gone is not released.
    fn won(self) {
        let _ = self.stop.send(());
    }

    /// The instant taken before write `ticket` of the row was sent.
    fn sent_at(&self, ticket: i64) -> Option<tokio::time::Instant> {
        lock(&self.tickets).sent_at(ticket)
    }

    /// Whether a renewal of the row found the name held by this attempt.
    fn holds(&self) -> bool {
        lock(&self.tickets).holds
    }

    /// [`Tickets::at_rest`].
    fn at_rest(&self, now: tokio::time::Instant, fresh: Duration) -> bool {
        lock(&self.tickets).at_rest(now, fresh)
    }
}

/// The tickets, whatever a panic elsewhere left them as (a number and an
/// instant: never half-written).
fn lock(tickets: &std::sync::Mutex<Tickets>) -> std::sync::MutexGuard<'_, Tickets> {
    tickets
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What [`keep_in_line`] renews.
struct Line {
    name: String,
    nonce: i64,
    identity: String,
    tickets: Arc<std::sync::Mutex<Tickets>>,
}

/// Renews the waiter row of `line` every renew interval until `stopped`,
/// then deletes it (each statement after the one before, so a renewal
/// never lands after the delete). Stopped without a win (the sender
/// dropped), a row found gone may have been passed the term, which no one
/// takes up: released (conditional on the nonce, so a term this attempt
/// does not hold is never touched), passing it on to the next in line.
async fn keep_in_line(
    store: Arc<PostgresStore>,
    line: Line,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let every = store.options.renew_interval();
    let (name, nonce) = (line.name.as_str(), line.nonce);
    let won = loop {
        tokio::select! {
            stop = &mut stopped => break stop.is_ok(),
            () = tokio::time::sleep(every) => {
                let ticket = lock(&line.tickets).next(store.clock.now());
                match store.waiter_renew(name, (nonce, &line.identity), ticket, false).await {
                    // `None`, not written: the name's row shows this
                    // attempt (a pass whose notification it did not hear).
                    Ok(answer) => lock(&line.tickets).answered(ticket, answer),
                    Err(e) => {
                        tracing::debug!(name = %name, error = %e, "a waiter row not renewed; trying again");
                    }
                }
            }
        }
    };
    if won {
        // The winning statement took the row out already; this delete
        // only catches a renewal that landed after it. Not on the path of
        // the term's start (ADR 0094's grace, for the same reason).
        tokio::time::sleep(crate::store::wake::UNUSED_GRACE).await;
    }
    let gone = match store.waiter_delete(name, nonce).await {
        Ok(deleted) => !deleted,
        Err(e) => {
            tracing::debug!(name = %name, error = %e, "a waiter row not deleted; it expires after its TTL");
            true
        }
    };
    if gone && !won {
        // One try: a term passed and not taken up that this misses ages
        // out after its TTL, as a holder that stopped.
        if let Err(e) = store.release_many(&[(name, nonce)]).await {
            tracing::debug!(name = %name, error = %e, "a term maybe passed to a waiter that left not released; it ages out");
        }
    }
}

/// How long after a look lost the race for a free name the look that a
/// notification brings waits (ADR 0096). The winner's own notification
/// arrives as the winner starts its term; a look at once would run beside
/// that start (on the same host, its CPUs) and find the name held. Only a
/// release within this time of the win is seen this much later; a
/// notification that comes later is looked at at once.
const LOST_RACE_PAUSE: Duration = Duration::from_millis(20);

type Attempt = AttemptState<WakeWait>;

/// The win of `epoch` by `attempt` of `claim`, whose statement was sent at
/// `sent`.
fn won(
    claim: &PostgresClaim,
    attempt: &mut Attempt,
    sent: tokio::time::Instant,
    epoch: i64,
) -> Result<Option<Won>, election_core::Error> {
    attempt.observed = None;
    attempt.epoch = Some(epoch);
    let epoch = row::epoch_of(claim.name().as_str(), epoch).map_err(|e| claim.core(e))?;
    Ok(Some(Won {
        epoch,
        valid_until: Some(sent + claim.store().options.validity()),
    }))
}

/// Takes up the term in `epoch` that a release passed to `attempt` (ADR
/// 0120) when the instant its validity would count from is not known (the
/// pass's notification missed, or the write it saw forgotten): one
/// conditional renewal, its validity counted from before it was sent, as
/// `confirm`'s. Not held (the row shows another term or none): no win.
async fn take_up(
    claim: &PostgresClaim,
    attempt: &mut Attempt,
    epoch: i64,
) -> Result<Option<Won>, election_core::Error> {
    let ctx = &**claim.store();
    let sent = ctx.clock.now();
    let hold = row::HeldRow {
        name: claim.name().as_str(),
        nonce: attempt.nonce,
        epoch,
    };
    attempt.may_hold = true;
    if ctx.confirm(hold).await.map_err(|e| claim.core(e))? {
        return won(claim, attempt, sent, epoch);
    }
    attempt.may_hold = false;
    attempt.observed = None;
    Ok(None)
}

impl ClaimRows for PostgresStore {
    const BACKEND: &'static str = "postgres";

    type Waiting = WakeWait;

    fn waiting(&self) -> WakeWait {
        WakeWait {
            wakes: None,
            // The first look takes a free name in one statement (ADR 0065).
            woken: true,
            passed: None,
            lost_race: None,
            queue: None,
            backstop: None,
        }
    }

    /// One read, then (when the name may be taken) one claim statement;
    /// at an attempt's first look and after a wake-up by notification, one
    /// statement that reads and takes a released or never-held name; see
    /// [`PostgresClaim`].
    async fn try_claim(
        claim: &PostgresClaim,
        attempt: &mut Attempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let ctx = &**claim.store();
        let name = claim.name().as_str();
        // Wake-ups from here on concern what the read below may miss.
        let wakes = attempt
            .waiting
            .wakes
            .get_or_insert_with(|| ctx.notifier.subscribe());
        match &attempt.waiting.queue {
            Some(_) => {
                let heard =
                    notify::take_pass(wakes, &ctx.session.wake_channel, attempt.nonce, name);
                if heard.is_some() {
                    attempt.waiting.passed = heard;
                }
            }
            None => notify::drain(wakes),
        }
        attempt.waiting.lost_race = None;
        if let Some((epoch, ticket)) = attempt.waiting.passed.take() {
            // A release passed the term to this attempt (ADR 0120): it
            // holds the row from the pass's commit, and its validity counts
            // from before it sent the waiter-row write the pass saw, which
            // committed before the pass did (rule 2).
            attempt.may_hold = true;
            let at = attempt
                .waiting
                .queue
                .as_ref()
                .and_then(|q| q.sent_at(ticket));
            return match at {
                Some(at) if at + ctx.options.validity() > ctx.clock.now() => {
                    won(claim, attempt, at, epoch)
                }
                _ => take_up(claim, attempt, epoch).await,
            };
        }
        let sent = ctx.clock.now();
        let seen = if std::mem::take(&mut attempt.waiting.woken) {
            // The first look, or woken by a notification (most often a
            // release): look and take a released or never-held name, or
            // one handed over to this candidate (ADR 0112), in one
            // statement (ADR 0045, ADR 0065).
            attempt.may_hold = true;
            match ctx
                .take_released(name, attempt.nonce, claim.identity().as_str())
                .await
            {
                Ok((_, Some(epoch))) => return won(claim, attempt, sent, epoch),
                Ok((seen, None)) if seen.ours => {
                    // Passed to this attempt by a release whose notification
                    // it did not hear (ADR 0120).
                    let epoch = seen.lease.as_ref().map_or(0, |r| r.epoch);
                    return take_up(claim, attempt, epoch).await;
                }
                Ok((seen, None)) if seen.was_takeable() => {
                    // The statement's snapshot showed the name released
                    // (or never held) and its take still won nothing: a
                    // concurrent winner changed the row after the snapshot
                    // (the take locks and checks the row again). A claim
                    // on what the snapshot showed would fail the same way,
                    // so none is sent; the winner's notification (or the
                    // poll) brings the next look (ADR 0093), once the
                    // winner's start is past (ADR 0096).
                    attempt.may_hold = false;
                    attempt.observed = None;
                    attempt.waiting.lost_race = Some(tokio::time::Instant::now());
                    return Ok(None);
                }
                Ok((seen, None)) => {
                    attempt.may_hold = false;
                    seen
                }
                // Maybe sent, and may have won: the campaign closes the
                // attempt, which releases it in the background (a server
                // down or no connection in time is Unavailable with the
                // cause, which a waiting campaign rides out and reports).
                Err(e) => return Err(claim.core(e)),
            }
        } else {
            // A waiter behind the head of the line while a term holds the
            // name, as its row's last renewal said (ADR 0121): no look.
            // Thirty waiters' looks at every poll were 120 statements a
            // second beside a handover.
            let fresh = 2 * ctx.options.renew_interval();
            if let Some(q) = &attempt.waiting.queue
                && q.at_rest(ctx.clock.now(), fresh)
            {
                return Ok(None);
            }
            // A server down is Unavailable with the cause: a waiting
            // campaign reports it and tries again after a backoff; a single
            // try returns it (never "held by another").
            let seen = ctx.read_one(name).await.map_err(|e| claim.core(e))?;
            // A queued attempt's look after a poll (ADR 0108): a free name
            // is the head's to take, woken by the release. Only the same
            // vacancy on two such looks in a row (the head did not claim
            // within a poll interval: dead, paused, cut off) is claimed.
            if attempt.waiting.queue.is_some()
                && matches!(seen.found(), Found::Vacant | Found::Fresh)
            {
                let vacancy = Some(seen.lease.as_ref().map(|r| r.version));
                if std::mem::replace(&mut attempt.waiting.backstop, vacancy) != vacancy {
                    return Ok(None);
                }
            }
            seen
        };
        attempt.waiting.backstop = None;
        let found = seen.found();
        if !row::may_claim_as(
            &mut attempt.observed,
            &found,
            ctx.options.ttl(),
            ctx.clock.now(),
            claim.identity().as_str(),
        ) {
            return Ok(None);
        }
        let take = Take::new(name, attempt.nonce, &seen).map_err(|e| claim.core(e))?;
        attempt.may_hold = true;
        let claimed = ctx
            .claim_many(&[take], claim.identity().as_str())
            .await
            .map_err(|e| claim.core(e))?;
        let Some(&(_, epoch)) = claimed.first() else {
            // The statement committed and won nothing: the row changed
            // since it was read.
            attempt.may_hold = false;
            attempt.observed = None;
            return Ok(None);
        };
        won(claim, attempt, sent, epoch)
    }

    /// Waits until a release wakes this attempt at the head of the
    /// waiters' queue (or, not queued, for a notification about this name),
    /// at most `poll` (see [`PostgresClaim`]).
    async fn wait(
        claim: &PostgresClaim,
        attempt: &mut Attempt,
        poll: Duration,
    ) -> Result<(), election_core::Error> {
        let ctx = claim.store();
        let name = claim.name().as_str();
        // Subscribed before the listener starts (see `pause_if_unused`).
        let wakes = attempt
            .waiting
            .wakes
            .get_or_insert_with(|| ctx.notifier.subscribe());
        // Listens on this process's channel before the row is written (one
        // queue of the session: in this order), so no release that finds
        // the row is missed.
        ctx.session.listen(ctx.session.wake_channel.clone());
        if attempt.waiting.queue.is_none() {
            let identity = claim.identity().as_str();
            match Queued::join(ctx, name, (attempt.nonce, identity)).await {
                Ok((queued, held)) => {
                    attempt.waiting.queue = Some(queued);
                    if !held {
                        // Released before this attempt was in line: no
                        // release will wake it for that vacancy. Look now,
                        // as a woken head does.
                        attempt.waiting.woken = true;
                        ctx.ready_soon();
                        return Ok(());
                    }
                }
                // Not queued: this wait is woken by every release of the
                // name, as before the queue; the next wait tries again.
                Err(e) => {
                    tracing::debug!(name = %name, error = %e, "not in the waiters' queue; woken by every release");
                    ctx.notifier.start();
                }
            }
        }
        ctx.ready_soon();
        let lost_race = attempt.waiting.lost_race.take();
        // A handover to another candidate seen (ADR 0112): awake when its
        // window ends, at the latest.
        let poll = match attempt.observed.as_ref().and_then(|o| o.handover_ends()) {
            Some(ends) => poll.min(ends.saturating_duration_since(ctx.clock.now())),
            None => poll,
        };
        let deadline = tokio::time::Instant::now() + poll;
        let woken = match &attempt.waiting.queue {
            Some(q) => {
                let woken = notify::woken_as(wakes, &ctx.session.wake_channel, attempt.nonce, name);
                match tokio::time::timeout_at(deadline, woken).await {
                    Ok(notify::HeadWake::Passed { epoch, ticket }) => {
                        attempt.waiting.passed = Some((epoch, ticket));
                        true
                    }
                    Ok(notify::HeadWake::Look) => true,
                    // A renewal of the row found the name held by this
                    // attempt: a pass it did not hear (ADR 0120). The
                    // look takes it up.
                    Err(_) => q.holds(),
                }
            }
            None => {
                let woken = notify::woken(wakes, |n| n == name);
                tokio::time::timeout_at(deadline, woken).await.is_ok()
            }
        };
        if woken && let Some(lost) = lost_race {
            // Most often the winner's own notification, sent as it starts
            // its term: look once that start is past (ADR 0096).
            tokio::time::sleep_until((lost + LOST_RACE_PAUSE).min(deadline)).await;
        }
        attempt.waiting.woken = woken;
        Ok(())
    }

    /// Readies the pool for the term's release in the background if no wait
    /// did (ADR 0065), and lets the listener close (ADR 0071).
    fn on_watch(&self, attempt: &mut Attempt) {
        self.ready_soon();
        // A term waits for nothing: with no one else of this process
        // subscribed, its listener closes during the term, neither at the
        // handover that ends it (ADR 0071) nor on its own start's path
        // (after `UNUSED_GRACE`, ADR 0094).
        attempt.waiting.wakes = None;
        // Out of the queue: its row is deleted in the background (a
        // release's head is never the releasing attempt's own row anyway).
        if let Some(queue) = attempt.waiting.queue.take() {
            queue.won();
        }
        self.notifier.pause_if_unused();
    }

    async fn proclaim(&self, hold: HeldRow<'_>, value: &str) -> Result<bool, Error> {
        PostgresStore::proclaim(self, hold, value).await
    }

    /// Releases the row and notifies waiters, in one statement.
    async fn release(&self, name: &str, nonce: i64) -> Result<bool, Error> {
        let released = self.release_many(&[(name, nonce)]).await?;
        Ok(released.contains(name))
    }

    /// Hands the row over and notifies every waiter of the name, in one
    /// statement (ADR 0112).
    async fn release_to(
        &self,
        hold: HeldRow<'_>,
        holder: &str,
        window_ms: i64,
    ) -> Result<bool, Error> {
        PostgresStore::release_to(self, hold, holder, window_ms).await
    }

    fn release_later(self: &Arc<Self>, name: &ElectionName, attempt: Attempt) {
        self.release_in_background(vec![(name.as_str().to_owned(), attempt.nonce)]);
    }

    async fn leader(&self, name: &ElectionName) -> Result<Option<Leader>, election_core::Error> {
        self.read_leader(name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A waiter rests at a poll only behind another row, while a term
        /// holds the name, on a write that landed less than `fresh` ago,
        /// and never once a renewal found the name held by it; a pass
        /// names a ticket whose send instant is remembered while it is
        /// among the last [`TICKETS_KEPT`] writes.
        #[test]
        fn a_waiter_rests_only_behind_a_held_name(
            writes in proptest::collection::vec((0u64..5_000, proptest::option::of((any::<bool>(), 0i64..3))), 1..20),
            later_ms in 0u64..5_000,
            fresh_ms in 1u64..3_000,
        ) {
            let t0 = tokio::time::Instant::now();
            let mut tickets = Tickets::default();
            let mut at = t0;
            let mut all = Vec::new();
            for (gap, answer) in &writes {
                at += Duration::from_millis(*gap);
                let ticket = tickets.next(at);
                all.push((ticket, at));
                tickets.answered(ticket, *answer);
            }
            let now = at + Duration::from_millis(later_ms);
            let fresh = Duration::from_millis(fresh_ms);
            let holds = writes.iter().any(|(_, a)| a.is_none());
            let last = writes.iter().rev().find_map(|(_, a)| *a);
            let expected = !holds
                && last.is_some_and(|(held, ahead)| held && ahead > 0)
                && now < at_of_last_landed(&writes, t0) + fresh;
            prop_assert_eq!(tickets.at_rest(now, fresh), expected);
            for (i, (ticket, sent)) in all.iter().enumerate() {
                let kept = all.len() - i <= TICKETS_KEPT;
                prop_assert_eq!(tickets.sent_at(*ticket), kept.then_some(*sent));
            }
        }
    }

    /// The send instant of the last write that found the line (`Some`).
    fn at_of_last_landed(
        writes: &[(u64, Option<(bool, i64)>)],
        t0: tokio::time::Instant,
    ) -> tokio::time::Instant {
        let mut at = t0;
        let mut landed = t0;
        for (gap, answer) in writes {
            at += Duration::from_millis(*gap);
            if answer.is_some() {
                landed = at;
            }
        }
        landed
    }
}
