//! One process's session with one PostgreSQL server (ADR 0105): every
//! [`PostgresStore`](crate::store::context::PostgresStore) opened with the
//! same connect options (server, database, user, application name, session
//! options) in this process shares one [`Session`], found in a
//! process-global registry that holds it weakly. The session is one
//! connection, owned by one task: it runs the election statements of every
//! election, claim, lease set and observer of the process, and between
//! them it `LISTEN`s on their channels and fans the notifications out.
//!
//! A request borrows the connection: the task offers it (the whole
//! `PgListener`) to the first request of its queue ([`Turn`]), and gets it
//! back when the request is done with it, or dropped (a cancelled request
//! hands back a connection in the middle of a statement; sqlx reads what
//! is left of its answer before the next statement). An offer that its
//! request has not taken after [`TAKE_BACK_AFTER`] while another request
//! waits is taken back and made again after the requests that wait: a
//! request future that nobody polls (its owner awaits something else,
//! perhaps a request of this very session) never holds up the session. So that no statement holds the
//! session longer than its request's bound (one waiting for a row lock
//! would hold up every election of the process until the lock is
//! released), the server ends it then: the connection's
//! `statement_timeout` is the request timeout ([`StatementTimeout`]).
//! Renewals, commit-point checks, proclaims and releases queue ahead of
//! everything else ([`Priority::Urgent`]), and every request is bounded by
//! its caller's deadline, the wait in the queue included: a renewal
//! waits only behind the statement that runs and the urgent requests
//! queued before it (each ended by the server at its request timeout),
//! and its validity is counted from before it was queued (its caller
//! takes the instant first).
//!
//! When the connection fails, the task drops it, connects again at the
//! next request (or, while something listens, after [`RECONNECT_PAUSE`]),
//! and wakes every subscriber ([`Wake::All`]), as the listener did before.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{Acquire, PgConnection, PgPool};
use tokio::sync::{Notify, broadcast, mpsc, oneshot};
use tokio::time::Instant;

use crate::error::Error;
use crate::store::close::LastRelease;
use crate::store::wake::{CAPACITY, Heard, UNUSED_GRACE, Wake};

/// The pause before the session connects again to listen after a failure.
pub(crate) const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// How long the connect of a session to listen (no request waiting for it)
/// may take.
const LISTEN_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an offer of the connection to a request may stay untaken
/// while another request waits, before the task takes it back and serves
/// the waiting ones first. A request that is polled takes its offer within
/// microseconds of being woken; one that is not (its owner awaits
/// something else: `elect run` read the leader while its campaign's queue
/// write had the offer, and that read waited behind it for its whole
/// bound, 500 ms) no longer holds the session.
pub(crate) const TAKE_BACK_AFTER: Duration = Duration::from_millis(2);

/// The `statement_timeout` of the connection of a one-connection pool,
/// as this crate last set it: the server ends a statement that runs (or
/// waits for a lock) longer, so a request that timed out never leaves
/// its statement holding up the next one on that connection for longer
/// than its own bound. Set only when a request wants another value than
/// the connection has (one round trip, at a connection's first request in
/// a process whose elections share their options); forgotten when the
/// pool connects again.
#[derive(Debug, Default)]
pub(crate) struct StatementTimeout {
    /// In milliseconds; 0: not set on this connection (the server's
    /// default) or not known (a `SET` cut off).
    ms: AtomicU64,
}

impl StatementTimeout {
    /// `options` with a hook that forgets the setting at each connect.
    pub(crate) fn forgotten_at_connect(self: &Arc<Self>, options: PgPoolOptions) -> PgPoolOptions {
        let cell = self.clone();
        options.after_connect(move |_, _| {
            cell.ms.store(0, Ordering::Release);
            Box::pin(async { Ok(()) })
        })
    }

