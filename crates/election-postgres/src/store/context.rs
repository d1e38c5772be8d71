//! The base of the store layer: the connection context (pool,
//! schema and its statements, clock, options, the notification listener)
//! and the bounded requests every layer above uses. The façade
//! ([`PostgresElection`](crate::PostgresElection)), the renewal task and
//! the lease set's steps are built on it; it imports none of them.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use election_core::{ElectionName, Leader};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::time::Instant;

use crate::error::Error;
use crate::options::PostgresOptions;
use crate::store::acquire::{acquire, acquire_probing};
use crate::store::close::LastRelease;
use crate::store::notify::Notifier;
use crate::store::row::{self, HeldRow, Seen, Take};
use crate::store::schema::{self, Sql};
use crate::store::session::{Lent, Priority, Session, StatementTimeout, session_for};
use crate::{Clock, SystemClock};

/// The least time an open (connect, check, migrate) may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the first connection of an open may take before the server's
/// address is probed with a bare connect (a refused connection, which
/// sqlx's pool retries silently, is then said at once). A probe costs the
/// server a process, so a quick open makes none.
const PROBE_AFTER: Duration = Duration::from_millis(20);

/// How many connections a pool this crate opens itself may use.
const OWN_POOL_CONNECTIONS: u32 = 8;

/// Where a request runs: on the process's session with the server (ADR
/// 0105), in one of its queues, or on the session's one side connection
/// (a lease set's reads and claims and the background releases, whose
/// statements may run long: they never hold up the session's renewals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    Session(Priority),
    Pool,
}

/// Reads and claims on the session.
const SESSION: Via = Via::Session(Priority::Normal);
/// Renewals, checks, proclaims and releases on the session.
const URGENT: Via = Via::Session(Priority::Urgent);

/// A connection a request runs on.
enum Conn {
    /// The side connection, and its `statement_timeout`.
    Pool(PoolConnection<Postgres>, Arc<StatementTimeout>),
    Session(Lent),
}

impl Conn {
    /// The connection, on which the server ends a statement that takes
    /// longer than `statement_timeout` (ADR 0105): one that times out on
    /// the client never holds up the connection's next request longer.
    async fn get(&mut self, statement_timeout: Duration) -> Result<&mut PgConnection, Error> {
        match self {
            Conn::Pool(c, timeout) => {
                timeout.apply(c, statement_timeout).await?;
                Ok(&mut **c)
            }
            Conn::Session(lent) => lent.conn(statement_timeout).await,
        }
    }

    /// The connection was found gone: closed, and replaced.
    fn gone(&mut self) {
        match self {
            Conn::Pool(c, _) => c.close_on_drop(),
            Conn::Session(lent) => lent.broken(),
        }
    }
}

/// Whether `e` says the server ended the statement: its
/// `statement_timeout` (the request's bound) passed, or it was cancelled
/// (SQLSTATE 57014). A write ended so counts as timed out: its outcome is
/// unknown.
fn statement_ended(e: &Error) -> bool {
    matches!(e, Error::Unavailable(sqlx::Error::Database(d)) if d.code().as_deref() == Some("57014"))
}

/// Whether `e` says the connection itself is gone: the socket failed, or
/// the server ended the session (SQLSTATE class 08, or 57P: terminated by
/// an administrator, shut down, restarting).
fn connection_gone(e: &Error) -> bool {
    match e {
        Error::Unavailable(sqlx::Error::Io(_) | sqlx::Error::Protocol(_)) => true,
        Error::Unavailable(sqlx::Error::Database(d)) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    }
}

/// Everything a claim, a renewal or a lease set's step needs of one
/// database. Opaque: a [`PostgresElection`](crate::PostgresElection) holds
/// one, and the shared SQL layer's generic types run over it
/// ([`PostgresClaim`](crate::PostgresClaim) is `SqlClaim<PostgresStore>`,
/// ADR 0081) through the traits it implements with PostgreSQL's
/// statements.
#[derive(Debug)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    /// Whether this crate opened the pool (and closes it on `close`).
    pub(crate) owns_pool: bool,
    pub(crate) options: PostgresOptions,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) sql: Arc<Sql>,
    pub(crate) notifier: Arc<Notifier>,
    /// The process's session with the server (ADR 0105): the election
    /// statements and the `LISTEN` of every election of this process
    /// opened with the same connect options.
    pub(crate) session: Arc<Session>,
    /// Held by every copy of this election, not by a readying task: a
    /// readying finds the election gone when only its weak reference is
    /// left (ADR 0075).
    alive: Arc<()>,
    /// Whether this election was closed (its session let go once).
    closed: Arc<AtomicBool>,
    /// When this process's last release on the session was answered: a
    /// close waits the grace after it (ADR 0086).
    pub(crate) last_release: Arc<LastRelease>,
}

/// Takes a `schema=<name>` query parameter out of `url` (sqlx does not know
/// it) into the options: a checked name, which must agree with a schema
/// set in `options` other than the default.
pub(crate) fn schema_from_url(
    url: &str,
    options: PostgresOptions,
) -> Result<(String, PostgresOptions), Error> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), options));
    };
    let mut rest = Vec::new();
    let mut schema = None;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("schema", value)) => schema = Some(value),
            _ => rest.push(pair),
        }
    }
    let Some(schema) = schema else {
        return Ok((url.to_owned(), options));
    };
    let from_url = options.clone().with_schema(schema)?;
    if options.schema() != crate::options::DEFAULT_SCHEMA && options.schema() != schema {
        return Err(election_core::ConfigError::BadSetting {
            setting: "schema",
            reason: format!(
                "the URL names schema {schema:?}, the options {:?}",
                options.schema()
            ),
        }
        .into());
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, from_url))
}

impl PostgresStore {
    /// Connects to `url` with a pool of its own; see
    /// [`PostgresElection::connect`](crate::PostgresElection::connect).
    ///
    /// The election statements run on the process's session with the
    /// server (ADR 0105): the open connects it, if no election of this
    /// process with the same connect options did, and checks the session
    /// and the schema in one round trip on it (ADR 0065). The pool is lazy
    /// (no connection until something uses it: the application's queries,
    /// a fence, a lease set's claims).
    pub(crate) async fn connect(url: &str, options: PostgresOptions) -> Result<Self, Error> {
        let (url, options) = schema_from_url(url, options)?;
        let mut connect = PgConnectOptions::from_str(&url).map_err(|e| Error::Unusable {
            reason: "the URL is not a valid postgres:// URL".into(),
            source: e,
        })?;
        // The URL's own `application_name` is kept (it tells one process's
        // sessions apart in `pg_stat_activity`, and keys the session).
        if connect.get_application_name().is_none() {
            connect = connect.application_name("election-postgres");
        }
        let pool = PgPoolOptions::new()
            .max_connections(OWN_POOL_CONNECTIONS)
            // Nothing kept open: the election's own statements run on the
            // session (ADR 0105).
            .min_connections(0)
            // No ping before each acquire (a round trip on every request):
            // a connection the server ended answers its first request with
            // an error, a read is then retried on another connection, and
            // sqlx's ping when a connection comes back drops it (ADR 0065).
            .test_before_acquire(false)
            // Every request is bounded by the request timeout itself; the
            // pool's own bound only covers opening.
            .acquire_timeout(OPEN_TIMEOUT)
            .connect_lazy_with(connect);
        let credential = hash_of(url_password(&url));
        let mut ctx = Self::open(pool, options, false, credential).await?;
        ctx.owns_pool = true;
        Ok(ctx)
    }

    /// Uses the application's pool: checks that its sessions commit
    /// durably and migrates the election schema; the election statements
    /// run on the process's session with the pool's connect options.
    pub(crate) async fn with_pool(pool: PgPool, options: PostgresOptions) -> Result<Self, Error> {
        // The pool's own options (its password with them): every clone of
        // one pool shares them, and so one session.
        let credential = hash_of(std::sync::Arc::as_ptr(&pool.connect_options()));
        Self::open(pool, options, true, credential).await
    }

