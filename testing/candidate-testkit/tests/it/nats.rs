//! Real candidate processes against a real nats-server: SIGKILL and SIGSTOP
//! of the leader.

use std::time::Duration;

use candidate_testkit::{Proc, mono_ns};
use nats_testkit::Server;
use nix::sys::signal::Signal;

const BIN: &str = env!("CARGO_BIN_EXE_election-candidate");
const TTL_MS: u64 = 3000;

fn start(url: &str, identity: &str) -> Proc {
    let ttl = TTL_MS.to_string();
    let args = [
        "--backend",
        url,
        "--name",
        "jobs",
        "--identity",
        identity,
        "--ttl-ms",
        &ttl,
        "--poll-ms",
        "200",
    ];
    Proc::spawn(BIN, &args, identity)
}

/// Leader `a` elected (with its epoch) and contender `b` campaigning.
async fn leader_and_contender(server: &Server) -> (Proc, u64, Proc) {
    let mut a = start(&server.url(), "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut b = start(&server.url(), "b");
    b.expect("campaigning");
    (a, e1, b)
}

#[tokio::test]
async fn sigkill_of_the_leader_hands_over_after_the_ttl_and_grace() {
    let server = Server::start().expect("nats-server");
    let (a, e1, mut b) = leader_and_contender(&server).await;
    let killed = mono_ns();
    a.signal(Signal::SIGKILL);
    let (e2, at) = b.elected();
    assert!(e2 > e1, "epoch {e2} after {e1}");
    let took = Duration::from_nanos(at - killed);
    // The key expires a TTL after A's last renewal (at most a renew
    // interval before the kill), then B waits the failover grace.
    let renew = Duration::from_millis(TTL_MS / 3);
    assert!(
        took >= Duration::from_millis(TTL_MS) - renew,
        "took over after {took:?}, before the lease could expire"
    );
    b.send("confirm");
    assert_eq!(b.expect("confirmed"), [e2.to_string()]);
}

#[tokio::test]
async fn a_paused_leader_learns_its_loss_before_anything_else() {
    let server = Server::start().expect("nats-server");
    let (mut a, e1, mut b) = leader_and_contender(&server).await;
    a.signal(Signal::SIGSTOP);
    let (e2, _) = b.elected();
    assert!(e2 > e1);
    // A wakes with a commit-point check already queued.
    a.send("confirm");
    a.signal(Signal::SIGCONT);
    let first = a.line();
    assert!(
        first.starts_with("lost "),
        "the paused leader did something before learning its loss: {first:?}"
    );
    let second = a.line();
    assert!(
        second.starts_with("not-confirmed "),
        "a deposed leader passed the commit point: {second:?}"
    );
    b.send("confirm");
    assert_eq!(b.expect("confirmed"), [e2.to_string()]);
}

#[tokio::test]
async fn a_clean_resign_hands_over_without_grace() {
    let server = Server::start().expect("nats-server");
    let (mut a, e1, mut b) = leader_and_contender(&server).await;
    a.send("resign");
    let resigning: u64 = a.expect("resigning")[0].parse().expect("ns");
    let (e2, at) = b.elected();
    assert!(e2 > e1);
    // Woken by the delete, not by polling or the TTL: well under the TTL.
    let took = Duration::from_nanos(at - resigning);
    assert!(
        took < Duration::from_millis(TTL_MS),
        "handover took {took:?}"
    );
}

/// Issue 42 (ADR 0106): ten candidate processes, one leading and nine
/// waiting, hold ten connections, one each (counted from the server's
/// `/connz`).
#[tokio::test]
async fn ten_candidate_processes_make_ten_connections() {
    let server = Server::start().expect("nats-server");
    let mut leader = start(&server.url(), "p0");
    leader.expect("campaigning");
    leader.elected();
    let mut waiters: Vec<Proc> = (1..10)
        .map(|i| start(&server.url(), &format!("p{i}")))
        .collect();
    for w in &mut waiters {
        w.expect("campaigning");
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(server.connections().expect("/connz"), 10);
}

/// Issue 42 (ADR 0106): the head waiter is killed (SIGKILL: its waiter
/// key stays until it ages out) just before the leader resigns; a waiter
/// behind it still takes the name, within the waiter key's TTL and the
/// usual bound.
#[tokio::test]
async fn a_killed_head_waiter_does_not_hold_the_name_up() {
    let server = Server::start().expect("nats-server");
    let (mut a, e1, b) = leader_and_contender(&server).await;
    // b is in line first; c and d behind it.
    std::thread::sleep(Duration::from_millis(300));
    let mut others = vec![start(&server.url(), "c"), start(&server.url(), "d")];
    for w in &mut others {
        w.expect("campaigning");
        std::thread::sleep(Duration::from_millis(300));
    }
    b.signal(Signal::SIGKILL);
    a.send("resign");
    let resigning: u64 = a.expect("resigning")[0].parse().expect("ns");
    let deadline = std::time::Instant::now() + Duration::from_millis(TTL_MS + 5000);
    let (line, who) = loop {
        if let Some(found) = others
            .iter_mut()
            .find_map(|w| w.try_line().map(|l| (l, w.label().to_owned())))
        {
            break found;
        }
        assert!(std::time::Instant::now() < deadline, "nobody took the name");
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut words = line.split(' ');
    assert_eq!(words.next(), Some("elected"), "{who} printed {line:?}");
    let e2: u64 = words.next().expect("epoch").parse().expect("epoch");
    let at: u64 = words.next().expect("stamp").parse().expect("stamp");
    assert!(e2 > e1);
    let took = Duration::from_nanos(at - resigning);
    eprintln!("{who} took the name {took:?} after the resign");
    assert!(
        took < Duration::from_millis(TTL_MS + 1000),
        "{who} took the name {took:?} after the resign: the dead head waiter held it up"
    );
}