    /// Sets `conn`'s `statement_timeout` to `bound` (at least 1 ms) unless
    /// it is already.
    ///
    /// Cancel safety: cancel safe (cut off, the setting is not known and
    /// is set again at the next request).
    pub(crate) async fn apply(
        &self,
        conn: &mut PgConnection,
        bound: Duration,
    ) -> Result<(), Error> {
        let ms = u64::try_from(bound.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, i32::MAX as u64);
        if self.ms.load(Ordering::Acquire) == ms {
            return Ok(());
        }
        self.ms.store(0, Ordering::Release);
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET statement_timeout = {ms}")))
            .execute(conn)
            .await?;
        self.ms.store(ms, Ordering::Release);
        Ok(())
    }
}

/// Which queue a request joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Priority {
    /// Reads and claims: first come, first served.
    Normal,
    /// Renewals, commit-point checks, proclaims and releases: served
    /// before every normal request that waits.
    Urgent,
}

/// What the session's task is asked.
enum Msg {
    /// Lend the connection to a request.
    Ask(Ask),
    /// Listen on a channel (and wake every subscriber once it does).
    Listen(Arc<str>),
    /// Stop listening [`UNUSED_GRACE`] from now if nobody subscribes then.
    PauseIfUnused,
    /// Close the connection and end the task.
    Shut(oneshot::Sender<()>),
    /// Tell the channels subscribers asked for (the task listens on them
    /// whenever it is connected), sorted.
    #[cfg(test)]
    Wanted(oneshot::Sender<Vec<Arc<str>>>),
}

/// A request's turn: the connection is offered through `turn` unless the
/// deadline has passed. Dropped by the task unserved (the session shut),
/// it tells the request so.
struct Ask {
    deadline: Instant,
    bound: Duration,
    probe_after: Duration,
    priority: Priority,
    turn: Arc<Turn>,
}

impl Drop for Ask {
    fn drop(&mut self) {
        self.turn.fail(closed());
    }
}

/// Where the session's task offers its connection to one request, and
/// the request takes it. The task takes back an offer not taken yet when
/// other requests wait ([`TAKE_BACK_AFTER`]), and makes it again later.
#[derive(Default)]
struct Turn {
    offer: Mutex<Offer>,
    ready: Notify,
}

/// Where one request's turn is.
#[derive(Default)]
enum Offer {
    /// Not offered yet, or taken back to be offered again.
    #[default]
    Waiting,
    /// Offered, not taken yet.
    Offered(Lent),
    /// Taken by the request (or nothing more to take).
    Taken,
    /// The task could not lend it: the request's answer.
    Failed(Error),
    /// The request gave up.
    Abandoned,
}

impl Turn {
    /// Offers `lent`; if the request gave up, `lent` goes back to the
    /// task at once (dropped).
    fn offer(&self, lent: Lent) {
        let mut offer = lock(&self.offer);
        if !matches!(*offer, Offer::Waiting) {
            drop(offer);
            drop(lent);
            return;
        }
        *offer = Offer::Offered(lent);
        drop(offer);
        self.ready.notify_one();
    }

    /// Tells a request still waiting that it gets no connection: `e`.
    fn fail(&self, e: Error) {
        let mut offer = lock(&self.offer);
        if matches!(*offer, Offer::Waiting) {
            *offer = Offer::Failed(e);
            drop(offer);
            self.ready.notify_one();
        }
    }

    /// The offer back from a request that did not take it.
    fn take_back(&self) -> Option<Lent> {
        let mut offer = lock(&self.offer);
        match std::mem::take(&mut *offer) {
            Offer::Offered(lent) => Some(lent),
            other => {
                *offer = other;
                None
            }
        }
    }

    /// The request's answer, if there is one yet.
    fn take(&self) -> Option<Result<Lent, Error>> {
        let mut offer = lock(&self.offer);
        match std::mem::replace(&mut *offer, Offer::Taken) {
            Offer::Offered(lent) => Some(Ok(lent)),
            Offer::Failed(e) => Some(Err(e)),
            other => {
                *offer = other;
                None
            }
        }
    }
}

/// A request's side of its [`Turn`]: dropped (answered, cut off or timed
/// out), the request gives up, and an offer it did not take goes back.
struct Taking(Arc<Turn>);