    /// Checks the session's settings and the election schema on the
    /// process's session, migrating the schema when it is missing or
    /// older; with `check_pool`, also that a session of `pool` commits
    /// durably (the application's pool, which fences use).
    async fn open(
        pool: PgPool,
        options: PostgresOptions,
        check_pool: bool,
        credential: u64,
    ) -> Result<Self, Error> {
        let bound = OPEN_TIMEOUT.max(options.request_timeout() * 4);
        let session = session_for(&pool.connect_options(), credential);
        let unsafe_sync = |sync: String| {
            tracing::error!(
                "refusing a session with synchronous_commit = off: a claim acknowledged but lost in a crash could hand the same epoch out twice"
            );
            Error::UnsafeSetting {
                setting: "synchronous_commit",
                value: sync,
            }
        };
        let opened = async {
            // A server that is down or unknown, or refuses the credentials,
            // is said at once, with the cause (a refused connection by the
            // probe after PROBE_AFTER).
            let mut lent = session.lend(Priority::Normal, bound, PROBE_AFTER).await?;
            // The open's bound, not a request's: the migration waits for
            // another process's (an advisory lock), and the check for a
            // migration that another process runs.
            let conn = lent.conn(bound).await?;
            let (sync, version) = schema::session_and_version(conn, options.schema()).await?;
            if sync == "off" {
                return Err(unsafe_sync(sync));
            }
            match version {
                Some(v) if v > schema::SCHEMA_VERSION => return Err(schema::too_new(v)),
                Some(v) if v == schema::SCHEMA_VERSION => {}
                _ => schema::migrate(conn, options.schema()).await?,
            }
            drop(lent);
            if check_pool {
                let mut conn = acquire_probing(&pool, bound, PROBE_AFTER).await?;
                let (sync, _) = schema::session_and_version(&mut conn, options.schema()).await?;
                if sync == "off" {
                    return Err(unsafe_sync(sync));
                }
            }
            Ok(())
        };
        let opened = match tokio::time::timeout(bound, opened).await {
            Ok(r) => r,
            Err(_) => Err(Error::TimedOut { after: bound }),
        };
        if let Err(e) = opened {
            session.closed_by_one().await;
            return Err(e);
        }
        let sql = Arc::new(Sql::new(options.schema()));
        let notifier = Arc::new(Notifier::new(session.clone(), sql.channel.clone()));
        Ok(PostgresStore {
            pool,
            owns_pool: false,
            options,
            clock: Arc::new(SystemClock),
            sql,
            notifier,
            last_release: session.last_release.clone(),
            session,
            alive: Arc::new(()),
            closed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The same database with `clock` instead.
    pub(crate) fn with_clock(&self, clock: Arc<dyn Clock>) -> Self {
        PostgresStore {
            pool: self.pool.clone(),
            owns_pool: self.owns_pool,
            options: self.options.clone(),
            clock,
            sql: self.sql.clone(),
            notifier: self.notifier.clone(),
            session: self.session.clone(),
            alive: self.alive.clone(),
            closed: self.closed.clone(),
            last_release: self.last_release.clone(),
        }
    }

    /// Lets the session go (once per election, whichever copy closes):
    /// the last election of the process on it closes its connection.
    pub(crate) async fn close_session(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.session.closed_by_one().await;
        }
    }

    /// Readies the session's connection for a handover in the background,
    /// once per connection (again after it was replaced): the statements
    /// prepared and their generic plans kept ([`row::ready`], ADR 0040,
    /// ADR 0075), as one request of the session. Called by the first wait,
    /// and by a win: off the path of a first claim, on the path of
    /// nothing. Without a runtime it does nothing (the statements are
    /// prepared at their first use).
    pub(crate) fn ready_soon(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let schema: Arc<str> = self.options.schema().into();
        if !self.session.needs_readying(&schema) {
            return;
        }
        let (session, sql) = (self.session.clone(), self.sql.clone());
        let bound = self.options.request_timeout().max(OPEN_TIMEOUT);
        // Each of its statements is short (no row it touches is anyone
        // else's): bounded as the requests' are, so that the setting is
        // not changed for it and back.
        let statement_timeout = self.options.request_timeout();
        // Held by every copy of this election, not by the task: gone once
        // the election is dropped (ADR 0075).
        let alive = Arc::downgrade(&self.alive);
        rt.spawn(async move {
            let readied = async {
                let mut lent = session.lend(Priority::Normal, bound, bound / 2).await?;
                let conn = lent.conn(statement_timeout).await?;
                row::ready(conn, &sql, &move || alive.strong_count() > 0).await
            };
            match tokio::time::timeout(bound, readied).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "session not readied for a handover"),
                Err(_) => tracing::debug!("session not readied for a handover in time"),
            }
        });
    }

    /// A connection for a request `via` within `bound`, and what is left
    /// of the bound (see [`acquire`] and [`Session::lend`]).
    async fn conn_within(&self, via: Via, bound: Duration) -> Result<(Conn, Duration), Error> {
        let started = Instant::now();
        let conn = match via {
            Via::Pool => Conn::Pool(
                acquire(&self.session.side, bound).await?,
                self.session.side_timeout.clone(),
            ),
            Via::Session(priority) => {
                Conn::Session(self.session.lend(priority, bound, bound / 2).await?)
            }
        };
        Ok((conn, bound.saturating_sub(started.elapsed())))
    }

