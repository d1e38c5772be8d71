//! Issue 42 (ADR 0108, 0120, 0121): the waiters' queue. A release passes
//! the term to (or wakes) the head of the name's queue, not every waiter:
//! counted as the claim tries each waiter's campaign makes (a wrapper of
//! the claim counts its `try_claim` calls, which with an hour's poll only
//! a wake-up can cause), and the waiters win in the order they queued. A
//! head waiter that died (a real process, SIGKILLed) is passed over; a
//! pass heard between waits is taken, one passed to a waiter that leaves
//! is released; waiters behind the head do not look at their polls.

use crate::common;
use crate::race;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use election_core::{
    Candidate, Claim, ElectionName, End, Identity, Leader, LeaderValue, TermReporter, WatchGuard,
    Won,
};
use election_postgres::{PostgresClaim, PostgresElection, PostgresOptions};
use postgres_testkit::Server;
use tokio::time::Instant;

const HOUR: Duration = Duration::from_secs(3600);
const SLACK: Duration = Duration::from_secs(60);

/// Long leases: no renewal of a waiter's row and no takeover in a test's
/// time; the requests as patient as the options allow.
fn options() -> PostgresOptions {
    PostgresOptions::new(Duration::from_secs(60), Duration::from_secs(20))
        .and_then(|o| o.with_request_timeout(Duration::from_secs(5)))
        .expect("options")
}

/// What a [`Counted`] claim's campaign did so far.
#[derive(Debug, Default)]
struct Counts {
    tries: AtomicUsize,
    waits: AtomicUsize,
}

/// A PostgreSQL claim whose tries and waits are counted.
#[derive(Debug)]
struct Counted {
    inner: PostgresClaim,
    counts: Arc<Counts>,
}

impl Claim for Counted {
    type Attempt = <PostgresClaim as Claim>::Attempt;

    fn name(&self) -> &ElectionName {
        self.inner.name()
    }

    fn identity(&self) -> &Identity {
        self.inner.identity()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn open(&self) -> Result<Self::Attempt, election_core::Error> {
        self.inner.open().await
    }

    async fn try_claim(
        &self,
        attempt: &mut Self::Attempt,
    ) -> Result<Option<Won>, election_core::Error> {
        self.counts.tries.fetch_add(1, Ordering::SeqCst);
        self.inner.try_claim(attempt).await
    }

    async fn wait(
        &self,
        attempt: &mut Self::Attempt,
        poll_interval: Duration,
    ) -> Result<(), election_core::Error> {
        self.counts.waits.fetch_add(1, Ordering::SeqCst);
        self.inner.wait(attempt, poll_interval).await
    }

    fn watch(
        &self,
        attempt: &mut Self::Attempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        self.inner.watch(attempt, won, reporter)
    }

    async fn confirm(&self, attempt: &mut Self::Attempt) -> Result<(), election_core::Error> {
        self.inner.confirm(attempt).await
    }

    async fn proclaim(
        &self,
        attempt: &mut Self::Attempt,
        value: &LeaderValue,
    ) -> Result<(), election_core::Error> {
        self.inner.proclaim(attempt, value).await
    }

    async fn release(&self, attempt: &mut Self::Attempt) -> Result<(), election_core::Error> {
        self.inner.release(attempt).await
    }

    fn close(&self, attempt: Self::Attempt, end: End) {
        self.inner.close(attempt, end);
    }

    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        self.inner.leader().await
    }
}

/// The waiter rows of `jobs`, or `None` before the queue (schema version
/// 6) existed.
fn queued(server: &Server) -> Option<i64> {
    let exists = server
        .sql("SELECT to_regclass('election.waiters') IS NOT NULL")
        .expect("read");
    (exists == "t").then(|| {
        server
            .sql("SELECT count(*) FROM election.waiters WHERE name = 'jobs'")
            .expect("waiters")
            .parse()
            .expect("a count")
    })
}