impl Drop for Taking {
    fn drop(&mut self) {
        let offer = std::mem::replace(&mut *lock(&self.0.offer), Offer::Abandoned);
        // An offer not taken: back to the task (outside the lock).
        drop(offer);
    }
}

/// The session's connection, lent to one request: handed back to the
/// session's task when dropped.
pub(crate) struct Lent {
    listener: Option<PgListener>,
    broken: bool,
    back: Option<oneshot::Sender<(PgListener, bool)>>,
    timeout: Arc<StatementTimeout>,
}

impl Lent {
    /// The connection (connecting again first if the listener lost it),
    /// on which the server ends a statement that takes longer than
    /// `statement_timeout` ([`StatementTimeout`]).
    pub(crate) async fn conn(
        &mut self,
        statement_timeout: Duration,
    ) -> Result<&mut PgConnection, Error> {
        let listener = self.listener.as_mut().expect("a lent session");
        let conn = listener.acquire().await?;
        self.timeout.apply(&mut *conn, statement_timeout).await?;
        Ok(conn)
    }

    /// Marks the connection gone: the task drops it and connects again.
    pub(crate) fn broken(&mut self) {
        self.broken = true;
    }

    /// The connection, back to the task that offered it (not through
    /// `back`).
    fn into_listener(mut self) -> PgListener {
        self.back = None;
        self.listener.take().expect("a lent session")
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let (Some(listener), Some(back)) = (self.listener.take(), self.back.take()) {
            let _ = back.send((listener, self.broken));
        }
    }
}

/// One process's session with one server (see the module docs).
#[derive(Debug)]
pub(crate) struct Session {
    normal: mpsc::UnboundedSender<Msg>,
    urgent: mpsc::UnboundedSender<Msg>,
    heard: broadcast::Sender<Heard>,
    /// When this process's last release was answered: a close waits the
    /// grace after it (ADR 0086).
    pub(crate) last_release: Arc<LastRelease>,
    /// The schemas whose statements are readied on the current connection
    /// (ADR 0075); emptied when the connection is replaced.
    readied: Arc<Mutex<HashSet<Arc<str>>>>,
    /// How many elections opened on this session are not closed.
    users: AtomicUsize,
    /// Whether the task was told to shut.
    shut: AtomicBool,
    /// The one connection beside the session (lazy: opened at its first
    /// use) for what may run long and must not hold up the session's
    /// renewals: a lease set's reads and claims of its batches, and the
    /// background releases (ADR 0105).
    pub(crate) side: PgPool,
    /// The `statement_timeout` of the side connection.
    pub(crate) side_timeout: Arc<StatementTimeout>,
    /// This session's own channel (ADR 0108): a release notifies on it
    /// the head of a name's waiters' queue when that waiter is of this
    /// process. Listened on while a waiter of this process is in line.
    pub(crate) wake_channel: Arc<str>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Msg::Ask(_) => "Ask",
            Msg::Listen(_) => "Listen",
            Msg::PauseIfUnused => "PauseIfUnused",
            Msg::Shut(_) => "Shut",
            #[cfg(test)]
            Msg::Wanted(_) => "Wanted",
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The sessions of this process, by connect options.
static SESSIONS: LazyLock<Mutex<HashMap<String, Weak<Session>>>> = LazyLock::new(Mutex::default);

/// What tells two sessions apart: everything of the connect options that
/// the server sees, and `credential`, a hash of how the session proves who
/// it is (the password the URL gives, or the application's pool whose
/// options it copies): an election opened with a wrong password never
/// rides on another's session, and fails as it would alone.
fn key_of(options: &PgConnectOptions, credential: u64) -> String {
    // The runtime too: a session's task dies with the runtime it was
    // spawned on, so an election opened on another runtime of the process
    // gets a session of its own.
    let runtime = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
    format!(
        "{runtime:?}|{credential:x}|{}|{}|{:?}|{}|{:?}|{:?}|{:?}|{:?}",
        options.get_host(),
        options.get_port(),
        options.get_socket(),
        options.get_username(),
        options.get_database(),
        options.get_application_name(),
        options.get_options(),
        options.get_ssl_mode(),
    )
}

/// The process's session for `options`: the one already open, or a new
/// one (its task spawned on the current runtime; connects at its first
/// request). Must be called inside a tokio runtime.
pub(crate) fn session_for(options: &PgConnectOptions, credential: u64) -> Arc<Session> {
    let key = key_of(options, credential);
    let mut sessions = lock(&SESSIONS);
    sessions.retain(|_, s| s.strong_count() > 0);
    if let Some(session) = sessions.get(&key).and_then(Weak::upgrade)
        && session.alive()
    {
        session.users.fetch_add(1, Ordering::AcqRel);
        return session;
    }
    let session = Arc::new(Session::spawn(options.clone()));
    session.users.fetch_add(1, Ordering::AcqRel);
    sessions.insert(key, Arc::downgrade(&session));
    session
}

impl Session {
    fn spawn(options: PgConnectOptions) -> Self {
        let (normal, normal_rx) = mpsc::unbounded_channel();
        let (urgent, urgent_rx) = mpsc::unbounded_channel();
        let heard = broadcast::channel(CAPACITY).0;
        let readied = Arc::new(Mutex::new(HashSet::new()));
        let task = Task {
            options,
            pool: None,
            listener: None,
            wanted: HashSet::new(),
            listening: HashSet::new(),
            heard: heard.clone(),
            pause_at: None,
            retry_at: None,
            readied: readied.clone(),
            timeout: Arc::default(),
            held: [VecDeque::new(), VecDeque::new()],
        };
        let side_timeout = Arc::<StatementTimeout>::default();
        let side = side_timeout
            .forgotten_at_connect(PgPoolOptions::new())
            .max_connections(1)
            .min_connections(0)
            .test_before_acquire(false)
            .acquire_timeout(LISTEN_CONNECT_TIMEOUT)
            .connect_lazy_with(task.options.clone());
        tokio::spawn(task.run(normal_rx, urgent_rx));
        Session {
            side,
            side_timeout,
            wake_channel: wake_channel(election_core::attempt_nonce()),
            normal,
            urgent,
            heard,
            last_release: Arc::default(),
            readied,
            users: AtomicUsize::new(0),
            shut: AtomicBool::new(false),
        }
    }

