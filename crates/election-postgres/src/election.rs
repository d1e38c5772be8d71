//! [`PostgresElection`]: elections in one PostgreSQL database, and the
//! [`PostgresClaim`] of one candidate.

use std::sync::Arc;
use std::time::Duration;

use election_core::{
    Candidate, Claim, ConfigError, ElectionName, End, Identity, Leader, TermReporter, WatchGuard,
    Won,
};
use futures::Stream;
use sqlx::PgPool;
use tokio::sync::broadcast;

use crate::Clock;
use crate::context::Context;
use crate::error::Error;
use crate::notify::{self, Wake};
use crate::options::PostgresOptions;
use crate::row::{self, Hold, Observed, Take};

/// Elections among the processes that share one PostgreSQL database,
/// usually the application's own.
///
/// ```no_run
/// use election_postgres::{PostgresElection, PostgresOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let election = PostgresElection::connect("postgres://app@db.internal/app", PostgresOptions::default()).await?;
/// let term = election.candidate("billing", "worker-1")?.campaign().await?;
/// println!("leading in term {}", term.epoch());
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PostgresElection {
    pub(crate) inner: Arc<Context>,
}

impl PostgresElection {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally
    /// `?schema=<name>`, which must agree with a schema set in `options`;
    /// sqlx reads a missing password from `PGPASSWORD` or the `~/.pgpass`
    /// file, so it need never be on a command line) with a pool of its own (at most 8
    /// connections, plus one for notifications once something waits),
    /// checks that the session commits durably and creates or migrates the
    /// election schema ([`schema`](crate::schema)).
    ///
    /// Cancel safety: cancel safe; nothing is held if dropped (a migration
    /// in flight commits whole or not at all).
    ///
    /// Failure model: a URL that does not parse, a refused password, a
    /// missing database or a missing privilege is [`Error::Unusable`]; a
    /// bad or conflicting `schema` parameter [`Error::Config`];
    /// `synchronous_commit = off` is [`Error::UnsafeSetting`]; a schema
    /// written by a newer version [`Error::SchemaTooNew`]; a server that
    /// cannot be reached [`Error::Unavailable`] at once, with the cause as
    /// its source (connection refused, unknown host: one connection is
    /// opened directly first, so the pool's silent retries never hide it),
    /// or [`Error::TimedOut`] for a server that answers too slowly (after
    /// 10 s or four request timeouts, whichever is longer). Opening is one
    /// attempt: to wait for a server that is down at start, retry while
    /// [`Error::is_unavailable`] (with a backoff, e.g.
    /// [`election_core::retry_pause`]); once open, a campaign rides out a
    /// server that goes down by itself, counting its tries
    /// ([`Candidate::retries`](election_core::Candidate::retries)).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::default().with_schema("billing_election")?;
    /// let election = PostgresElection::connect("postgres://app@db.internal/app", options).await?;
    /// println!("{:?}", election.leader("billing").await?);
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, Error> {
        Ok(Self::of(Context::connect(url, options).await?))
    }

    /// Uses the application's own pool (its sessions must not turn
    /// `synchronous_commit` off: checked on one session here; see ADR
    /// 0033). Creates or migrates the election schema; the application's
    /// own tables are never touched. Notifications use a connection of
    /// their own, with the pool's connect options, not one of the pool's.
    ///
    /// Cancel safety and failure model as [`connect`](Self::connect).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = sqlx::PgPool::connect("postgres://app@db.internal/app").await?;
    /// let election = PostgresElection::with_pool(pool, PostgresOptions::default()).await?;
    /// println!("{:?}", election.leader("billing").await?);
    /// # Ok(()) }
    /// ```
    pub async fn with_pool(pool: PgPool, options: PostgresOptions) -> Result<Self, Error> {
        Ok(Self::of(Context::with_pool(pool, options).await?))
    }

    /// Uses `clock` instead of the system's clocks (for tests).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    ///
    /// use election_postgres::{Clock, PostgresElection, PostgresOptions, SystemClock};
    ///
    /// /// The system's clocks, with a wall clock a day ahead (display only).
    /// #[derive(Debug)]
    /// struct WallClockAhead;
    ///
    /// impl Clock for WallClockAhead {
    ///     fn now(&self) -> tokio::time::Instant {
    ///         SystemClock.now()
    ///     }
    ///     fn wall_unix_ms(&self) -> i64 {
    ///         SystemClock.wall_unix_ms() + 24 * 3600 * 1000
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let election = election.with_clock(Arc::new(WallClockAhead));
    /// // Leases count on the monotonic `now`: who leads does not change.
    /// let term = election.candidate("ledger-writer", "host-a/1")?.campaign().await?;
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self::of(self.inner.with_clock(clock))
    }

    fn of(context: Context) -> Self {
        PostgresElection {
            inner: Arc::new(context),
        }
    }

    /// The pool, for the application's own queries and for
    /// [`PostgresFence`](crate::PostgresFence).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let (orders,): (i64,) = sqlx::query_as("SELECT count(*) FROM orders")
    ///     .fetch_one(election.pool())
    ///     .await?;
    /// println!("{orders} orders");
    /// # Ok(()) }
    /// ```
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The settings.
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::default().with_schema("billing_election")?;
    /// let election = PostgresElection::connect("postgres://app@db.internal/app", options).await?;
    /// assert_eq!(election.options().schema(), "billing_election");
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &PostgresOptions {
        &self.inner.options
    }
}

