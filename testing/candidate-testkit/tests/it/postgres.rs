//! Real candidate processes against a real PostgreSQL server
//! (postgres-testkit): SIGKILL and SIGSTOP of the leader past the TTL, and
//! a clean resign waking a waiter by notification rather than a poll.
//!
//! A dead holder costs its TTL here: a dropped connection alone does not
//! prove the holder is gone, so the successor waits to see no renewal for a
//! full TTL on its own monotonic clock.

use std::time::Duration;

use candidate_testkit::{Proc, mono_ns};
use nix::sys::signal::Signal;
use postgres_testkit::Server;

const BIN: &str = env!("CARGO_BIN_EXE_election-candidate");
const TTL_MS: u64 = 2000;
const RENEW_MS: u64 = 500;

fn server() -> Server {
    Server::start().expect("a PostgreSQL server (apt-get install -y postgresql)")
}

fn start(server: &Server, identity: &str, poll_ms: &str) -> Proc {
    let (ttl, renew) = (TTL_MS.to_string(), RENEW_MS.to_string());
    let url = server.url();
    let args = [
        "--backend",
        &url,
        "--name",
        "jobs",
        "--identity",
        identity,
        "--ttl-ms",
        &ttl,
        "--renew-ms",
        &renew,
        "--poll-ms",
        poll_ms,
    ];
    Proc::spawn(BIN, &args, identity)
}

/// Leader `a` elected (with its epoch) and contender `b` campaigning.
fn leader_and_contender(server: &Server, poll_ms: &str) -> (Proc, u64, Proc) {
    let mut a = start(server, "a", poll_ms);
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut b = start(server, "b", poll_ms);
    b.expect("campaigning");
    (a, e1, b)
}

#[tokio::test]
async fn sigkill_of_the_leader_hands_over_after_the_ttl_with_a_higher_epoch() {
    let server = server();
    let (a, e1, mut b) = leader_and_contender(&server, "20");
    let killed = mono_ns();
    a.signal(Signal::SIGKILL);
    let (e2, at) = b.elected();
    assert!(e2 > e1, "epoch {e2} after {e1}");
    // B saw no renewal for a full TTL; A's last renewal was at most one
    // renew interval before the kill.
    let waited = Duration::from_nanos(at - killed);
    assert!(
        waited >= Duration::from_millis(TTL_MS - RENEW_MS),
        "took over after {waited:?}"
    );
}

#[tokio::test]
async fn a_stopped_leader_is_replaced_and_learns_its_loss_before_acting() {
    let server = server();
    let (mut a, e1, mut b) = leader_and_contender(&server, "20");
    a.send("write ledger");
    assert_eq!(a.expect("wrote"), [e1.to_string()]);
    let stopped = mono_ns();
    a.signal(Signal::SIGSTOP);
    let (e2, at) = b.elected();
    assert!(e2 > e1, "epoch {e2} after {e1}");
    let waited = Duration::from_nanos(at - stopped);
    assert!(
        waited >= Duration::from_millis(TTL_MS - RENEW_MS),
        "took over after {waited:?}"
    );
    b.send("write ledger");
    assert_eq!(b.expect("wrote"), [e2.to_string()]);
    // The old leader wakes with a write already queued: it reports the
    // loss first, and its write is refused by the fence.
    a.send("write ledger");
    a.signal(Signal::SIGCONT);
    let first = a.line();
    assert!(
        first.starts_with("lost "),
        "the stopped leader did something before learning its loss: {first:?}"
    );
    assert_eq!(a.expect("refused"), [e1.to_string(), e2.to_string()]);
    // The resource holds A's first write and B's, nothing after B's.
    let rows = server
        .sql("SELECT epoch || ':' || identity FROM candidate_writes ORDER BY at")
        .expect("psql");
    let rows: Vec<&str> = rows
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(rows, [format!("{e1}:a"), format!("{e2}:b")]);
}

/// With an hourly poll and a TTL of 2 s, a waiter elected well within a
/// TTL of the resign was woken by the notification.
#[tokio::test]
async fn a_clean_resign_wakes_the_waiter_by_notification() {
    let server = server();
    let (mut a, e1, mut b) = leader_and_contender(&server, "3600000");
    let resigned = mono_ns();
    a.send("resign");
    a.expect("resigning");
    a.expect("resigned");
    let (e2, at) = b.elected();
    assert!(e2 > e1, "epoch {e2} after {e1}");
    let waited = Duration::from_nanos(at - resigned);
    assert!(
        waited < Duration::from_millis(TTL_MS - RENEW_MS),
        "took over after {waited:?}, as if it waited out the TTL"
    );
}