    /// Whether the task runs and was not told to shut.
    fn alive(&self) -> bool {
        !self.shut.load(Ordering::Acquire) && !self.normal.is_closed()
    }

    /// The connection, lent once the requests queued before this one (at
    /// `priority`) are done with it, connecting first if needed (probing
    /// the server's address after `probe_after`, see
    /// [`acquire`](crate::store::acquire::acquire)); within `bound` in all,
    /// else nothing was sent: [`Error::PoolExhausted`] (the session is
    /// busy) or the connect's failure. An offer this request does not take
    /// (it is not polled) is taken back after [`TAKE_BACK_AFTER`] while
    /// others wait, and made again after them; once taken, the connection
    /// is this request's until the [`Lent`] is dropped, so a request that
    /// took it must be polled to its end or dropped.
    ///
    /// Cancel safety: cancel safe (a connection lent meanwhile goes back).
    pub(crate) async fn lend(
        &self,
        priority: Priority,
        bound: Duration,
        probe_after: Duration,
    ) -> Result<Lent, Error> {
        let deadline = Instant::now() + bound;
        let turn = Arc::new(Turn::default());
        let queue = match priority {
            Priority::Normal => &self.normal,
            Priority::Urgent => &self.urgent,
        };
        let taking = Taking(turn.clone());
        queue
            .send(Msg::Ask(Ask {
                deadline,
                bound,
                probe_after,
                priority,
                turn,
            }))
            .map_err(|_| closed())?;
        loop {
            if let Some(answer) = taking.0.take() {
                return answer;
            }
            if tokio::time::timeout_at(deadline, taking.0.ready.notified())
                .await
                .is_err()
            {
                return taking
                    .0
                    .take()
                    .unwrap_or(Err(Error::PoolExhausted { after: bound }));
            }
        }
    }

