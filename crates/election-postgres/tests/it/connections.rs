//! The server's connections a process uses (issue 42, ADR 0105), counted
//! in `pg_stat_activity` by the `application_name` each test sets in its
//! connect URL: waiting candidates of one process share one session with
//! the leader's term; a waiting process holds one connection; a lease set
//! asking 10,000 keys holds at most two (the session, and one pool
//! connection for its claims).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use election_core::Term;
use election_postgres::{PostgresClaim, PostgresElection};
use postgres_testkit::Server;

use crate::common;

const HOUR: Duration = Duration::from_secs(3600);
/// Set in a child: the server's URL (with the test's application name).
const CHILD_URL: &str = "ELECTION_POSTGRES_CONNECTIONS_CHILD_URL";
/// The application name of another process's sessions, not counted.
const OTHER: &str = "pg42_other";

/// `server`'s URL with `application_name` set to `name`.
fn url_named(server: &Server, name: &str) -> String {
    format!("{}?application_name={name}", server.url())
}

/// How many client sessions `server` has, but the one counting: each test
/// starts its own server, so these are the test's processes'. `name`
/// narrows them to one `application_name` (`None`: all of them; the code
/// before ADR 0105 replaced a URL's application name with its own).
fn sessions(server: &Server, name: Option<&str>) -> i64 {
    let named = name.map_or(String::new(), |n| format!(" AND application_name = '{n}'"));
    // Not this query's own session, nor an earlier query's psql whose
    // backend is still ending (a sample taken just after one counted it).
    server
        .sql(&format!(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() \
             AND application_name <> 'psql'{named}"
        ))
        .expect("pg_stat_activity")
        .parse()
        .expect("a count")
}

/// How many client sessions `server` has but those of `other`'s
/// application name (and psql's), in one query: a difference of two
/// queries would count a session that opened or ended between them.
fn sessions_but(server: &Server, other: &str) -> i64 {
    server
        .sql(&format!(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() \
             AND application_name NOT IN ('psql', '{other}')"
        ))
        .expect("pg_stat_activity")
        .parse()
        .expect("a count")
}

/// The most sessions of `name` seen over `over`, sampled every 20 ms.
async fn most_sessions(server: &Server, name: Option<&str>, over: Duration) -> i64 {
    let until = tokio::time::Instant::now() + over;
    let mut most = 0;
    while tokio::time::Instant::now() < until {
        most = most.max(sessions(server, name));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    most
}

/// A candidate of `e` for `name` that waits (polling hourly) behind a
/// holder; returns once its first try found the name held.
async fn waiting(
    e: &PostgresElection,
    name: &str,
    identity: &str,
) -> tokio::task::JoinHandle<Term<PostgresClaim>> {
    let c = e
        .candidate(name, identity)
        .expect("candidate")
        .with_poll_interval(HOUR)
        .expect("poll");
    assert!(
        c.try_campaign().await.expect("answers").is_none(),
        "{name} is held"
    );
    tokio::spawn(async move { c.campaign().await.expect("wins") })
}

/// Ten candidates of one process (ten claims through
/// `PostgresElection::connect`, each waiting behind its election's
/// leader, one leader term of the same process among them) use one
/// connection: the session carries the leader's renewals, the waiters'
/// looks and the `LISTEN`. Before ADR 0105 the process held 9: a pool
/// growing to its 8 connections as the waiters looked at once, plus the
/// listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_waiting_candidates_of_one_process_share_one_connection() {
    let server = common::server();
    let name = "pg42_one_process";
    let url = url_named(&server, name);
    let e = PostgresElection::connect(&url, common::fast())
        .await
        .expect("connect");
    let leader = e
        .candidate("jobs", "leader")
        .expect("leader")
        .campaign()
        .await
        .expect("leads");
    let mut waiters = Vec::new();
    for i in 0..10 {
        // Every waiter's own election handle, as separate parts of an
        // application would open them.
        let mine = PostgresElection::connect(&url, common::fast())
            .await
            .expect("connect");
        waiters.push(waiting(&mine, "jobs", &format!("w{i}")).await);
    }
    let most = most_sessions(&server, None, Duration::from_secs(3)).await;
    assert!(
        most <= 1,
        "10 waiting candidates and a leader of one process held {most} connections, not 1"
    );
    assert!(
        !leader.is_lost(),
        "the leader renewed over the shared session"
    );
    // The waiters are woken by the release on the same session.
    leader.resign().await.expect("resign");
    let mut next = None;
    for w in &mut waiters {
        if let Ok(Ok(term)) = tokio::time::timeout(Duration::from_millis(100), &mut *w).await {
            next = Some(term);
            break;
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while next.is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no waiter was woken by the release"
        );
        for w in &mut waiters {
            if w.is_finished() {
                next = Some(w.await.expect("task"));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for w in waiters.iter().filter(|w| !w.is_finished()) {
        w.abort();
    }
    next.expect("a new leader").resign().await.expect("resign");
}

/// The child of [`ten_waiting_processes_hold_one_connection_each`]: one
/// candidate that waits behind the parent's leader, says `WAITING`, and
/// waits until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let e = PostgresElection::connect(&url, common::fast())
        .await
        .expect("connect");
    let w = waiting(&e, "jobs", &format!("p{}", std::process::id())).await;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "\nWAITING");
        let _ = out.flush();
    }
    let _ = tokio::time::timeout(Duration::from_secs(120), w).await;
}