    /// A read, given at most `bound` in all (the wait for a connection
    /// included): one that does not answer is [`Error::TimedOut`] (nothing
    /// was written); no connection in time is [`Error::Unavailable`] with
    /// the cause. A connection found gone is closed (see
    /// [`PostgresStore::read_many`], which tries again on another).
    async fn read_within<T>(
        &self,
        via: Via,
        bound: Duration,
        request: impl AsyncFnOnce(&mut PgConnection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let (mut conn, left) = self.conn_within(via, bound).await?;
        let statement_timeout = self.options.request_timeout();
        let run = async {
            let c = conn.get(statement_timeout).await?;
            request(c).await
        };
        match tokio::time::timeout(left, run).await {
            Ok(Err(e)) if statement_ended(&e) => Err(Error::TimedOut { after: bound }),
            Ok(Err(e)) => {
                if connection_gone(&e) {
                    conn.gone();
                }
                Err(e)
            }
            Ok(r) => r,
            Err(_) => {
                if let Conn::Pool(c, _) = &mut conn {
                    c.close_on_drop();
                }
                Err(Error::TimedOut { after: bound })
            }
        }
    }

    /// A write, given at most `bound` in all. The wait for a pool's
    /// connection is bounded by the request timeout too; the wait in the
    /// session's queue may take all of `bound` but the request timeout
    /// the statement keeps (each statement ahead in the queue is ended by
    /// the server at the request timeout, so a renewal queued behind
    /// several that wait for row locks still lands). A connection not had
    /// in time is [`Error::Unavailable`] with the cause (nothing was
    /// sent); a write
    /// sent that does not answer has an unknown outcome
    /// ([`Error::OutcomeUnknown`]). A write that finds its connection gone
    /// is never tried again (whether it ran cannot be told): its error is
    /// returned, as any failure after it was sent, and the connection is
    /// closed.
    ///
    /// The server ends the statement at the request timeout (its
    /// `statement_timeout`, ADR 0105), whatever `bound` is: a write waiting
    /// for a row lock (an application's fenced transaction, a claim's)
    /// holds the process's session no longer, and is [`Error::OutcomeUnknown`]
    /// too.
    pub(crate) async fn write<T>(
        &self,
        via: Via,
        bound: Duration,
        request: impl AsyncFnOnce(&mut PgConnection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let started = Instant::now();
        let statement_timeout = self.options.request_timeout();
        let wait = match via {
            Via::Pool => bound.min(statement_timeout),
            Via::Session(_) => bound
                .min(statement_timeout)
                .max(bound.saturating_sub(statement_timeout)),
        };
        let (mut conn, _) = self.conn_within(via, wait).await?;
        let left = bound.saturating_sub(started.elapsed());
        let run = async {
            let c = conn.get(statement_timeout).await?;
            request(c).await
        };
        match tokio::time::timeout(left, run).await {
            // Ended by the server at its bound: a timed-out write, never
            // counted as absent.
            Ok(Err(e)) if statement_ended(&e) => Err(Error::OutcomeUnknown { after: bound }),
            Ok(Err(e)) => {
                if connection_gone(&e) {
                    conn.gone();
                }
                Err(e)
            }
            Ok(r) => r,
            Err(_) => {
                // The statement may run on, until the server ends it at
                // the request timeout: the side connection is not waited
                // for (the next claim opens another); the session's
                // connection is kept, and reads the rest of the answer
                // (at most the rest of that bound) before its next
                // statement.
                if let Conn::Pool(c, _) = &mut conn {
                    c.close_on_drop();
                }
                Err(Error::OutcomeUnknown { after: bound })
            }
        }
    }

    /// Reads the rows and records of `names`, given at most the request
    /// timeout in all. A connection found gone (the server ended its
    /// session while it was idle: the pool hands connections out without
    /// a ping, ADR 0065) is closed and the read tried again on another,
    /// within the same bound.
    pub(crate) async fn read_many(&self, names: &[&str]) -> Result<HashMap<String, Seen>, Error> {
        self.read_many_via(SESSION, names).await
    }

    /// [`read_many`](Self::read_many) `via` the session or the pool.
    pub(crate) async fn read_many_via(
        &self,
        via: Via,
        names: &[&str],
    ) -> Result<HashMap<String, Seen>, Error> {
        let bound = self.options.request_timeout();
        // Each connection found gone is replaced: a second try is on a
        // new one.
        let most = 2;
        let deadline = Instant::now() + bound;
        let mut tries = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .read_within(via, left, async |conn| {
                    row::read_many(conn, &self.sql, names).await
                })
                .await
            {
                Err(e) if connection_gone(&e) => {
                    tries += 1;
                    if tries > most {
                        return Err(e);
                    }
                }
                Err(Error::TimedOut { .. }) => return Err(Error::TimedOut { after: bound }),
                r => return r,
            }
        }
    }

    /// One read on the session, bounded by the request timeout.
    pub(crate) async fn read_on_session<T>(
        &self,
        request: impl AsyncFnOnce(&mut PgConnection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.read_within(SESSION, self.options.request_timeout(), request)
            .await
    }

    /// Reads the row and record of `name` (bounded).
    pub(crate) async fn read_one(&self, name: &str) -> Result<Seen, Error> {
        Ok(self
            .read_many(&[name])
            .await?
            .remove(name)
            .unwrap_or_default())
    }

    /// The holder the row of `name` names, or `None`.
    pub(crate) async fn read_leader(
        &self,
        name: &ElectionName,
    ) -> Result<Option<Leader>, election_core::Error> {
        let seen = self
            .read_one(name.as_str())
            .await
            .map_err(|e| e.into_core(name))?;
        match seen.lease {
            Some(row) => row.leader().map_err(|e| Error::from(e).into_core(name)),
            None => Ok(None),
        }
    }

    /// The holders the rows of `names` name, in order: one statement.
    pub(crate) async fn read_leaders(
        &self,
        names: &[ElectionName],
    ) -> Result<Vec<Option<Leader>>, election_core::Error> {
        let Some(first) = names.first() else {
            return Ok(Vec::new());
        };
        let keys: Vec<&str> = names.iter().map(ElectionName::as_str).collect();
        let mut seen = self
            .read_many(&keys)
            .await
            .map_err(|e| e.into_core(first))?;
        names
            .iter()
            .map(
                |name| match seen.remove(name.as_str()).and_then(|s| s.lease) {
                    Some(row) => row.leader().map_err(|e| Error::from(e).into_core(name)),
                    None => Ok(None),
                },
            )
            .collect()
    }

    /// One claim statement over `takes` (bounded by the request timeout;
    /// unknown outcome past it).
    pub(crate) async fn claim_many(
        &self,
        takes: &[Take<'_>],
        identity: &str,
    ) -> Result<Vec<(String, i64)>, Error> {
        self.claim_many_via(SESSION, takes, identity).await
    }

    /// [`claim_many`](Self::claim_many) `via` the session or the pool.
    pub(crate) async fn claim_many_via(
        &self,
        via: Via,
        takes: &[Take<'_>],
        identity: &str,
    ) -> Result<Vec<(String, i64)>, Error> {
        let (ttl_ms, wall_ms) = (self.options.times.ttl_ms(), self.clock.wall_unix_ms());
        self.write(via, self.options.request_timeout(), async |conn| {
            row::claim_many(conn, &self.sql, takes, identity, ttl_ms, wall_ms).await
        })
        .await
    }

    /// Revokes the term the row of `name` shows (ADR 0111): reads it, and
    /// if a term holds it, writes it as held by the revocation `holder`
    /// with a fresh nonce, in one claim statement conditional on the row
    /// and record as read ([`row::claim_many`]: the epoch drawn from
    /// `epoch_seq` in that statement, rule 1), with the longest TTL of the
    /// row's, the record's and this store's. A renewal between the read and
    /// the statement makes it win nothing: read again, at most 8 times.
    /// `Ok(None)`: no term holds the row. Returns the deposed row and the
    /// revocation's epoch.
    pub(crate) async fn revoke(
        &self,
        name: &str,
        holder: &str,
        wall_ms: i64,
    ) -> Result<Option<(election_sql::lease_row::Row, i64)>, Error> {
        for _ in 0..8 {
            let seen = self.read_one(name).await?;
            let Some(row) = seen.lease.clone() else {
                return Ok(None);
            };
            let held = row
                .holder
                .as_deref()
                .is_some_and(election_sql::lease_row::is_term_holder);
            if !held {
                return Ok(None);
            }
            let ttl_ms = self
                .options
                .times
                .ttl_ms()
                .max(row.ttl_ms)
                .max(seen.recorded.map_or(0, |r| r.ttl_ms));
            let take = Take::new(name, election_core::attempt_nonce().cast_signed(), &seen)?;
            let won = self
                .write(SESSION, self.options.request_timeout(), async |conn| {
                    row::claim_many(conn, &self.sql, &[take], holder, ttl_ms, wall_ms).await
                })
                .await?;
            if let Some(&(_, epoch)) = won.first() {
                return Ok(Some((row, epoch)));
            }
        }
        Err(Error::OutcomeUnknown {
            after: self.options.request_timeout(),
        })
    }

    /// Hands the term `hold` to the successor `holder` names (ADR 0112,
    /// [`row::release_to`]), notifying every waiter of the name, bounded
    /// by the request timeout (unknown outcome past it), on the renewals'
    /// queue as a release is: whether the row showed the term.
    pub(crate) async fn release_to(
        &self,
        hold: HeldRow<'_>,
        holder: &str,
        window_ms: i64,
    ) -> Result<bool, Error> {
        let wall_ms = self.clock.wall_unix_ms();
        let handed = self
            .write(URGENT, self.options.request_timeout(), async |conn| {
                row::release_to(conn, &self.sql, hold, holder, window_ms, wall_ms).await
            })
            .await?;
        if handed {
            // The successor may be taking the row now: a close waits the
            // grace, as after a release (ADR 0086).
            self.last_release.mark(Instant::now());
        }
        Ok(handed)
    }

    /// Stores a transfer request beside the term of `name` (ADR 0112,
    /// [`row::request_transfer`]), bounded by the request timeout: the
    /// epoch of the term asked, `None` if no term holds the row.
    pub(crate) async fn request_transfer(
        &self,
        name: &str,
        to_by: (&str, &str),
        wall_ms: i64,
    ) -> Result<Option<i64>, Error> {
        self.write(SESSION, self.options.request_timeout(), async |conn| {
            row::request_transfer(conn, &self.sql, name, to_by, wall_ms).await
        })
        .await
    }

    /// A waiter's look at `name` that wins it for attempt `nonce` if it is
    /// released or handed over to `identity` ([`row::take_released`]),
    /// bounded by the request timeout;
    /// unknown outcome past it.
    pub(crate) async fn take_released(
        &self,
        name: &str,
        nonce: i64,
        identity: &str,
    ) -> Result<(Seen, Option<i64>), Error> {
        let (ttl_ms, wall_ms) = (self.options.times.ttl_ms(), self.clock.wall_unix_ms());
        self.write(SESSION, self.options.request_timeout(), async |conn| {
            row::take_released(conn, &self.sql, name, nonce, identity, ttl_ms, wall_ms).await
        })
        .await
    }

    /// Writes or renews the row of attempt `nonce` in the waiters' queue of
    /// `name` (ADR 0108), on the session, bounded by the request timeout:
    /// whether a term holds the name, and how many rows ahead of it a
    /// release could choose as the head. Its expiry is a TTL from now by the server's
    /// clock; the channel is this process's session's. A row that had
    /// expired goes to the back of the line. `None`: not written, the
    /// attempt holds the name.
    ///
    /// The first write (`first`) locks the lease row, so that a release
    /// running at once is ordered with it (see `schema.rs`).
    ///
    /// The row also says what a release needs to pass the term to this
    /// attempt (ADR 0120): its `identity`, this store's TTL, the number
    /// `ticket` of this write (the caller keeps the instant it took before
    /// calling), the server process of this session, and until when it is
    /// fresh enough to be passed a term (one and a half renew intervals).
    pub(crate) async fn waiter_renew(
        &self,
        name: &str,
        (nonce, identity): (i64, &str),
        ticket: i64,
        first: bool,
    ) -> Result<Option<(bool, i64)>, Error> {
        let ttl_ms = self.options.times.ttl_ms();
        // Passable until one and a half renew intervals from now (ADR
        // 0120): the next renewal is due one interval from now.
        let fresh_ms =
            i64::try_from(self.options.renew_interval().as_millis() * 3 / 2).unwrap_or(i64::MAX);
        let channel = self.session.wake_channel.clone();
        let statement = if first {
            self.sql.waiter_join.clone()
        } else {
            self.sql.waiter_renew.clone()
        };
        self.write(SESSION, self.options.request_timeout(), async |conn| {
            Ok(sqlx::query_as(sqlx::AssertSqlSafe(statement))
                .bind(name)
                .bind(nonce)
                .bind(&*channel)
                .bind(ttl_ms)
                .bind(identity)
                .bind(ticket)
                .bind(fresh_ms)
                .fetch_optional(conn)
                .await?)
        })
        .await
    }

    /// Deletes the row of attempt `nonce` from the waiters' queue of
    /// `name` (ADR 0108), bounded by the request timeout: whether there was
    /// one (a row gone may have been passed the term, ADR 0120).
    pub(crate) async fn waiter_delete(&self, name: &str, nonce: i64) -> Result<bool, Error> {
        self.write(SESSION, self.options.request_timeout(), async |conn| {
            let deleted = sqlx::query(sqlx::AssertSqlSafe(self.sql.waiter_delete.clone()))
                .bind(name)
                .bind(nonce)
                .execute(conn)
                .await?;
            Ok(deleted.rows_affected() > 0)
        })
        .await
    }

    /// One renewal statement over `holds`, given at most `bound`: the names
    /// renewed; [`Error::OutcomeUnknown`] past the bound.
    ///
    /// Cancel safety: cancel safe; dropped, each row is unchanged or
    /// renewed by its own term.
    pub(crate) async fn renew_within(
        &self,
        holds: &[HeldRow<'_>],
        bound: Duration,
    ) -> Result<HashSet<String>, Error> {
        let wall_ms = self.clock.wall_unix_ms();
        self.write(URGENT, bound, async |conn| {
            row::renew_many(conn, &self.sql, holds, wall_ms).await
        })
        .await
    }

    /// The commit-point check of a term: one conditional renewal of its
    /// row, given at most the lease's validity. `Ok(false)`: the row shows
    /// another term or none.
    pub(crate) async fn confirm(&self, hold: HeldRow<'_>) -> Result<bool, Error> {
        let renewed = self.renew_within(&[hold], self.options.validity()).await?;
        Ok(renewed.contains(hold.name))
    }

    /// Publishes `value` for the term `hold` (ADR 0068), bounded by the
    /// lease's validity (unknown outcome past it): `Ok(false)` if the row
    /// no longer shows the term.
    pub(crate) async fn proclaim(&self, hold: HeldRow<'_>, value: &str) -> Result<bool, Error> {
        self.write(URGENT, self.options.validity(), async |conn| {
            row::proclaim(conn, &self.sql, hold, value).await
        })
        .await
    }

    /// One release statement over `holds` (`(name, nonce)`), bounded by the
    /// request timeout: the names released.
    pub(crate) async fn release_many(
        &self,
        holds: &[(&str, i64)],
    ) -> Result<HashSet<String>, Error> {
        self.release_many_via(URGENT, holds).await
    }

    /// [`release_many`](Self::release_many) `via` the session or the pool.
    pub(crate) async fn release_many_via(
        &self,
        via: Via,
        holds: &[(&str, i64)],
    ) -> Result<HashSet<String>, Error> {
        let released = self
            .write(via, self.options.request_timeout(), async |conn| {
                row::release_many(conn, &self.sql, holds).await
            })
            .await?;
        if !released.is_empty() {
            // A successor may be taking a row now: a close waits the grace
            // (ADR 0086).
            self.last_release.mark(Instant::now());
        }
        Ok(released)
    }

    /// Releases `holds` in the background (after a claim whose outcome is
    /// in doubt, or a dropped term); if that cannot run, they age out.
    ///
    /// A claim statement the client stopped waiting for keeps running on
    /// the server and may commit after a first release ran (which does not
    /// see the rows it inserts before they commit): the holds not released
    /// are tried again every request timeout for a TTL (ADR 0058), each
    /// release conditional on its nonce, so the keys come back at once
    /// instead of aging out.
    pub(crate) fn release_in_background(self: &Arc<Self>, holds: Vec<(String, i64)>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no runtime to release on; the leases age out after their TTL");
            return;
        };
        let ctx = self.clone();
        rt.spawn(async move {
            let every = ctx.options.request_timeout();
            let give_up = tokio::time::Instant::now() + ctx.options.ttl();
            let mut left = holds;
            loop {
                let batch: Vec<(&str, i64)> = left.iter().map(|(n, x)| (n.as_str(), *x)).collect();
                // On the pool: a release of rows a timed-out claim is still
                // writing waits for that claim's locks, which would hold up
                // the session's renewals (ADR 0105).
                match ctx.release_many_via(Via::Pool, &batch).await {
                    Ok(released) => left.retain(|(n, _)| !released.contains(n)),
                    Err(e) => {
                        tracing::debug!(error = %e, "background release failed; trying again");
                    }
                }
                if left.is_empty() || tokio::time::Instant::now() + every >= give_up {
                    break;
                }
                tokio::time::sleep(every).await;
            }
            if !left.is_empty() {
                tracing::debug!(
                    leases = left.len(),
                    "background release: not released (never claimed, or not known); they age out after their TTL"
                );
            }
        });
    }
}

/// PostgreSQL's statements under the shared lease-set steps (ADR 0052).
impl election_sql::LeaseRows for PostgresStore {
    type Error = Error;

    fn times(&self) -> election_sql::LeaseTimes {
        self.options.times
    }

    async fn renew_one(&self, hold: HeldRow<'_>, budget: Duration) -> Result<bool, Error> {
        Ok(self
            .renew_within(&[hold], budget)
            .await?
            .contains(hold.name))
    }

    /// One statement that renews the term and reads the transfer request
    /// stored beside it (ADR 0112), on the renewals' queue, given at most
    /// `budget` ([`Error::OutcomeUnknown`] past it).
    async fn renew_asked(
        &self,
        hold: HeldRow<'_>,
        budget: Duration,
    ) -> Result<Option<Option<election_sql::lease_row::Asked>>, Error> {
        let wall_ms = self.clock.wall_unix_ms();
        self.write(URGENT, budget, async |conn| {
            row::renew_asked(conn, &self.sql, hold, wall_ms).await
        })
        .await
    }

    async fn renew_many(&self, holds: &[HeldRow<'_>]) -> Result<HashSet<String>, Error> {
        self.renew_within(holds, self.options.validity()).await
    }

    async fn confirm(&self, hold: HeldRow<'_>) -> Result<bool, Error> {
        PostgresStore::confirm(self, hold).await
    }

    async fn release_many(&self, holds: &[HeldRow<'_>]) -> Result<(), Error> {
        let holds: Vec<(&str, i64)> = holds.iter().map(|h| (h.name, h.nonce)).collect();
        PostgresStore::release_many(self, &holds).await.map(drop)
    }

    /// A lease set's renewal, on the session's renewal queue as every
    /// renewal (ADR 0105), its heartbeat bumped and the heartbeats listed (ADR 0110).
    async fn renew_with_heartbeat(
        &self,
        holds: &[HeldRow<'_>],
        heartbeat: i64,
    ) -> Result<(HashSet<String>, Vec<election_sql::Heartbeat>), Error> {
        let wall_ms = self.clock.wall_unix_ms();
        self.write(URGENT, self.options.validity(), async |conn| {
            row::renew_with_heartbeat(conn, &self.sql, holds, heartbeat, wall_ms).await
        })
        .await
    }

    async fn stop_heartbeat(&self, heartbeat: i64) -> Result<(), Error> {
        let stale = self
            .clock
            .wall_unix_ms()
            .saturating_sub(election_sql::HEARTBEAT_KEPT_MS);
        self.write(SESSION, self.options.request_timeout(), async |conn| {
            row::stop_heartbeat(conn, &self.sql, heartbeat, stale).await
        })
        .await
    }

    fn now(&self) -> tokio::time::Instant {
        self.clock.now()
    }
}

/// A hash of `value`, to key sessions by a secret without keeping it.
fn hash_of(value: impl std::hash::Hash) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// The password of a `postgres://user:password@host/...` URL, as written
/// (percent-encoded), if it has one.
fn url_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let (userinfo, _) = authority.rsplit_once('@')?;
    userinfo.split_once(':').map(|(_, password)| password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_password_is_found_only_in_its_user_info() {
        assert_eq!(
            url_password("postgres://u:p%40w@h:5432/db?x=1"),
            Some("p%40w")
        );
        assert_eq!(url_password("postgres://u@h/db"), None);
        assert_eq!(url_password("postgres://h/db?passfile=/a:b@c"), None);
        assert_ne!(hash_of(Some("a")), hash_of(Some("b")));
    }

    /// A fresh server, and a context connected to it with the default
    /// options.
    async fn connected() -> (postgres_testkit::Server, PostgresStore) {
        let server = postgres_testkit::Server::start().expect("PostgreSQL must be installed");
        let ctx = PostgresStore::connect(&server.url(), PostgresOptions::default())
            .await
            .expect("connect");
        (server, ctx)
    }

    #[test]
    fn the_schema_comes_from_the_url_or_the_options() {
        let d = PostgresOptions::default;
        let (url, o) =
            schema_from_url("postgres://a@h/db?schema=jobs&sslmode=disable", d()).unwrap();
        assert_eq!(
            (url.as_str(), o.schema()),
            ("postgres://a@h/db?sslmode=disable", "jobs")
        );
        let (url, o) = schema_from_url("postgres://a@h/db?schema=jobs", d()).unwrap();
        assert_eq!((url.as_str(), o.schema()), ("postgres://a@h/db", "jobs"));
        let (url, o) = schema_from_url("postgres://a@h/db", d()).unwrap();
        assert_eq!(
            (url.as_str(), o.schema()),
            ("postgres://a@h/db", "election")
        );
        assert!(schema_from_url("postgres://a@h/db?schema=Bad-Name", d()).is_err());
        let other = d().with_schema("other").unwrap();
        assert!(schema_from_url("postgres://a@h/db?schema=jobs", other.clone()).is_err());
        assert!(schema_from_url("postgres://a@h/db?schema=other", other).is_ok());
    }

    /// A stopped server: a renewal that does not answer within its bound
    /// has an unknown outcome, a read times out; both answer again once
    /// the server runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_to_a_stopped_server_are_bounded() {
        let (mut server, ctx) = connected().await;
        let hold = HeldRow {
            name: "jobs",
            nonce: 7,
            epoch: 2,
        };
        // The renewal prepared on the session, as a waiter's session has it
        // (the bound below is for the request, not for preparing it on a
        // loaded machine).
        ctx.renew_within(&[hold], Duration::from_secs(10))
            .await
            .expect("prepared");
        let bound = Duration::from_millis(100);
        assert!(
            ctx.renew_within(&[hold], bound)
                .await
                .expect("answers")
                .is_empty()
        );
        server.pause().expect("pause");
        // Bounded: an unknown outcome, or (no connection answered the
        // pool's check in time, so nothing was sent) unavailable.
        match ctx.renew_within(&[hold], bound).await {
            Err(Error::OutcomeUnknown { after }) => assert_eq!(after, bound),
            Err(e) if e.is_unavailable() => {}
            other => panic!("expected an unknown outcome, got {other:?}"),
        }
        let read = ctx.read_one("jobs").await;
        assert!(matches!(read, Err(ref e) if e.is_unavailable()), "{read:?}");
        server.resume().expect("resume");
        assert!(
            !ctx.confirm(hold).await.expect("answers again"),
            "no such term"
        );
    }

    /// An open makes one connection, the session's, and nothing of the
    /// pool (ADR 0105); the first wait readies the session in the
    /// background: the handover's statements prepared on it (ADR 0040,
    /// 0075). Before ADR 0105 the open made two pool connections and the
    /// wait readied both.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_first_wait_readies_the_session_and_opens_no_pool_connection() {
        let (_server, ctx) = connected().await;
        assert_eq!(ctx.pool.size(), 0, "an open makes no pool connection");
        ctx.ready_soon();
        // Prepared, with a generic plan of the look kept (ADR 0075).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let prepared: i64 = ctx
                .read_on_session(async |conn| {
                    Ok(sqlx::query_scalar(
                        "SELECT count(*) FROM pg_prepared_statements \
                         WHERE statement = $1 AND generic_plans >= 1",
                    )
                    .bind(&*ctx.sql.take_released)
                    .fetch_one(conn)
                    .await?)
                })
                .await
                .expect("prepared statements");
            if prepared == 1 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the session was never readied"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(ctx.pool.size(), 0, "readying opened a pool connection");
    }

    /// The pool hands connections out without a ping (ADR 0065). A
    /// connection the server ended while it was idle fails the first
    /// request sent on it and never answers for a term: a read is tried
    /// again on another connection and answers; the commit-point check (a
    /// write, never tried again) fails, and the next one, on a new
    /// connection, sees the row as it is now: another term's, so the term
    /// is not held.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_the_server_ended_never_report_a_term_held() {
        let (server, ctx) = connected().await;
        ctx.ready_soon();
        let take = Take::new("jobs", 1, &Seen::default()).expect("take");
        let epoch = ctx.claim_many(&[take], "a").await.expect("claim")[0].1;
        let hold = HeldRow {
            name: "jobs",
            nonce: 1,
            epoch,
        };
        assert!(ctx.confirm(hold).await.expect("answers"), "held");
        // (OFFSET 0: the filter runs before any backend is ended.)
        let end_all = "SELECT count(pg_terminate_backend(pid, 10000)) FROM (SELECT pid \
             FROM pg_stat_activity WHERE application_name = 'election-postgres' OFFSET 0) s";
        let ended: i64 = server.sql(end_all).expect("end").parse().expect("count");
        assert!(ended >= 1, "no connection of the pool was ended");
        // Another term's now (by hand, as a successor would write it).
        server
            .sql(
                "UPDATE election.leases SET holder = 'b', nonce = 2, version = version + 1; \
                 UPDATE election.epochs SET epoch = epoch + 1",
            )
            .expect("another term");
        let seen = ctx.read_one("jobs").await.expect("the read is tried again");
        assert_eq!(seen.lease.and_then(|r| r.holder).as_deref(), Some("b"));
        server.sql(end_all).expect("end again");
        let mut failed = 0;
        loop {
            match ctx.confirm(hold).await {
                Ok(true) => panic!("a term reported held after the server ended its connection"),
                Ok(false) => break,
                Err(e) => {
                    assert!(connection_gone(&e), "{e:?}");
                    failed += 1;
                    assert!(failed <= 8, "the pool never replaced its ended connections");
                }
            }
        }
        assert!(failed >= 1, "no check was sent on an ended connection");
    }

    /// Readying a connection (at open, and as a pool of this crate opens
    /// more) prepares the hot statements on it and runs the claim over an
    /// empty batch: nothing is written, no epoch drawn, no row won, and a
    /// fresh connection's claim is then already prepared.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readying_prepares_the_claim_and_writes_nothing() {
        let (server, ctx) = connected().await;
        // Two connections, each readied.
        let mut first = ctx.pool.acquire().await.expect("first");
        let mut second = ctx.pool.acquire().await.expect("second");
        for conn in [&mut first, &mut second] {
            row::ready(conn, &ctx.sql, &|| true).await.expect("readied");
        }
        let prepared: Vec<String> =
            sqlx::query_scalar("SELECT statement FROM pg_prepared_statements")
                .fetch_all(&mut *second)
                .await
                .expect("prepared statements");
        for statement in [
            &ctx.sql.read_many,
            &ctx.sql.claim_many,
            &ctx.sql.take_released,
            &ctx.sql.release_many,
        ] {
            assert!(
                prepared.iter().any(|p| p.as_str() == &**statement),
                "not prepared on a new connection: {statement}"
            );
        }
        row::ready(&mut second, &ctx.sql, &|| true)
            .await
            .expect("again");
        drop((first, second));
        assert_eq!(
            server
                .sql(
                    "SELECT (SELECT count(*) FROM election.leases), \
                     (SELECT count(*) FROM election.epochs), \
                     (SELECT is_called FROM election.epoch_seq)"
                )
                .expect("state"),
            "0|0|f"
        );
    }

    /// A release passes the term to the head of the name's line in its own
    /// statement (ADR 0120): the row shows the head's identity and nonce in
    /// a new epoch, one renewal version up (a release and a take would be
    /// two), the head's row is out of line, and the head's look reads the
    /// row as its own (`ours`: a pass whose notification it missed), which
    /// nobody else's does. A waiter whose session's server process is gone,
    /// and one whose row is no longer fresh, are passed over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_release_passes_the_term_to_the_head_of_the_line() {
        let (server, ctx) = connected().await;
        let (_, won) = ctx.take_released("jobs", 1, "a").await.expect("take");
        let first = won.expect("a never-held name is won");
        // A waiter row of `nonce` in line, unexpired, its session's server
        // process `pid`, fresh until `fresh` from now.
        let waiter = |nonce: i64, pid: i64, fresh: &str| {
            server
                .sql(&format!(
                    "INSERT INTO election.waiters \
                       (name, nonce, channel, expires_at, holder, ttl_ms, ticket, pid, fresh_until) \
                     VALUES ('jobs', {nonce}, 'election:wake:{nonce}', now() + interval '1 hour', \
                             'w{nonce}', 3600000, 1, {pid}, now() + interval '{fresh}')"
                ))
                .expect("a waiter row");
        };
        // A waiter whose process died: its session's server process (a
        // psql that has exited) is gone. First in line.
        let dead: i64 = server
            .sql("SELECT pg_backend_pid()")
            .expect("pid")
            .parse()
            .expect("a pid");
        waiter(9, dead, "1 hour");
        // A waiter that stopped renewing its row (paused, cut off): its
        // session's server process runs, its row is unexpired, and it is
        // no longer fresh. Second in line.
        let mut live = ctx.pool.acquire().await.expect("a session");
        let alive: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *live)
            .await
            .expect("pid");
        waiter(8, alive.into(), "-1 second");
        let joined = ctx
            .waiter_renew("jobs", (2, "b"), 7, true)
            .await
            .expect("queued");
        // Held, and nobody a release would pass the term to is ahead of b.
        assert!(
            joined.is_some_and(|(held, ahead)| held && ahead == 0),
            "{joined:?}"
        );
        let row = "SELECT holder || ':' || nonce || ':' || version || ':' || epoch || ':' || ttl_ms \
                   FROM election.leases WHERE name = 'jobs'";
        let before = server.sql(row).expect("row");
        let version: i64 = before
            .split(':')
            .nth(2)
            .expect("version")
            .parse()
            .expect("a number");
        let released = ctx.release_many(&[("jobs", 1)]).await.expect("release");
        assert!(released.contains("jobs"));
        let after = server.sql(row).expect("row");
        let ttl = ctx.options.times.ttl_ms();
        let parts: Vec<&str> = after.split(':').collect();
        assert_eq!(
            (parts[0], parts[1], parts[2], parts[4]),
            ("b", "2", &*(version + 1).to_string(), &*ttl.to_string()),
            "the row after a's release with b in line (before: {before}): {after}"
        );
        let epoch: i64 = parts[3].parse().expect("epoch");
        assert!(
            epoch > first,
            "the passed term's epoch {epoch} is not above {first}"
        );
        assert_eq!(
            server
                .sql("SELECT string_agg(nonce::text, ',' ORDER BY seq) FROM election.waiters")
                .expect("line"),
            "9,8",
            "b is out of line; the dead and the stale waiters stay until they expire"
        );
        drop(live);
        assert_eq!(
            server
                .sql("SELECT epoch FROM election.epochs WHERE name = 'jobs'")
                .expect("record"),
            epoch.to_string(),
            "the passed epoch is recorded"
        );
        let (seen, won) = ctx.take_released("jobs", 2, "b").await.expect("look");
        assert_eq!(won, None);
        assert!(
            seen.ours,
            "b's look does not read the row as its own: {seen:?}"
        );
        let (seen, won) = ctx.take_released("jobs", 3, "c").await.expect("look");
        assert!(won.is_none() && !seen.ours, "{seen:?} {won:?}");
    }

    /// A head that leaves the line while a release is about to pass it the
    /// term (its row deleted by its own leaving, in a transaction that
    /// commits while the release waits for the row) is not passed the
    /// term: the release releases the name (ADR 0120). Passed, the name
    /// would be held by an attempt that is gone, for a TTL.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_head_that_leaves_as_the_release_runs_is_not_passed_the_term() {
        use sqlx::Connection;
        let (server, ctx) = connected().await;
        let (_, won) = ctx.take_released("jobs", 1, "a").await.expect("take");
        won.expect("a never-held name is won");
        ctx.waiter_renew("jobs", (2, "b"), 1, true)
            .await
            .expect("queued")
            .expect("written");
        let mut leaving = sqlx::PgConnection::connect(&server.url())
            .await
            .expect("a session");
        sqlx::query("BEGIN")
            .execute(&mut leaving)
            .await
            .expect("begin");
        sqlx::query("DELETE FROM election.waiters WHERE nonce = 2")
            .execute(&mut leaving)
            .await
            .expect("b leaves");
        let commit = async {
            assert!(
                server
                    .one_session_waits_for_a_lock(Duration::from_secs(30))
                    .await
                    .expect("pg_stat_activity"),
                "the release never waited for b's row"
            );
            sqlx::query("COMMIT")
                .execute(&mut leaving)
                .await
                .expect("commit");
        };
        let (released, ()) = tokio::join!(ctx.release_many(&[("jobs", 1)]), commit);
        assert!(released.expect("release").contains("jobs"));
        assert_eq!(
            server
                .sql("SELECT coalesce(holder, '-') FROM election.leases WHERE name = 'jobs'")
                .expect("row"),
            "-",
            "the name after a's release, b having left as it ran"
        );
    }