    /// A receiver of every wake-up of this process's session from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Heard> {
        self.heard.subscribe()
    }

    /// Listens on `channel` (connecting if needed); once it listens, every
    /// subscriber is woken once.
    pub(crate) fn listen(&self, channel: Arc<str>) {
        let _ = self.normal.send(Msg::Listen(channel));
    }

    /// Stops listening [`UNUSED_GRACE`] from now if nobody of this process
    /// subscribes then (ADR 0071, 0094); the connection stays.
    pub(crate) fn pause_if_unused(&self) {
        let _ = self.normal.send(Msg::PauseIfUnused);
    }

    /// Whether `schema`'s statements still need readying on the current
    /// connection; marks them readied (a failed readying is not tried
    /// again until the connection is replaced).
    pub(crate) fn needs_readying(&self, schema: &Arc<str>) -> bool {
        lock(&self.readied).insert(schema.clone())
    }

    /// One election opened on this session was closed: the last one
    /// closes the connection (awaited) and ends the task.
    pub(crate) async fn closed_by_one(&self) {
        if self.users.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        self.shut.store(true, Ordering::Release);
        let (done, closed) = oneshot::channel();
        if self.urgent.send(Msg::Shut(done)).is_ok() {
            let _ = closed.await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), self.side.close()).await;
    }
}

/// The channel of a session whose id is `id` (ADR 0108): 30 bytes, within
/// PostgreSQL's 63 for a channel name whatever the schema, and never the
/// name of a schema's channel (`election:<schema>` has one `:`).
pub(crate) fn wake_channel(id: u64) -> Arc<str> {
    format!("election:wake:{id:016x}").into()
}

/// The error of a request to a session that was closed.
fn closed() -> Error {
    Error::Unavailable(sqlx::Error::PoolClosed)
}

/// The index of the urgent queue's held messages in [`Task::held`].
const URGENT: usize = 0;
/// The index of the normal queue's held messages.
const NORMAL: usize = 1;

/// The session's task and its state.
struct Task {
    options: PgConnectOptions,
    /// The one-connection pool of the current connection (each connection
    /// has its own: a connection dropped while a statement hangs never
    /// blocks the next).
    pool: Option<PgPool>,
    /// The connection, when the task has it (not lent, not gone).
    listener: Option<PgListener>,
    /// The channels subscribers asked for.
    wanted: HashSet<Arc<str>>,
    /// The channels the connection listens on.
    listening: HashSet<Arc<str>>,
    heard: broadcast::Sender<Heard>,
    pause_at: Option<Instant>,
    retry_at: Option<Instant>,
    readied: Arc<Mutex<HashSet<Arc<str>>>>,
    /// The `statement_timeout` of the connection.
    timeout: Arc<StatementTimeout>,
    /// Messages received while the connection was lent, by queue, in
    /// their order: served before the queues' next ones.
    held: [VecDeque<Msg>; 2],
}

/// What woke the task.
enum Event {
    Msg(Option<Msg>),
    Heard(Result<Option<sqlx::postgres::PgNotification>, sqlx::Error>),
    Pause,
    Retry,
}

