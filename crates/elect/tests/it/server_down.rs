//! A server that is down when `elect run` starts (issue 26, item 1), on
//! real PostgreSQL and NATS servers: one behaviour on both. The candidate
//! waits for the server, a line on stderr per attempt, and is elected once
//! the server is up; `--no-wait` and `--timeout` bound the wait and exit
//! 69 with the real cause (never a pool's internals); refused credentials
//! are not retried (78).

use crate::common;

use std::time::Duration;

use common::{Elect, Setup};
use nix::sys::signal::Signal;
use tokio::time::Instant;

/// Well below what a server down used to cost (10 s in the pool).
const PROMPT: Duration = Duration::from_secs(5);

/// A stopped PostgreSQL server (its port known, nothing listening) and
/// the `Setup` on it.
fn postgres_down() -> (postgres_testkit::Server, Setup) {
    let mut server = postgres_testkit::Server::start()
        .expect("a PostgreSQL server (apt-get install -y postgresql)");
    server.stop().expect("stop");
    let setup = Setup {
        url: format!("{}?schema=elect_down", server.url()),
        timing: vec!["--ttl".into(), "3s".into()],
        hold_window: Duration::from_secs(4),
        dir: common::temp_dir(),
    };
    (server, setup)
}

/// A stopped nats-server and the `Setup` on it.
fn nats_down() -> (nats_testkit::Server, Setup) {
    let mut server = nats_testkit::Server::start().expect("nats-server");
    server.stop().expect("stop");
    let setup = Setup::nats(
        &format!("{}?single_replica_ok=1", server.url()),
        &["--ttl", "3s"],
    );
    (server, setup)
}

/// The candidate starts first, says each attempt on stderr with the
/// cause, and is elected once the server is started.
async fn waits_for_the_server(setup: &Setup, start: impl FnOnce(), cause: &str) {
    let report = setup.report("a");
    let mut elect = setup.run("jobs", "a", &[], &report.worker());
    let first = elect.err_with("attempt 1,").await;
    assert!(first.contains(cause), "{first}");
    let second = elect.err_with("attempt 2,").await;
    assert!(second.contains(cause), "{second}");
    assert!(!second.contains("pool timed out"), "{second}");
    start();
    let started = report.started().await;
    assert_eq!(started.name, "jobs");
    elect.signal(Signal::SIGTERM);
    let done = elect.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
}

#[tokio::test]
async fn postgres_started_after_the_candidate_elects_it() {
    let (mut server, setup) = postgres_down();
    waits_for_the_server(&setup, || server.restart().expect("start"), "refused").await;
}

#[tokio::test]
async fn nats_started_after_the_candidate_elects_it() {
    let (mut server, setup) = nats_down();
    waits_for_the_server(&setup, || server.restart().expect("start"), "refused").await;
}

/// `--no-wait`: one attempt, 69 at once with the cause. `--timeout 2s`:
/// attempts for 2 s, then 69 with the cause and the count.
async fn bounded(setup: &Setup) {
    let report = setup.report("b");
    let started = Instant::now();
    let done = setup
        .run_to_end("jobs", "b", &["--no-wait"], &report.once())
        .await;
    let took = started.elapsed();
    assert_eq!(done.code, common::UNAVAILABLE, "{done:?}");
    let line = done.err_line("refused");
    assert!(!line.contains("pool timed out"), "{line}");
    assert!(took < PROMPT, "--no-wait took {took:?}");

    let started = Instant::now();
    let done = setup
        .run_to_end("jobs", "b", &["--timeout", "2s"], &report.once())
        .await;
    let took = started.elapsed();
    assert_eq!(done.code, common::UNAVAILABLE, "{done:?}");
    done.err_line("attempt 1,");
    let last = done.err_line("not elected within 2s");
    assert!(last.contains("refused"), "{last}");
    assert!(!last.contains("pool timed out"), "{last}");
    assert!(took >= Duration::from_secs(2), "--timeout 2s took {took:?}");
    assert!(
        took < Duration::from_secs(2) + PROMPT,
        "--timeout 2s took {took:?}"
    );
}

#[tokio::test]
async fn postgres_down_with_no_wait_or_timeout_exits_promptly_with_the_cause() {
    let (_server, setup) = postgres_down();
    bounded(&setup).await;
}

#[tokio::test]
async fn nats_down_with_no_wait_or_timeout_exits_promptly_with_the_cause() {
    let (_server, setup) = nats_down();
    bounded(&setup).await;
}

#[tokio::test]
async fn refused_credentials_are_not_retried() {
    let server =
        postgres_testkit::Server::start_with_password("s3cret-pw").expect("a PostgreSQL server");
    let url = server.url_without_password();
    let started = Instant::now();
    let args = ["run", "--backend", &url, "--name", "jobs", "--", "true"];
    let mut command = tokio::process::Command::new(common::BIN);
    command.args(args).env("PGPASSWORD", "wrong");
    let done = Elect::start(command, "wrong password").finish().await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    assert!(
        !done.stderr.iter().any(|l| l.contains("attempt")),
        "{done:?}"
    );
    assert!(started.elapsed() < PROMPT);
}