/// `a` leads `jobs` on an election of its own, opened with `options`.
async fn a_leads(
    server: &Server,
    options: PostgresOptions,
) -> (PostgresElection, election_core::Term<PostgresClaim>) {
    let holder = race::election(&server.url(), "holder", options).await;
    let a = holder
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    (holder, a)
}

/// What a chain of handovers did: the tries the waiters made from the
/// first release on, and who won, in order.
struct Chain {
    tries: usize,
    order: Vec<String>,
}

/// `a` leads `jobs`; then the waiters of `processes` (one election, as one
/// process's session, per entry, with that many waiters) start one at a
/// time, each queued before the next starts (its campaign waits with an
/// hour's poll). Then `a` resigns, and every winner resigns at once, until
/// each waiter won once.
async fn chain(server: &Server, processes: &[usize]) -> Chain {
    let (_holder, a) = a_leads(server, options()).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut elections: Vec<PostgresElection> = Vec::new();
    let mut counts: Vec<Arc<Counts>> = Vec::new();
    let mut tasks = Vec::new();
    for (p, &waiters) in processes.iter().enumerate() {
        let e = race::election(&server.url(), &format!("p{p}"), options()).await;
        for i in 0..waiters {
            let id = format!("p{p}w{i}");
            let c = Arc::new(Counts::default());
            let candidate = Candidate::new(Counted {
                inner: e.claim("jobs", &id).expect("claim"),
                counts: c.clone(),
            })
            .with_poll_interval(HOUR)
            .expect("poll");
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let term = candidate.campaign().await.expect("wins");
                order.lock().expect("order").push(id);
                term.resign().await.expect("resign");
            }));
            // Settled: its first try, and (the first waiter of its
            // process) the look its process's listener makes once it
            // listens; then in its wait for good.
            let expected = if i == 0 { 2 } else { 1 };
            let deadline = Instant::now() + SLACK;
            while c.tries.load(Ordering::SeqCst) < expected
                || c.waits.load(Ordering::SeqCst) < expected
            {
                assert!(Instant::now() < deadline, "p{p}w{i} never settled: {c:?}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // And in the queue, where there is one (the code before it
            // had none).
            let rows = i64::try_from(counts.len() + 1).expect("a few");
            let deadline = Instant::now() + SLACK;
            while queued(server).is_some_and(|n| n < rows) {
                assert!(Instant::now() < deadline, "p{p}w{i} never queued");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            counts.push(c);
        }
        elections.push(e);
    }
    let settled: usize = counts.iter().map(|c| c.tries.load(Ordering::SeqCst)).sum();
    a.resign().await.expect("resign");
    for task in tasks {
        match tokio::time::timeout(SLACK, task).await {
            Ok(done) => done.expect("task"),
            Err(_) => panic!(
                "not every waiter won within a minute: won {:?}; tries {:?}; waiter rows {:?}",
                order.lock().expect("order"),
                counts
                    .iter()
                    .map(|c| c.tries.load(Ordering::SeqCst))
                    .collect::<Vec<_>>(),
                server.sql("SELECT string_agg(nonce || ':' || seq || ':' || channel, ' ' ORDER BY seq) FROM election.waiters"),
            ),
        }
    }
    let tries: usize = counts.iter().map(|c| c.tries.load(Ordering::SeqCst)).sum();
    let order = order.lock().expect("order").clone();
    Chain {
        tries: tries - settled,
        order,
    }
}

/// Ten waiters, five processes with one each and one with five: each
/// release (ten, the leader's and then each winner's) makes exactly one
/// claim, the head's (before the queue, each release woke every waiter
/// left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_with_ten_waiters_makes_one_claim() {
    let server = common::server();
    let c = chain(&server, &[1, 1, 1, 1, 1, 5]).await;
    eprintln!(
        "10 releases with 10, 9, .., 1 waiters made {} claim tries",
        c.tries
    );
    assert_eq!(
        c.tries, 10,
        "10 releases with 10, 9, .., 1 waiters made {} claim tries, not one each",
        c.tries
    );
}