impl Task {
    async fn run(
        mut self,
        mut normal: mpsc::UnboundedReceiver<Msg>,
        mut urgent: mpsc::UnboundedReceiver<Msg>,
    ) {
        loop {
            let receiving = !self.listening.is_empty();
            let event = if let Some(m) = self.held[URGENT].pop_front() {
                Event::Msg(Some(m))
            } else if !self.held[NORMAL].is_empty() {
                match urgent.try_recv() {
                    Ok(m) => Event::Msg(Some(m)),
                    Err(_) => Event::Msg(self.held[NORMAL].pop_front()),
                }
            } else {
                let listener = self.listener.as_mut();
                tokio::select! {
                    biased;
                    m = urgent.recv() => Event::Msg(m),
                    m = normal.recv() => Event::Msg(m),
                    n = async { listener.expect("connected").try_recv().await }, if receiving => Event::Heard(n),
                    () = async { tokio::time::sleep_until(self.pause_at.expect("set")).await }, if self.pause_at.is_some() => Event::Pause,
                    () = async { tokio::time::sleep_until(self.retry_at.expect("set")).await }, if self.retry_at.is_some() => Event::Retry,
                }
            };
            match event {
                Event::Msg(None) => break,
                Event::Msg(Some(Msg::Shut(done))) => {
                    self.drop_connection().await;
                    let _ = done.send(());
                    break;
                }
                Event::Msg(Some(Msg::Ask(ask))) => self.serve(ask, &mut urgent, &mut normal).await,
                Event::Msg(Some(Msg::Listen(channel))) => {
                    self.pause_at = None;
                    self.wanted.insert(channel);
                    self.listen_wanted().await;
                }
                #[cfg(test)]
                Event::Msg(Some(Msg::Wanted(tell))) => {
                    let mut wanted: Vec<Arc<str>> = self.wanted.iter().cloned().collect();
                    wanted.sort();
                    let _ = tell.send(wanted);
                }
                Event::Msg(Some(Msg::PauseIfUnused)) => {
                    if self.heard.receiver_count() == 0 {
                        self.pause_at = Some(Instant::now() + UNUSED_GRACE);
                    }
                }
                Event::Pause => {
                    self.pause_at = None;
                    if self.heard.receiver_count() == 0 {
                        self.wanted.clear();
                        if let Some(listener) = self.listener.as_mut()
                            && !self.listening.is_empty()
                        {
                            self.listening.clear();
                            if let Err(e) = listener.unlisten_all().await {
                                tracing::debug!(error = %e, "UNLISTEN failed");
                                self.lost();
                            }
                        }
                    }
                }
                Event::Retry => {
                    self.retry_at = None;
                    self.listen_wanted().await;
                }
                Event::Heard(Ok(Some(n))) => {
                    let _ = self.heard.send(Heard {
                        channel: n.channel().into(),
                        wake: Wake::Name(n.payload().into()),
                    });
                }
                // The connection dropped and sqlx connected again (and
                // listens again): notifications may be lost meanwhile, and
                // the new connection is not readied.
                Event::Heard(Ok(None)) => {
                    lock(&self.readied).clear();
                    self.wake_all();
                }
                Event::Heard(Err(e)) => {
                    tracing::debug!(error = %e, "notification listener failed; reconnecting");
                    self.lost();
                }
            }
        }
        self.drop_connection().await;
    }

    /// Wakes every subscriber: look at everything again.
    fn wake_all(&self) {
        let _ = self.heard.send(Heard {
            channel: "".into(),
            wake: Wake::All,
        });
    }

    /// Connects, probing the server's address after `probe_after`.
    async fn connect(&mut self, bound: Duration, probe_after: Duration) -> Result<(), Error> {
        let pool = self
            .timeout
            .forgotten_at_connect(PgPoolOptions::new())
            .max_connections(1)
            .min_connections(0)
            .idle_timeout(None)
            .max_lifetime(None)
            .test_before_acquire(false)
            .acquire_timeout(bound.max(Duration::from_millis(1)))
            .connect_lazy_with(self.options.clone());
        let connected = async {
            // The probing acquire says a refused connection at once (the
            // pool's own retries would hide it until its timeout).
            drop(crate::store::acquire::acquire_probing(&pool, bound, probe_after).await?);
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.ignore_pool_close_event(true);
            Ok::<_, Error>(listener)
        };
        let listener = match tokio::time::timeout(bound, connected).await {
            Ok(r) => r?,
            Err(_) => return Err(Error::TimedOut { after: bound }),
        };
        self.pool = Some(pool);
        self.listener = Some(listener);
        self.listening.clear();
        lock(&self.readied).clear();
        Ok(())
    }

