//! Wake-ups by LISTEN/NOTIFY: a clean handover (resign or drop) reaches a
//! waiter whose poll interval is an hour, so only the notification can
//! have woken it; a notification for another name does not hand anything
//! over.

mod common;

use std::time::Duration;

use election_postgres::PostgresElection;

const HOUR: Duration = Duration::from_secs(3600);

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 30s"))
}

/// A waiting candidate `b` for `jobs`, polling once an hour, behind `a`'s
/// term; returns once `b` is known to be waiting (its first try failed).
async fn waiter(
    e: &PostgresElection,
) -> tokio::task::JoinHandle<election_core::Term<election_postgres::PostgresClaim>> {
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(HOUR)
        .expect("poll");
    assert!(
        b.try_campaign().await.expect("answers").is_none(),
        "a holds jobs"
    );
    tokio::spawn(async move { b.campaign().await.expect("b wins") })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resign_wakes_a_waiter_without_a_poll() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    let b = waiter(&e).await;
    // Let b's listener start (it wakes b once when it does).
    tokio::task::yield_now().await;
    a.resign().await.expect("resign");
    let term = within("b woken by the release", b).await.expect("task");
    assert!(term.epoch() > a.epoch());
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_term_wakes_a_waiter_without_a_poll() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    let epoch = a.epoch();
    let b = waiter(&e).await;
    drop(a);
    let term = within("b woken by the background release", b)
        .await
        .expect("task");
    assert!(term.epoch() > epoch);
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_in_another_process_are_woken_too() {
    let server = common::server();
    let holder_side = common::open(&server, common::fast()).await;
    let waiter_side = common::open(&server, common::fast()).await;
    let a = holder_side
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    let b = waiter(&waiter_side).await;
    // Another name's release does not hand `jobs` over.
    let other = holder_side
        .candidate("other", "a")
        .expect("a")
        .campaign()
        .await
        .expect("other");
    other.resign().await.expect("resign other");
    assert!(!b.is_finished() || a.is_lost());
    a.resign().await.expect("resign");
    let term = within("b woken across connections", b).await.expect("task");
    term.resign().await.expect("resign");
}