/// Waiters win in the order they queued (first come, first served),
/// across processes and within one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_win_in_the_order_they_queued() {
    let server = common::server();
    let c = chain(&server, &[2, 1, 3]).await;
    let queued = ["p0w0", "p0w1", "p1w0", "p2w0", "p2w1", "p2w2"];
    eprintln!("queued {queued:?}, won {:?}", c.order);
    assert_eq!(c.order, queued, "the order of the wins");
}

/// Set in the child: the server's URL.
const CHILD_URL: &str = "ELECTION_POSTGRES_WAITER_CHILD_URL";

/// The child's part: a waiter of `jobs` (poll 200 ms) that only does
/// anything when run as the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let e = race::election(&url, "child", backstop_options()).await;
    let term = e
        .candidate("jobs", "child")
        .expect("candidate")
        .with_poll_interval(POLL)
        .expect("poll")
        .campaign()
        .await
        .expect("the child wins");
    println!("WON {}", term.epoch());
    tokio::time::sleep(HOUR).await;
}

/// The backstop test's poll interval.
const POLL: Duration = Duration::from_millis(200);

/// TTL 20 s: a dead waiter's row stays in the queue past the test's
/// bound.
fn backstop_options() -> PostgresOptions {
    PostgresOptions::new(Duration::from_secs(20), Duration::from_secs(5))
        .and_then(|o| o.with_request_timeout(Duration::from_secs(2)))
        .expect("options")
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The head waiter is a process of its own, SIGKILLed just before the
/// holder resigns (its row stays in the queue until it expires, a TTL of
/// 20 s later): once the server has seen its connection close, the
/// release passes the term to the waiter behind it (ADR 0120), well
/// within a few poll intervals (200 ms). Before, the release woke the
/// dead head and the waiter behind took the name by the backstop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_head_waiter_is_passed_over() {
    let server = common::server();
    let (_holder, a) = a_leads(&server, backstop_options()).await;
    let child = Killed(
        Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "queue::waiter_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_URL, server.url())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child"),
    );
    let until_queued = async |n: i64, who: &str| {
        let deadline = Instant::now() + SLACK;
        while queued(&server) != Some(n) {
            assert!(Instant::now() < deadline, "{who} never queued");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    until_queued(1, "the child").await;
    let behind = race::election(&server.url(), "behind", backstop_options()).await;
    let mut waiters = Vec::new();
    for (rows, id) in [(2, "b"), (3, "c")] {
        let candidate = behind
            .candidate("jobs", id)
            .expect("candidate")
            .with_poll_interval(POLL)
            .expect("poll");
        waiters.push(tokio::spawn(async move {
            let term = candidate.campaign().await.expect("wins");
            (id, term)
        }));
        until_queued(rows, id).await;
    }
    let mut child = child;
    child.0.kill().expect("SIGKILL the head waiter");
    child.0.wait().expect("reaped");
    // Its server process sees the connection close and ends (the instant
    // before that, a release would pass it the term, ADR 0120).
    let deadline = Instant::now() + SLACK;
    while server
        .sql(
            "SELECT count(*) FROM election.waiters w \
             WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid)",
        )
        .expect("waiters")
        != "1"
    {
        assert!(
            Instant::now() < deadline,
            "the child's server process never ended"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let resigned = Instant::now();
    a.resign().await.expect("resign");
    let (won, _, rest) = tokio::time::timeout(SLACK, futures::future::select_all(waiters))
        .await
        .expect("someone took the name within a minute");
    let (id, term) = won.expect("task");
    let took = resigned.elapsed();
    eprintln!("{id} took the name {took:?} after the resign (poll {POLL:?}, TTL 20 s)");
    assert!(term.epoch() > a.epoch());
    assert!(
        took < Duration::from_secs(5),
        "{id} took the name {took:?} after the resign: the dead head waiter held it up"
    );
    for w in rest {
        w.abort();
    }
    term.resign().await.expect("resign");
}

/// A waiter row's write commits without waiting for its WAL flush (ADR
/// 0108: the queue is advice), while the win that takes it out of the
/// queue is the claim's own durable commit: a deferred trigger records
/// `synchronous_commit` as each change of a waiter row commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_rows_write_does_not_wait_for_the_flush() {
    let server = common::server();
    let e = race::election(&server.url(), "waiting", options()).await;
    server
        .sql(
            "CREATE TABLE commit_log (n serial PRIMARY KEY, op text, sync text); \
             CREATE FUNCTION log_commit() RETURNS trigger LANGUAGE plpgsql AS $f$ \
             BEGIN INSERT INTO commit_log (op, sync) \
             VALUES (TG_OP, current_setting('synchronous_commit')); \
             RETURN NULL; END $f$; \
             CREATE CONSTRAINT TRIGGER log_commit AFTER INSERT OR UPDATE OR DELETE \
             ON election.waiters DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
             EXECUTE FUNCTION log_commit()",
        )
        .expect("the commit log");
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(HOUR)
        .expect("poll");
    let b = tokio::spawn(async move { b.campaign().await.expect("b wins") });
    let deadline = Instant::now() + SLACK;
    while queued(&server) != Some(1) {
        assert!(Instant::now() < deadline, "b never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.resign().await.expect("resign");
    let b = tokio::time::timeout(SLACK, b)
        .await
        .expect("b woken by the release")
        .expect("task");
    assert_eq!(
        server
            .sql("SELECT string_agg(op || ':' || sync, ' ' ORDER BY n) FROM commit_log")
            .expect("the log"),
        "INSERT:off DELETE:on",
        "synchronous_commit at each commit of b's row: queued, won"
    );
    b.resign().await.expect("resign");
}

/// A release that lands between a waiter's look (the name held) and its
/// first wait finds no row of it in line, so it wakes nobody; the wait
/// then looks at once (its row's write saw the release), never a poll
/// later. Before, the new waiter slept until its poll (with `elect run`'s
/// 250 ms: a handover to a single new waiter took 313 ms, median, in
/// `election-bench --only cli-waiters`, against 12 ms with ten waiters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_before_the_first_wait_is_looked_at_once() {
    let server = common::server();
    let (term, claim, mut attempt, _h, _w) = b_looked(&server).await;
    term.resign().await.expect("a resigns");
    let waited = tokio::time::timeout(SLACK, claim.wait(&mut attempt, HOUR)).await;
    assert!(
        waited.is_ok(),
        "the first wait after a release it was not in line for slept past {SLACK:?} (its poll is an hour)"
    );
    let won = claim.try_claim(&mut attempt).await;
    assert!(matches!(won, Ok(Some(_))), "the look after it: {won:?}");
    claim.close(attempt, End::Dropped);
}

/// `elect run`'s pattern: its campaign's future beside a read of the
/// leader, which it awaits when `on_wait` says the campaign first waits
/// (to say whom it waits for), while that future is not polled. The
/// campaign's first wait had just asked the process's session for its
/// queue write, and the session had lent its one connection to that
/// request, which nobody polled during the read: the read waited behind it
/// for its whole bound (PoolExhausted at the request timeout), the queue
/// write then had no time left (cut off, the waiter fell back to the
/// name's channel), and a release in that time woke nobody. In
/// `election-bench --only cli-waiters` (TTL 3 s, requests 500 ms), a
/// handover to a single waiter started 100 ms before the release took
/// 314-425 ms, against 9-27 ms before the queue. Now the session takes an
/// offer not taken back after 2 ms when another request waits: the read
/// answers at once, the waiter is in line, and a release wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_beside_an_unpolled_campaign_is_not_held_up() {
    let server = common::server();
    let request_timeout = options().request_timeout();
    let (_holder, a) = a_leads(&server, options()).await;
    let waiter = race::election(&server.url(), "waiter", options()).await;
    let first_wait = Arc::new(tokio::sync::Notify::new());
    let candidate = waiter
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(HOUR)
        .expect("poll")
        .on_wait({
            let first_wait = first_wait.clone();
            move || first_wait.notify_one()
        });
    let mut campaign = std::pin::pin!(candidate.campaign());
    let mut read = None;
    let mut resigned = None;
    let term = loop {
        tokio::select! {
            term = &mut campaign => break term.expect("b wins"),
            () = first_wait.notified(), if read.is_none() => {
                // As `elect run`: awaited here, the campaign not polled.
                let started = Instant::now();
                let leader = candidate.leader().await;
                read = Some((leader, started.elapsed()));
            }
            // Then, with the campaign polled again, the release once b is
            // in line.
            () = tokio::time::sleep(Duration::from_millis(5)), if read.is_some() && resigned.is_none() => {
                if queued(&server) == Some(1) {
                    a.resign().await.expect("a resigns");
                    resigned = Some(Instant::now());
                }
            }
        }
    };
    let took = resigned.expect("resigned").elapsed();
    let (leader, read_took) = read.expect("read");
    eprintln!("the read took {read_took:?}; b won {took:?} after the release");
    let leader = leader.expect("the read beside the campaign answers");
    assert_eq!(
        leader.map(|l| l.identity.as_str().to_owned()).as_deref(),
        Some("a"),
        "the leader read"
    );
    assert!(
        read_took < request_timeout / 2,
        "the read took {read_took:?} (request timeout {request_timeout:?})"
    );
    assert!(
        took < request_timeout,
        "b won {took:?} after the release (request timeout {request_timeout:?})"
    );
    term.resign().await.expect("resign");
}

/// The holder of `jobs` as the row shows it (`-` when released).
fn holder(server: &Server) -> String {
    server
        .sql("SELECT coalesce(holder, '-') FROM election.leases WHERE name = 'jobs'")
        .expect("the row")
}

/// What [`b_looked`] returns: the term of `a`, b's claim and attempt,
/// and the two elections (a's and b's sides).
type Looked = (
    election_core::Term<PostgresClaim>,
    PostgresClaim,
    <PostgresClaim as Claim>::Attempt,
    PostgresElection,
    PostgresElection,
);

/// `a` leads `jobs`; `b`'s attempt, on a side of its own, has looked once
/// (held) and not waited yet.
async fn b_looked(server: &Server) -> Looked {
    let (holder_side, a) = a_leads(server, options()).await;
    let waiter_side = race::election(&server.url(), "waiter", options()).await;
    let claim = waiter_side.claim("jobs", "b").expect("b");
    let mut attempt = claim.open().await.expect("open");
    let looked = claim.try_claim(&mut attempt).await;
    assert!(
        matches!(looked, Ok(None)),
        "b's look while a leads: {looked:?}"
    );
    (a, claim, attempt, holder_side, waiter_side)
}

/// [`b_looked`], then one wait that queues b and returns at its short
/// poll.
async fn b_in_line(server: &Server) -> Looked {
    let (a, claim, mut attempt, holder_side, waiter_side) = b_looked(server).await;
    claim
        .wait(&mut attempt, Duration::from_millis(1))
        .await
        .expect("b waits");
    assert_eq!(queued(server), Some(1), "b is in line");
    (a, claim, attempt, holder_side, waiter_side)
}

/// A pass that reaches the head between its waits (ADR 0120) is taken at
/// its next try: the epoch the row shows, and a term
/// that confirms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_heard_between_waits_is_taken_at_the_next_try() {
    let server = common::server();
    let (a, claim, mut attempt, _h, _w) = b_in_line(&server).await;
    a.resign().await.expect("a resigns");
    assert_eq!(holder(&server), "b", "a's release passed b the term");
    let epoch: u64 = server
        .sql("SELECT epoch FROM election.leases WHERE name = 'jobs'")
        .expect("epoch")
        .parse()
        .expect("a number");
    // The pass's notification reaches b's session while b is not waiting.
    let deadline = Instant::now() + SLACK;
    let won = loop {
        match claim.try_claim(&mut attempt).await {
            Ok(Some(won)) => break won,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "b never took its term: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    assert_eq!(won.epoch.get(), epoch, "b's term is the one passed");
    assert!(won.valid_until.is_some_and(|v| v > Instant::now()));
    claim
        .confirm(&mut attempt)
        .await
        .expect("b's term confirms");
    claim.release(&mut attempt).await.expect("b releases");
    assert_eq!(holder(&server), "-");
    claim.close(attempt, End::Resigned);
}

/// A waiter that leaves (its attempt closed) after a release passed it the
/// term it never took up releases that term (ADR 0120): the name is free
/// at once, not a TTL (a minute here) later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_leaves_releases_a_term_passed_to_it() {
    let server = common::server();
    let (a, claim, attempt, _h, _w) = b_in_line(&server).await;
    a.resign().await.expect("a resigns");
    assert_eq!(holder(&server), "b", "a's release passed b the term");
    claim.close(attempt, End::Dropped);
    let deadline = Instant::now() + SLACK;
    while holder(&server) != "-" {
        assert!(
            Instant::now() < deadline,
            "the term passed to b, who left, was never released"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waiters behind the head of the line send no look at their polls while
/// a term holds the name (ADR 0120): their rows' renewals say so. The
/// head still looks at every poll. Seen as each waiter's session's last
/// statement in `pg_stat_activity`, sampled across many polls: the head's
/// is its look (a read), the one behind's its row's write. Before, both
/// read at every poll (30 waiters at `elect run`'s 250 ms made 120 reads
/// a second beside a handover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_behind_the_head_send_no_look_at_their_polls() {
    let server = common::server();
    let options = || {
        PostgresOptions::new(Duration::from_secs(30), Duration::from_secs(10))
            .and_then(|o| o.with_request_timeout(Duration::from_secs(5)))
            .expect("options")
    };
    let (_holder, a) = a_leads(&server, options()).await;
    let poll = Duration::from_millis(20);
    let mut elections = Vec::new();
    let mut tasks = Vec::new();
    for (rows, id) in [(1, "b"), (2, "c")] {
        let e = race::election(&server.url(), id, options()).await;
        let candidate = e
            .candidate("jobs", id)
            .expect("candidate")
            .with_poll_interval(poll)
            .expect("poll");
        tasks.push(tokio::spawn(async move { candidate.campaign().await }));
        let deadline = Instant::now() + SLACK;
        while queued(&server) != Some(rows) {
            assert!(Instant::now() < deadline, "{id} never queued");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        elections.push(e);
    }
    let last = |place: &str| {
        server
            .sql(&format!(
                "SELECT left(a.query, 20) FROM pg_stat_activity a \
                 WHERE a.pid = (SELECT pid FROM election.waiters ORDER BY seq {place} LIMIT 1)"
            ))
            .expect("pg_stat_activity")
    };
    let (mut head_read, mut behind_read) = (0, 0);
    for _ in 0..10 {
        tokio::time::sleep(poll * 3).await;
        head_read += usize::from(last("ASC").starts_with("SELECT k.name"));
        behind_read += usize::from(last("DESC").starts_with("SELECT k.name"));
    }
    eprintln!(
        "of 10 samples, the head's last statement was a read {head_read} times, c's {behind_read}"
    );
    assert!(head_read > 0, "the head never looked at its polls");
    assert_eq!(behind_read, 0, "c, behind the head, looked at its polls");
    for t in tasks {
        t.abort();
    }
    a.resign().await.expect("resign");
}