    /// Lends the connection to `ask` and waits until it comes back, or
    /// takes it back if `ask` did not take it while others wait (see
    /// [`TAKE_BACK_AFTER`]); what the queues bring meanwhile is held.
    async fn serve(
        &mut self,
        ask: Ask,
        urgent: &mut mpsc::UnboundedReceiver<Msg>,
        normal: &mut mpsc::UnboundedReceiver<Msg>,
    ) {
        if matches!(*lock(&ask.turn.offer), Offer::Abandoned) {
            return;
        }
        let left = ask.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            ask.turn.fail(Error::PoolExhausted { after: ask.bound });
            return;
        }
        if self.listener.is_none() {
            if let Err(e) = self.connect(left, ask.probe_after).await {
                ask.turn.fail(e);
                return;
            }
            // Connected for a request: listen on what subscribers asked
            // too.
            self.listen_wanted().await;
            if self.listener.is_none() {
                ask.turn.fail(closed());
                return;
            }
        }
        let (back, mut returned) = oneshot::channel();
        let lent = Lent {
            listener: self.listener.take(),
            broken: false,
            back: Some(back),
            timeout: self.timeout.clone(),
        };
        // Refused (the request gave up meanwhile): the lent connection is
        // dropped, which sends it back at once.
        ask.turn.offer(lent);
        let offered = Instant::now();
        let mut open = (true, true);
        let mut may_take_back = true;
        let back = loop {
            let take_back_at =
                (may_take_back && self.holds_an_ask()).then_some(offered + TAKE_BACK_AFTER);
            tokio::select! {
                biased;
                r = &mut returned => break r,
                m = urgent.recv(), if open.0 => match m {
                    Some(m) => self.held[URGENT].push_back(m),
                    None => open.0 = false,
                },
                m = normal.recv(), if open.1 => match m {
                    Some(m) => self.held[NORMAL].push_back(m),
                    None => open.1 = false,
                },
                () = async { tokio::time::sleep_until(take_back_at.expect("set")).await }, if take_back_at.is_some() => {
                    may_take_back = false;
                    if let Some(lent) = ask.turn.take_back() {
                        // Not taken while others wait: its request is not
                        // polled (perhaps its owner awaits one of them).
                        // Offered again after what waits now.
                        self.listener = Some(lent.into_listener());
                        while let Ok(m) = urgent.try_recv() {
                            self.held[URGENT].push_back(m);
                        }
                        while let Ok(m) = normal.try_recv() {
                            self.held[NORMAL].push_back(m);
                        }
                        // Behind a request that waits: an urgent one
                        // behind the urgent ones if one waits there, else
                        // behind the normal ones.
                        let queue = if ask.priority == Priority::Urgent
                            && self.held[URGENT].iter().any(|m| matches!(m, Msg::Ask(_)))
                        {
                            URGENT
                        } else {
                            NORMAL
                        };
                        self.held[queue].push_back(Msg::Ask(ask));
                        return;
                    }
                }
            }
        };
        match back {
            Ok((listener, false)) => self.listener = Some(listener),
            Ok((listener, true)) => {
                self.listener = Some(listener);
                self.lost();
            }
            Err(_) => self.lost(),
        }
    }

    /// Whether a request waits among the messages held.
    fn holds_an_ask(&self) -> bool {
        self.held.iter().flatten().any(|m| matches!(m, Msg::Ask(_)))
    }

    /// Listens on every wanted channel not listened on yet (connecting
    /// first if needed), then wakes every subscriber once; after a failure
    /// tries again after [`RECONNECT_PAUSE`].
    async fn listen_wanted(&mut self) {
        if self.wanted.iter().all(|c| self.listening.contains(c)) {
            return;
        }
        if self.listener.is_none()
            && let Err(e) = self
                .connect(LISTEN_CONNECT_TIMEOUT, LISTEN_CONNECT_TIMEOUT / 2)
                .await
        {
            tracing::debug!(error = %e, "notification listener cannot connect; retrying");
            self.wake_all();
            self.retry_at = Some(Instant::now() + RECONNECT_PAUSE);
            return;
        }
        let missing: Vec<Arc<str>> = self
            .wanted
            .iter()
            .filter(|c| !self.listening.contains(*c))
            .cloned()
            .collect();
        let listener = self.listener.as_mut().expect("connected");
        for channel in missing {
            match listener.listen(&channel).await {
                Ok(()) => {
                    self.listening.insert(channel);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "LISTEN failed; retrying");
                    self.lost();
                    return;
                }
            }
        }
        self.wake_all();
    }

    /// The connection failed: dropped; every subscriber woken; connected
    /// again at the next request, or after [`RECONNECT_PAUSE`] while
    /// something listens.
    fn lost(&mut self) {
        self.listener = None;
        self.pool = None;
        self.listening.clear();
        lock(&self.readied).clear();
        self.wake_all();
        if !self.wanted.is_empty() {
            self.retry_at = Some(Instant::now() + RECONNECT_PAUSE);
        }
    }

    /// Closes the connection (its server process ends).
    async fn drop_connection(&mut self) {
        drop(self.listener.take());
        if let Some(pool) = self.pool.take() {
            // Bounded: a server that does not answer keeps its connection
            // until the socket is closed with the process.
            let _ = tokio::time::timeout(Duration::from_secs(2), pool.close()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    /// A session whose task runs but cannot connect (nothing listens on
    /// port 1, so it keeps trying to listen on what it is asked), with one
    /// user.
    fn unconnected() -> Session {
        let options =
            PgConnectOptions::from_str("postgres://nobody@127.0.0.1:1/none").expect("options");
        let session = Session::spawn(options);
        session.users.fetch_add(1, Ordering::AcqRel);
        session
    }

    /// The channels the session's task wants to listen on (`None`: the
    /// task ended).
    async fn wanted(session: &Session) -> Option<Vec<Arc<str>>> {
        let (tell, told) = oneshot::channel();
        session.normal.send(Msg::Wanted(tell)).ok()?;
        told.await.ok()
    }

    fn channel() -> Arc<str> {
        "election:test".into()
    }

    /// An unused listener stops listening after the grace, not at once
    /// (ADR 0094, 0105): its `UNLISTEN` is off the path of the term that
    /// left it unused. Before, `pause_if_unused` stopped it at once.
    #[tokio::test(start_paused = true)]
    async fn an_unused_listener_closes_after_the_grace_not_at_once() {
        let session = unconnected();
        session.listen(channel());
        assert_eq!(wanted(&session).await, Some(vec![channel()]), "started");
        let paused = Instant::now();
        session.pause_if_unused();
        assert_eq!(
            wanted(&session).await,
            Some(vec![channel()]),
            "stopped at once, within the term's start"
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while wanted(&session).await != Some(vec![]) {
            assert!(
                Instant::now() < deadline,
                "still listening 60 s after the grace"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            paused.elapsed() >= UNUSED_GRACE,
            "stopped {:?} after it was unused, within the grace",
            paused.elapsed()
        );
        // The next wait listens again.
        let _wakes = session.subscribe();
        session.listen(channel());
        assert_eq!(
            wanted(&session).await,
            Some(vec![channel()]),
            "listening again"
        );
        session.closed_by_one().await;
    }

    /// A subscriber that comes within the grace keeps the listener, and a
    /// listener still subscribed to is not paused at all.
    #[tokio::test(start_paused = true)]
    async fn a_subscriber_within_the_grace_keeps_the_listener() {
        let session = unconnected();
        session.listen(channel());
        session.pause_if_unused();
        let wakes = session.subscribe();
        tokio::time::sleep(UNUSED_GRACE * 3).await;
        assert_eq!(
            wanted(&session).await,
            Some(vec![channel()]),
            "stopped under a subscriber"
        );
        session.pause_if_unused();
        tokio::time::sleep(UNUSED_GRACE * 3).await;
        assert_eq!(
            wanted(&session).await,
            Some(vec![channel()]),
            "paused while subscribed to"
        );
        drop(wakes);
        session.closed_by_one().await;
        assert_eq!(wanted(&session).await, None, "stopped for good");
    }
}