impl PostgresElection {
    /// The claim of candidate `identity` in election `name` (no I/O).
    ///
    /// Failure model: [`Error::Config`] for an invalid name or identity.
    ///
    /// ```no_run
    /// use election_core::{Candidate, Claim};
    /// use election_postgres::{Error, PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let claim = election.claim("ledger-writer", "host-a/1")?;
    /// if let Some(leader) = claim.leader().await? {
    ///     println!("{} leads; waiting", leader.identity);
    /// }
    /// let term = Candidate::new(claim).campaign().await?; // what `candidate` does
    /// term.resign().await?;
    ///
    /// assert!(matches!(election.claim("ledger-writer", ""), Err(Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, name: &str, identity: &str) -> Result<PostgresClaim, Error> {
        Ok(PostgresClaim {
            inner: self.inner.clone(),
            name: ElectionName::new(name)?,
            identity: Identity::new(identity)?,
        })
    }

    /// A [`Candidate`] for [`claim`](PostgresElection::claim).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let candidate = election.candidate("ledger-writer", "host-a/1")?;
    /// match candidate.campaign_timeout(Duration::from_secs(30)).await? {
    ///     Some(term) => {
    ///         println!("leading in term {}", term.epoch());
    ///         term.resign().await?;
    ///     }
    ///     None => println!("another candidate still leads after 30 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<PostgresClaim>, Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// Who leads election `name` now (the holder its lease row names), or
    /// `None`. A holder that died still shows until a contender takes its
    /// lease over (one TTL after its last renewal).
    ///
    /// Cancel safety: cancel safe (one read). Failure model:
    /// [`election_core::Error::Config`] for an invalid name,
    /// `Unavailable` when the server cannot answer within the request
    /// timeout, `Corrupt` for a damaged row.
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// if let Some(leader) = election.leader("billing").await? {
    ///     println!("{} leads in term {}", leader.identity, leader.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        let name = ElectionName::new(name)?;
        read_leader(&self.inner, &name).await
    }
}

impl PostgresElection {
    /// Every change of leadership of election `name`: the current holder
    /// first, then each new term (`Some`) or vacancy (`None`), repeats of
    /// one term left out.
    ///
    /// Woken by the notification every win and release sends (the first
    /// call starts this process's listener), and reads the row at least
    /// every `every` as a backstop. What it may miss: a term that began
    /// and ended between two reads; a lease that ran out is not a change
    /// (nobody writes then) until a contender takes it over.
    ///
    /// Cancel safety: dropping the stream stops it. Failure model:
    /// `Config` for an invalid name or an `every` outside 1 ms..=1 h; a
    /// failed read is one `Err` item (`Unavailable`, `Corrupt`) and the
    /// stream goes on.
    ///
    /// ```no_run
    /// use futures::StreamExt;
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// let changes = election.observe("billing", std::time::Duration::from_secs(5)).await?;
    /// let mut changes = std::pin::pin!(changes);
    /// while let Some(change) = changes.next().await {
    ///     match change? {
    ///         Some(leader) => println!("{} leads in term {}", leader.identity, leader.epoch),
    ///         None => println!("nobody leads"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn observe(
        &self,
        name: &str,
        every: Duration,
    ) -> Result<
        impl Stream<Item = Result<Option<Leader>, election_core::Error>> + Send + 'static,
        election_core::Error,
    > {
        let name = ElectionName::new(name)?;
        if every < Duration::from_millis(1) || every > Duration::from_secs(3600) {
            return Err(ConfigError::BadSetting {
                setting: "every",
                reason: format!("{every:?} is not between 1ms and 1h"),
            }
            .into());
        }
        let ctx = self.inner.clone();
        ctx.notifier.start();
        let wakes = ctx.notifier.subscribe();
        let state = (ctx, name, wakes, None::<Option<Leader>>, true);
        Ok(futures::stream::unfold(
            state,
            move |(ctx, name, mut wakes, mut last, first)| async move {
                let mut first = first;
                loop {
                    if !first {
                        let n = name.as_str();
                        let _ = tokio::time::timeout(every, notify::woken(&mut wakes, |x| x == n))
                            .await;
                    }
                    first = false;
                    match read_leader(&ctx, &name).await {
                        Err(e) => return Some((Err(e), (ctx, name, wakes, last, false))),
                        Ok(now) => {
                            let term = |l: &Option<Leader>| {
                                l.as_ref().map(|l| (l.identity.clone(), l.epoch))
                            };
                            if last.as_ref().is_none_or(|l| term(l) != term(&now)) {
                                last = Some(now.clone());
                                return Some((Ok(now), (ctx, name, wakes, last, false)));
                            }
                        }
                    }
                }
            },
        ))
    }

    /// Stops this election's notification listener and, for a pool this
    /// crate opened ([`connect`](Self::connect)), closes the pool. A pool
    /// given to [`with_pool`](Self::with_pool) stays open. Resign terms and
    /// close lease sets first: a term still held afterwards cannot renew
    /// and is lost when its validity runs out (its lease then ages out).
    ///
    /// Cancel safety: cancel safe; the listener is stopped at once, the
    /// pool closes in the background if dropped. Failure model: none.
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// let term = election.candidate("billing", "a")?.campaign().await?;
    /// term.resign().await?;
    /// election.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        self.inner.notifier.stop();
        if self.inner.owns_pool {
            self.inner.pool.close().await;
        }
    }
}