    /// Readying runs the waiter's look-and-take and the release until the
    /// server keeps a generic plan of each (ADR 0075), so a handover plans
    /// neither, and leaves no trace: a released row of another name is
    /// neither taken nor changed, no epoch is drawn from the sequence (the
    /// next win is one above the last), the stand-in row is gone, and the
    /// first notification a listener gets is the next real win's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readying_keeps_generic_plans_of_the_look_and_the_release() {
        let (server, ctx) = connected().await;
        let (_, won) = ctx.take_released("jobs", 1, "a").await.expect("take");
        let first = won.expect("a never-held name is won");
        let released = ctx.release_many(&[("jobs", 1)]).await.expect("release");
        assert!(released.contains("jobs"));
        let state = "SELECT (SELECT string_agg(name || ':' || coalesce(holder, '-') || ':' \
             || version, ',') FROM election.leases), \
             (SELECT string_agg(name || ':' || epoch, ',') FROM election.epochs), \
             (SELECT last_value FROM election.epoch_seq)";
        let before = server.sql(state).expect("state");
        let mut listener = sqlx::postgres::PgListener::connect(&server.url())
            .await
            .expect("listener");
        listener.listen(&ctx.sql.channel).await.expect("listen");

        let mut conns = vec![
            ctx.pool.acquire().await.expect("first"),
            ctx.pool.acquire().await.expect("second"),
        ];
        for conn in &mut conns {
            row::ready(conn, &ctx.sql, &|| true).await.expect("readied");
        }
        for conn in &mut conns {
            for statement in [&ctx.sql.take_released, &ctx.sql.release_one] {
                let generic: i64 = sqlx::query_scalar(
                    "SELECT generic_plans FROM pg_prepared_statements WHERE statement = $1",
                )
                .bind(&**statement)
                .fetch_one(&mut **conn)
                .await
                .expect("prepared");
                assert!(
                    generic >= 1,
                    "a readied connection has no generic plan of {}: {generic}",
                    &statement[..40]
                );
            }
        }
        drop(conns);
        assert_eq!(
            server.sql(state).expect("state"),
            before,
            "readying left a trace"
        );

