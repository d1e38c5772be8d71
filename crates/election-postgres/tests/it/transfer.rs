//! Transfer (ADR 0112) on PostgreSQL: a handover wakes its successor
//! wherever it is in the waiters' queue (a release wakes only the head),
//! without a poll; a waiter that is not the successor wins when the window
//! ends, not at its poll; while the name is reserved nobody leads, nothing
//! is revoked and there is no term to ask.

use crate::common;

use std::time::Duration;

use election_core::{Election, Identity};
use election_postgres::{PostgresElection, PostgresOptions};
use postgres_testkit::Server;

const HOUR: Duration = Duration::from_secs(3600);
const SLACK: Duration = Duration::from_secs(60);

/// Long leases: no renewal of a waiter's row and no takeover in a test's
/// time; the requests as patient as the options allow.
fn options() -> PostgresOptions {
    PostgresOptions::new(Duration::from_secs(60), Duration::from_secs(20))
        .and_then(|o| o.with_request_timeout(Duration::from_secs(5)))
        .expect("options")
}

fn id(s: &str) -> Identity {
    Identity::new(s).expect("identity")
}

/// The unexpired waiter rows of `jobs`.
fn queued(server: &Server) -> i64 {
    server
        .sql("SELECT count(*) FROM election.waiters WHERE name = 'jobs' AND expires_at > now()")
        .expect("waiters")
        .parse()
        .expect("a count")
}

/// Waits until `n` waiters of `jobs` are in line.
async fn until_queued(server: &Server, n: i64) {
    let deadline = std::time::Instant::now() + SLACK;
    while queued(server) != n {
        assert!(std::time::Instant::now() < deadline, "{n} never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `identity` campaigning for `jobs` on an election (a process's session)
/// of its own, with an hour's poll: only a wake-up brings a look.
async fn waiter(
    server: &Server,
    identity: &str,
) -> (
    PostgresElection,
    tokio::task::JoinHandle<
        Result<election_core::Term<election_postgres::PostgresClaim>, election_core::Error>,
    >,
) {
    let e = common::open(server, options()).await;
    let candidate = e
        .candidate("jobs", identity)
        .expect("candidate")
        .with_poll_interval(HOUR)
        .expect("poll");
    (e, tokio::spawn(async move { candidate.campaign().await }))
}

/// `c` queues first (the head a release would wake), then `b`; `a` hands
/// the name to `b`, who wins at once (its poll is an hour: the handover
/// woke it), while `c`, woken too, finds the name reserved and waits on.
/// While reserved: no leader, no revocation, nothing to revoke or ask.
/// When `b` resigns, `c` wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_wakes_its_successor_behind_the_queue_head() {
    let server = common::server();
    let e = common::open(&server, options()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let (_ec, c) = waiter(&server, "c").await;
    until_queued(&server, 1).await;
    let (_eb, b) = waiter(&server, "b").await;
    until_queued(&server, 2).await;
    let began = std::time::Instant::now();
    a.transfer(&id("b"), SLACK).await.expect("a hands over");
    let b = tokio::time::timeout(Duration::from_secs(10), b)
        .await
        .expect("b woken by the handover, not its poll")
        .expect("join")
        .expect("b wins");
    let took = began.elapsed();
    eprintln!("the successor won {took:?} after the handover began");
    assert!(b.epoch() > a.epoch());
    assert!(!c.is_finished(), "c won a name reserved for b");
    // Reserved, before b's term: shown by a second handover, kept short.
    b.transfer(&id("a"), Duration::from_secs(30))
        .await
        .expect("b hands over");
    assert_eq!(e.leader("jobs").await.expect("leader"), None);
    assert_eq!(
        Election::revocation(&e, "jobs").await.expect("revocation"),
        None
    );
    assert_eq!(e.revoke("jobs", &id("ops")).await.expect("revoke"), None);
    assert_eq!(
        e.request_transfer("jobs", &id("c"), &id("ops"))
            .await
            .expect("request"),
        None
    );
    let shown = e
        .handover("jobs")
        .await
        .expect("read")
        .expect("the handover");
    assert_eq!(
        (shown.from.as_str(), shown.to.as_str(), shown.epoch),
        ("b", "a", b.epoch())
    );
    let again = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a again");
    assert!(again.epoch() > b.epoch());
    assert_eq!(e.handover("jobs").await.expect("read"), None);
    assert!(!c.is_finished(), "c won a name reserved for a");
    again.resign().await.expect("resign");
    let c = tokio::time::timeout(SLACK, c)
        .await
        .expect("c woken by the release")
        .expect("join")
        .expect("c wins");
    assert!(c.epoch() > again.epoch());
    c.resign().await.expect("resign");
    e.close().await;
}

/// A waiter with an hour's poll, not the successor, wins when the window
/// ends (no sooner), not at its poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wins_when_a_window_it_is_not_reserved_ends() {
    let server = common::server();
    let e = common::open(&server, options()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let (_ec, c) = waiter(&server, "c").await;
    until_queued(&server, 1).await;
    let window = Duration::from_secs(1);
    let began = std::time::Instant::now();
    a.transfer(&id("ghost"), window)
        .await
        .expect("a hands over");
    let c = tokio::time::timeout(SLACK, c)
        .await
        .expect("c wins when the window ends, not at its poll")
        .expect("join")
        .expect("c wins");
    assert!(
        began.elapsed() >= window,
        "c won {:?} into the window",
        began.elapsed()
    );
    assert!(c.epoch() > a.epoch());
    c.resign().await.expect("resign");
    e.close().await;
}

/// A request reaches the holder within a renew interval or two (the
/// renewal reads it), with its term's epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reaches_the_holder_by_its_renewal() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let began = std::time::Instant::now();
    let asked = e
        .request_transfer("jobs", &id("b"), &id("deploy"))
        .await
        .expect("request")
        .expect("a holds it");
    let heard = tokio::time::timeout(SLACK, a.transfer_requested())
        .await
        .expect("a hears the request");
    eprintln!("the holder heard the request after {:?}", began.elapsed());
    assert!(began.elapsed() < Duration::from_secs(3));
    assert_eq!(
        (heard.to.clone(), heard.by.clone(), heard.epoch),
        (asked.to, asked.by, a.epoch())
    );
    a.resign().await.expect("resign");
    e.close().await;
}