/// The holder the row of `name` names, or `None`.
async fn read_leader(
    ctx: &Context,
    name: &ElectionName,
) -> Result<Option<Leader>, election_core::Error> {
    let seen = ctx
        .read_one(name.as_str())
        .await
        .map_err(|e| e.into_core(name))?;
    match seen.lease {
        Some(row) => row.leader().map_err(|e| Error::from(e).into_core(name)),
        None => Ok(None),
    }
}

/// The claim of one candidate in a [`PostgresElection`].
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
///   After a notification about the name woke the attempt (most often a
///   release), it looks and takes a released row in one statement instead
///   (ADR 0045): the read comes back with the epoch won, if any, and a
///   row that is still held is only read. That statement is a write: if it
///   fails after it was sent, its outcome is unknown as above.
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
    inner: Arc<Context>,
    name: ElectionName,
    identity: Identity,
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
    /// Whether a notification about this name (or a missed one) woke the
    /// last wait: the next look also takes the row if it is released.
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

    async fn open(&self) -> Result<PostgresAttempt, election_core::Error> {
        Ok(PostgresAttempt {
            nonce: election_core::attempt_nonce() as i64,
            observed: None,
            may_hold: false,
            epoch: None,
            wakes: None,
            woken: false,
        })
    }

    /// One read, then (when the name may be taken) one claim statement;
    /// after a wake-up by notification, one statement that reads and
    /// takes a released row; see [`PostgresClaim`]. A name whose next epoch would be above
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
            // Woken by a notification (most often a release): look and
            // take a released row in one statement (ADR 0045).
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
    /// The first wait of a process starts its listener.
    ///
    /// Cancel safety: cancel safe.
    async fn wait(
        &self,
        attempt: &mut PostgresAttempt,
        poll_interval: std::time::Duration,
    ) -> Result<(), election_core::Error> {
        let ctx = &self.inner;
        ctx.notifier.start();
        let wakes = attempt
            .wakes
            .get_or_insert_with(|| ctx.notifier.subscribe());
        let name = self.name.as_str();
        attempt.woken = tokio::time::timeout(poll_interval, notify::woken(wakes, |n| n == name))
            .await
            .is_ok();
        Ok(())
    }

    /// Starts the renewal task (see [`PostgresClaim`]).
    fn watch(
        &self,
        attempt: &mut PostgresAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        let valid_until = won.valid_until.ok_or_else(|| self.not_held())?;
        let (rows, term) = (self.inner.clone(), (attempt.nonce, won.epoch));
        let renewal =
            election_sql::renew_term(rows, self.name.clone(), term, valid_until, reporter);
        Ok(WatchGuard::task(tokio::spawn(renewal)))
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
        let Some(epoch) = attempt.epoch else {
            return Err(self.not_held());
        };
        let hold = Hold {
            name: self.name.as_str(),
            nonce: attempt.nonce,
            epoch,
        };
        match self.inner.confirm(hold).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.not_held()),
            Err(e) => Err(self.core(e)),
        }
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
    /// the winner's wall clock (its [`Clock`]) when it won the term.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        read_leader(&self.inner, &self.name).await
    }
}