        let (_, won) = ctx.take_released("jobs", 2, "b").await.expect("take");
        assert_eq!(won, Some(first + 1), "readying drew an epoch");
        let n = tokio::time::timeout(Duration::from_secs(30), listener.recv())
            .await
            .expect("a notification")
            .expect("listener");
        assert_eq!(n.payload(), "jobs", "readying notified");
    }

    /// A release commits without waiting for its WAL flush, and only a
    /// release (ADR 0071), a handover (ADR 0112) being one: a deferred
    /// trigger records `synchronous_commit` as each write of a lease row
    /// commits. On one connection, a win, a renewal, the release, the next
    /// win, a handover and the successor's win: only the release and the
    /// handover are `off`; the setting never outlives their transactions,
    /// so every claim and renewal stays durable (rule 1's epoch is never
    /// acknowledged before it is on disk).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_a_release_commits_without_waiting_for_the_flush() {
        let server = postgres_testkit::Server::start().expect("PostgreSQL must be installed");
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&server.url())
            .await
            .expect("pool");
        let ctx = PostgresStore::with_pool(pool, PostgresOptions::default())
            .await
            .expect("open");
        server
            .sql(
                "CREATE TABLE commit_log (n serial PRIMARY KEY, holder text, sync text); \
                 CREATE FUNCTION log_commit() RETURNS trigger LANGUAGE plpgsql AS $f$ \
                 BEGIN INSERT INTO commit_log (holder, sync) \
                 VALUES (coalesce(CASE WHEN left(NEW.holder, 1) = chr(1) THEN 'handed' \
                 ELSE NEW.holder END, '-'), current_setting('synchronous_commit')); \
                 RETURN NULL; END $f$; \
                 CREATE CONSTRAINT TRIGGER log_commit AFTER INSERT OR UPDATE ON election.leases \
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION log_commit()",
            )
            .expect("the commit log");
        let (_, won) = ctx.take_released("jobs", 1, "a").await.expect("look");
        let epoch = won.expect("a never-held name is won");
        let hold = HeldRow::won("jobs", 1, Some(epoch)).expect("held");
        assert!(ctx.confirm(hold).await.expect("renewal"), "a renews");
        let released = ctx.release_many(&[("jobs", 1)]).await.expect("release");
        assert!(released.contains("jobs"), "a released jobs");
        let (_, won) = ctx.take_released("jobs", 2, "b").await.expect("look");
        let b = won.expect("b wins the released row");
        assert!(b > epoch);
        // A handover (ADR 0112) is a release too; the successor's take is
        // a win.
        let to = election_sql::lease_row::handed_to(
            &election_core::Identity::new("b").expect("b"),
            &election_core::Identity::new("c").expect("c"),
        );
        let hold = HeldRow::won("jobs", 2, Some(b)).expect("held");
        assert!(ctx.release_to(hold, &to, 60_000).await.expect("handed"));
        let (_, won) = ctx.take_released("jobs", 3, "c").await.expect("look");
        assert!(won.expect("c takes the row handed to it") > b);
        assert_eq!(
            server
                .sql("SELECT string_agg(holder || ':' || sync, ' ' ORDER BY n) FROM commit_log")
                .expect("the log"),
            "a:on a:on -:off b:on handed:off c:on",
            "synchronous_commit at each commit: win, renewal, release, next win, \
             handover, the successor's win"
        );
    }

    /// The statement of a first look and of a woken waiter (ADR 0045, ADR
    /// 0065): a never-held name is won; a held row, or a missing row whose
    /// epoch record remains (deleted by hand: held for a TTL), is only
    /// read; a released one is won, with an epoch above the last term's,
    /// recorded, and notified at commit; then it is held again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_look_takes_only_a_released_or_never_held_name() {
        let (server, ctx) = connected().await;
        let (seen, first) = ctx.take_released("jobs", 1, "a").await.expect("look");
        assert_eq!(seen, Seen::default(), "read before the win: nothing");
        let first = first.expect("a never-held name is won");
        let (seen, won) = ctx.take_released("jobs", 2, "b").await.expect("look");
        assert_eq!(won, None, "a holds the row");
        assert_eq!(seen.lease.and_then(|r| r.holder).as_deref(), Some("a"));
        let mut listener = sqlx::postgres::PgListener::connect_with(&ctx.pool)
            .await
            .expect("listener");
        listener.listen(&ctx.sql.channel).await.expect("listen");
        assert!(
            ctx.release_many(&[("jobs", 1)])
                .await
                .expect("release")
                .contains("jobs")
        );
        let released = listener.recv().await.expect("release notified");
        assert_eq!(released.payload(), "jobs");
        let (seen, won) = ctx.take_released("jobs", 2, "b").await.expect("look");
        let won = won.expect("a released row is won");
        assert!(won > first, "epoch {won} after {first}");
        let row = seen.lease.expect("the row as it was");
        assert_eq!(
            (row.holder, row.epoch),
            (None, first),
            "read before the win"
        );
        let taken = listener.recv().await.expect("win notified");
        assert_eq!(taken.payload(), "jobs");
        assert_eq!(
            server
                .sql(
                    "SELECT holder, nonce, epoch FROM election.leases NATURAL JOIN election.epochs"
                )
                .expect("state"),
            format!("b|2|{won}")
        );
        let (_, again) = ctx.take_released("jobs", 3, "c").await.expect("look");
        assert_eq!(again, None, "b holds the row now");
        server
            .sql("DELETE FROM election.leases")
            .expect("the row deleted by hand");
        let (seen, again) = ctx.take_released("jobs", 4, "d").await.expect("look");
        assert_eq!(again, None, "a deleted row with its record counts as held");
        assert_eq!(seen.recorded.map(|r| r.epoch), Some(won));
        assert_eq!(
            server
                .sql("SELECT count(*) FROM election.leases")
                .expect("rows"),
            "0",
            "nothing inserted"
        );
    }

    /// A woken look takes a row handed over to its own candidate (ADR
    /// 0112) in the one statement, as it takes a released one: another
    /// candidate's look, a look by a candidate whose identity only begins
    /// with the successor's, and a row revoked or held, are only read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_look_takes_a_row_handed_over_to_its_own_candidate() {
        use election_core::Identity;
        let (server, ctx) = connected().await;
        let (_, first) = ctx.take_released("jobs", 1, "a").await.expect("look");
        let first = first.expect("a never-held name is won");
        let to = election_sql::lease_row::handed_to(
            &Identity::new("a").expect("a"),
            &Identity::new("b").expect("b"),
        );
        let hold = HeldRow::won("jobs", 1, Some(first)).expect("held");
        assert!(ctx.release_to(hold, &to, 60_000).await.expect("handed"));
        for other in ["c", "bb", "a"] {
            let (seen, won) = ctx.take_released("jobs", 9, other).await.expect("look");
            assert_eq!(won, None, "{other} takes a row handed to b");
            assert_eq!(seen.lease.and_then(|r| r.holder), Some(to.clone()));
        }
        let (seen, won) = ctx.take_released("jobs", 2, "b").await.expect("look");
        let won = won.expect("the successor takes the row handed to it");
        assert!(won > first, "epoch {won} after {first}");
        assert_eq!(
            seen.lease.map(|r| (r.holder, r.epoch)),
            Some((Some(to), first)),
            "read before the win"
        );
        assert_eq!(
            server
                .sql(
                    "SELECT holder, nonce, epoch FROM election.leases NATURAL JOIN election.epochs"
                )
                .expect("state"),
            format!("b|2|{won}")
        );
        let (_, again) = ctx.take_released("jobs", 3, "b").await.expect("look");
        assert_eq!(again, None, "b's own term is not taken again");
    }

    /// A take by heartbeat (ADR 0110) wins only while the heartbeat the row names
    /// still shows the version the claimant saw: a bump between its read
    /// and its claim (the holder renewed) or the heartbeat deleted refuses it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_take_by_heartbeat_wins_only_while_the_heartbeat_is_unchanged() {
        use election_sql::LeaseRows as _;
        let (server, ctx) = connected().await;
        let (a, b) = (101_i64, 202_i64);
        let read = async || {
            let mut rows = ctx.read_many_via(Via::Pool, &["jobs"]).await.expect("read");
            rows.remove("jobs").expect("the row")
        };
        let named = || {
            server
                .sql("SELECT coalesce(heartbeat || '/' || heartbeat_nonce, 'none') FROM election.leases WHERE name = 'jobs'")
                .expect("heartbeat")
        };
        let fresh = Take::new("jobs", 7, &Seen::default()).expect("take");
        let won = ctx.claim_many_via(Via::Pool, &[fresh], "a").await;
        let epoch = won.expect("claim")[0].1;
        assert_eq!(named(), "none", "a claim names no heartbeat");
        let hold = HeldRow {
            name: "jobs",
            nonce: 7,
            epoch,
        };
        ctx.renew_with_heartbeat(&[hold], a).await.expect("renew");
        let seen = read().await;
        let heartbeat = seen.heartbeat.expect("a's renewal named its heartbeat");
        assert_eq!(heartbeat.id, a);
        // a renews (its heartbeat moves on) after b read the row.
        let (renewed, _) = ctx.renew_with_heartbeat(&[hold], a).await.expect("renew");
        assert!(renewed.contains("jobs"));
        let mut take = Take::new("jobs", 8, &seen).expect("take");
        take.by_heartbeat = Some(heartbeat.version);
        let refused = ctx.claim_many_via(Via::Pool, &[take], "b").await;
        assert!(
            refused.expect("claim").is_empty(),
            "taken by a heartbeat that moved on"
        );
        // The row and heartbeat as read again, then the heartbeat deleted by hand.
        let seen = read().await;
        let now = seen.heartbeat.expect("a's heartbeat");
        server
            .sql(&format!("DELETE FROM election.heartbeats WHERE id = {a}"))
            .expect("delete");
        let mut take = Take::new("jobs", 8, &seen).expect("take");
        take.by_heartbeat = Some(now.version);
        let refused = ctx.claim_many_via(Via::Pool, &[take.clone()], "b").await;
        assert!(
            refused.expect("claim").is_empty(),
            "taken by a heartbeat deleted by hand"
        );
        // Written anew by a's next beat, at a random version: as seen, taken.
        let (_, listed) = ctx.renew_with_heartbeat(&[], b).await.expect("renew");
        ctx.renew_with_heartbeat(&[], a).await.expect("renew");
        assert!(
            listed.iter().all(|m| m.id != a),
            "no heartbeat of a while it was gone"
        );
        let again: i64 = server
            .sql(&format!(
                "SELECT version FROM election.heartbeats WHERE id = {a}"
            ))
            .expect("version")
            .parse()
            .expect("a number");
        take.by_heartbeat = Some(again);
        let won = ctx.claim_many_via(Via::Pool, &[take], "b").await;
        let won = won.expect("claim");
        assert_eq!(won.len(), 1, "the row as read, the heartbeat as seen");
        assert_eq!(named(), "none", "b's claim names none yet");
        let hold = HeldRow {
            name: "jobs",
            nonce: 8,
            epoch: won[0].1,
        };
        ctx.renew_with_heartbeat(&[hold], b).await.expect("renew");
        assert_eq!(
            named(),
            format!("{b}/8"),
            "b's renewal names its heartbeat, with the row's nonce"
        );
    }

    /// Several waiters woken by one release, or first looks at a name never
    /// held: exactly one wins it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_of_many_woken_looks_wins_a_released_row() {
        let (server, ctx) = connected().await;
        // First looks at a name never held: exactly one inserts its row.
        let looks = (1..=8).map(|i| {
            let ctx = &ctx;
            async move { ctx.take_released("fresh", i, "w").await }
        });
        let wins: Vec<i64> = futures::future::join_all(looks)
            .await
            .into_iter()
            .filter_map(|r| r.expect("answers").1)
            .collect();
        assert_eq!(wins.len(), 1, "never held: winners {wins:?}");
        for round in 0..5_i64 {
            let base = round * 100;
            let seen = ctx.read_one("jobs").await.expect("read");
            let take = Take::new("jobs", base, &seen).expect("take");
            assert_eq!(ctx.claim_many(&[take], "a").await.expect("claim").len(), 1);
            ctx.release_many(&[("jobs", base)]).await.expect("release");
            let looks = (1..=8).map(|i| {
                let ctx = &ctx;
                async move { ctx.take_released("jobs", base + i, "w").await }
            });
            let wins: Vec<i64> = futures::future::join_all(looks)
                .await
                .into_iter()
                .filter_map(|r| r.expect("answers").1)
                .collect();
            assert_eq!(wins.len(), 1, "round {round}: winners {wins:?}");
            let nonce = server
                .sql("SELECT nonce FROM election.leases WHERE name = 'jobs'")
                .expect("nonce");
            ctx.release_many(&[("jobs", nonce.parse().expect("nonce"))])
                .await
                .expect("release the winner");
        }
    }

    /// The epoch of a woken look's win is above the record even when the
    /// sequence was set back by hand (rule 1); a row whose next epoch
    /// would pass the maximum is only read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_woken_look_stays_above_the_record_and_below_the_max() {
        let (server, ctx) = connected().await;
        let take = Take::new("jobs", 1, &Seen::default()).expect("take");
        ctx.claim_many(&[take], "a").await.expect("claim");
        ctx.release_many(&[("jobs", 1)]).await.expect("release");
        server
            .sql(
                "ALTER SEQUENCE election.epoch_seq RESTART WITH 2; \
                 UPDATE election.epochs SET epoch = 1000",
            )
            .expect("set back");
        let (_, won) = ctx.take_released("jobs", 2, "b").await.expect("look");
        assert_eq!(won, Some(1001), "one above the record");
        ctx.release_many(&[("jobs", 2)]).await.expect("release");
        server
            .sql(
                "UPDATE election.leases SET epoch = 9223372036854775807; \
                 UPDATE election.epochs SET epoch = 9223372036854775807",
            )
            .expect("to the max");
        let (seen, won) = ctx.take_released("jobs", 3, "c").await.expect("look");
        assert_eq!(won, None, "no epoch is left");
        assert!(matches!(
            Take::new("jobs", 3, &seen),
            Err(Error::Config(election_core::ConfigError::EpochExhausted))
        ));
    }

    #[tokio::test]
    async fn a_bad_url_is_unusable() {
        let err = PostgresStore::connect("postgres://a@b:notaport/c", PostgresOptions::default())
            .await
            .expect_err("not postgres");
        assert!(matches!(err, Error::Unusable { .. }), "{err:?}");
    }
}