/// Kills its child when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Ten processes, each with one waiting candidate, hold one connection
/// each (and the leader's process, with another name, one). Before ADR
/// 0105 a waiting process held three: the pool's two and the listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_waiting_processes_hold_one_connection_each() {
    let server = common::server();
    let name = "pg42_processes";
    let leader_side = PostgresElection::connect(&url_named(&server, "pg42_leader"), common::fast())
        .await
        .expect("connect");
    let leader = leader_side
        .candidate("jobs", "leader")
        .expect("leader")
        .campaign()
        .await
        .expect("leads");
    let mut children = Vec::new();
    for _ in 0..10 {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "connections::waiting_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_URL, url_named(&server, name))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("child");
        let out = child.stdout.take().expect("stdout");
        children.push(Killed(child));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.ends_with("WAITING") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the child waits within 60 s");
    }
    // Ten waiting processes, one each, and the leader's process, one.
    let most = most_sessions(&server, None, Duration::from_secs(3)).await;
    assert!(
        most <= 11,
        "10 waiting processes and a leader's held {most} connections, not at most 11"
    );
    let waiting = sessions(&server, Some(name));
    assert!(
        waiting <= 10,
        "10 waiting processes held {waiting} connections"
    );
    drop(children);
    leader.resign().await.expect("resign");
}

/// A lease set asking 10,000 keys holds at most two connections while it
/// claims and renews them and waits for the one another process holds:
/// the session (renewals, releases, `LISTEN`) and the side connection
/// for its claim batches. Before ADR 0105: 3 (the pool's two and the
/// listener).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_set_of_ten_thousand_keys_holds_at_most_two() {
    let server = common::server();
    let name = "pg42_lease_set";
    let options =
        election_postgres::PostgresOptions::new(Duration::from_secs(10), Duration::from_secs(2))
            .and_then(|o| o.with_request_timeout(Duration::from_secs(2)))
            .expect("options");
    let e = PostgresElection::connect(&url_named(&server, name), options)
        .await
        .expect("connect");
    // Another process (its own pool and application name, not counted)
    // holds one of the keys: the set waits for it, listening, while it
    // renews the other 9,999.
    let other_pool = sqlx::PgPool::connect(&url_named(&server, OTHER))
        .await
        .expect("pool");
    let other = PostgresElection::with_pool(other_pool, common::fast())
        .await
        .expect("open");
    let k0 = other
        .candidate("k0", "other")
        .expect("candidate")
        .campaign()
        .await
        .expect("holds k0");
    let set = std::sync::Arc::new(e.lease_set("node-a").await.expect("set"));
    let keys: Vec<String> = (0..10_000).map(|i| format!("k{i}")).collect();
    // Every key asked at once: the set claims them in batches.
    let asking = {
        let set = set.clone();
        tokio::spawn(async move {
            futures::future::join_all(keys.iter().map(|k| set.ask(k))).await;
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut most = 0;
    loop {
        most = most.max(sessions_but(&server, OTHER));
        let held: i64 = server
            .sql("SELECT count(*) FROM election.leases WHERE holder = 'node-a'")
            .expect("held")
            .parse()
            .expect("a count");
        if held == 9_999 && asking.is_finished() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{held} of 9999 keys held after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Held, renewed: a few renewals more.
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        most = most.max(sessions_but(&server, OTHER));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        most <= 2,
        "a lease set of 10000 keys held {most} connections, not at most 2"
    );
    set.close().await;
    k0.resign().await.expect("resign");
}

/// An election opened on a second runtime of the process gets a session
/// of its own (ADR 0114): the first runtime's session dies with it.
#[test]
fn an_election_on_a_second_runtime_outlives_the_first() {
    let server = common::server();
    let url = url_named(&server, "pg_runtimes");
    election_testkit::runtimes::a_second_runtime_outlives_the_first(|| {
        let url = url.clone();
        async move {
            PostgresElection::connect(&url, common::fast())
                .await
                .expect("connect")
        }
    });
}
