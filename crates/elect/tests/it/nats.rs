//! `elect` end to end on NATS JetStream (a real nats-server, TTL 3 s,
//! failover grace 1 s): a killed leader's lease is taken over after the
//! TTL and the grace; a leader that cannot renew loses its term and its
//! command is stopped.

use crate::common;

use std::time::{Duration, Instant};

use common::Setup;
use nats_testkit::Server;

const TIMING: [&str; 4] = ["--ttl", "3s", "--grace", "1s"];

fn server() -> Server {
    Server::start().expect("nats-server")
}

#[tokio::test]
async fn a_killed_leader_is_replaced_with_a_higher_epoch() {
    let s = server();
    common::takeover(&Setup::nats(&s.url(), &TIMING)).await;
}

#[tokio::test]
async fn no_wait_and_timeout_give_the_conflict_exit_code() {
    let s = server();
    common::no_wait(&Setup::nats(&s.url(), &TIMING)).await;
}

#[tokio::test]
async fn signals_are_forwarded_to_the_command() {
    let s = server();
    common::signals(&Setup::nats(&s.url(), &TIMING)).await;
}

#[tokio::test]
async fn the_command_exit_code_is_elects_and_the_term_is_resigned() {
    let s = server();
    common::exit_code(&Setup::nats(&s.url(), &TIMING)).await;
}

#[tokio::test]
async fn a_missing_command_exits_127_and_resigns() {
    let s = server();
    common::missing_command(&Setup::nats(&s.url(), &TIMING)).await;
}

// `elect leader` and `elect observe` open the bucket with the default TTL
// (15 s), so these runs keep it (see the ignored tests below).

#[tokio::test]
async fn leader_prints_text_and_json() {
    let s = server();
    let url = format!("{}?bucket=elect_e2e", s.url());
    common::leader_output(&Setup::nats(&url, &[])).await;
}

/// Without the first line (see the ignored test below). The leader
/// shows when elected if the watch began before, else at the next renewal
/// (5 s at the default TTL; `--renew` cannot be lowered, see below).
#[tokio::test]
async fn observe_prints_each_change_in_order() {
    let s = server();
    common::observe_output(&Setup::nats(&s.url(), &[]), true).await;
}

#[tokio::test]
async fn observe_prints_the_current_state_first() {
    let s = server();
    let b = Setup::nats(&s.url(), &[]);
    let quick = Duration::from_secs(2);
    let mut o = b.observe("vacant", false);
    let first = tokio::time::timeout(quick, o.out_line()).await;
    assert_eq!(first.ok().as_deref(), Some("vacant: no leader"));
    // A leader elected before the watch (renewing every 5 s).
    let r = b.report("a");
    let (a, st) = common::lead(&b, "held", "a", &r).await;
    let mut o = b.observe("held", false);
    let first = tokio::time::timeout(quick, o.out_line())
        .await
        .expect("the current leader at once");
    common::assert_led_by(&first, "held", "a", st.epoch);
    common::end(a, &r, "held", st.epoch).await;
}

#[tokio::test]
async fn leader_and_observe_work_with_any_ttl() {
    let s = server();
    let b = Setup::nats(&s.url(), &TIMING);
    // The bucket made by a run with --ttl 3s: leader reads it.
    common::assert_free(&b, "made-by-run", 0).await;
    assert_eq!(b.leader_text("made-by-run").await, "made-by-run: no leader");
    // The bucket made by leader first: a run with --ttl 3s uses it.
    let url = format!("{}?bucket=made_by_leader", s.url());
    let b = Setup::nats(&url, &TIMING);
    assert_eq!(b.leader_text("x").await, "x: no leader");
    common::assert_free(&b, "x", 0).await;
}

#[tokio::test]
async fn renew_and_grace_can_be_lowered_together() {
    let s = server();
    let b = Setup::nats(&s.url(), &["--ttl", "6s", "--renew", "1s", "--grace", "1s"]);
    common::assert_free(&b, "renew", 0).await;
}

/// The server is killed while A and B lead (elections "lost-a", "lost-b"):
/// within the TTL each prints `lost`, its command gets SIGTERM; A's exits
/// at once, B's ignores it and is killed after --kill-grace; elect exits
/// with 79 (A) and --lost-exit-code (B).
#[tokio::test]
async fn losing_the_term_stops_the_command() {
    let mut s = server();
    let b = Setup::nats(&s.url(), &TIMING);
    let (ra, rb) = (b.report("a"), b.report("b"));
    let mut a = b.run("lost-a", "a", &["--kill-grace", "1s"], &ra.worker());
    let stubborn = rb.worker_on_term(r#"echo term >> "$out""#);
    let extra = ["--kill-grace", "1s", "--lost-exit-code", "3"];
    let mut bb = b.run("lost-b", "b", &extra, &stubborn);
    let (sa, sb) = (ra.started().await, rb.started().await);
    a.err_with("elect: started ").await;
    bb.err_with("elect: started ").await;

    let killed = Instant::now();
    s.kill().expect("kill nats-server");
    for (run, name, epoch) in [(&mut a, "lost-a", sa.epoch), (&mut bb, "lost-b", sb.epoch)] {
        run.err_with(&format!("elect: lost {name}, term {epoch}: "))
            .await;
        // Rule 2: the loss is reported before the lease could have
        // expired on the server (a TTL after the last renewal, which was
        // before the kill); a little slack for a loaded machine.
        let after = killed.elapsed();
        assert!(
            after < Duration::from_secs(3 + 2),
            "lost {after:?} after the kill"
        );
    }

    ra.wait_for("term").await;
    let done = a.finish().await;
    assert_eq!(done.code, common::LOST, "{done:?}");
    done.err_line("elect: the command stopped (exit 0)");
    assert!(
        !done
            .stderr
            .iter()
            .any(|l| l.contains("did not exit in time")),
        "{done:?}"
    );

    rb.wait_for("term").await;
    let done = bb.finish().await;
    assert_eq!(done.code, 3, "{done:?}");
    done.err_line("elect: the command did not exit in time: SIGKILL");
    done.err_line("elect: the command stopped (exit 137)");
    assert!(!common::alive(sb.pid));
    assert!(!common::alive(sa.pid));
    assert!(
        !done.stderr.iter().any(|l| l.contains("resigned")),
        "{done:?}"
    );
}

#[tokio::test]
async fn a_single_replica_bucket_is_warned_about_unless_the_user_says_it_is_known() {
    let s = server();
    let b = Setup::nats(&s.url(), &TIMING);
    let r = b.report("x");
    let done = b.run_to_end("j", "a", &[], &r.once()).await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line("warning: the NATS bucket has a single replica");

    let known = Setup::nats(&format!("{}?single_replica_ok=1", s.url()), &TIMING);
    let done = known.run_to_end("j", "a", &[], &r.once()).await;
    assert_eq!(done.code, 0, "{done:?}");
    assert!(
        !done.stderr.iter().any(|l| l.contains("single replica")),
        "warned although the user said it is known: {done:?}"
    );
    assert_eq!(r.lines().len(), 2);
}

#[tokio::test]
async fn a_command_that_exits_leaves_no_process_behind() {
    let s = server();
    common::whole_tree(&Setup::nats(&s.url(), &TIMING), common::Ending::Exit).await;
}

#[tokio::test]
async fn sigkill_of_elect_stops_the_whole_tree() {
    let s = server();
    common::whole_tree(&Setup::nats(&s.url(), &TIMING), common::Ending::Kill).await;
}

#[tokio::test]
async fn a_stopped_elect_does_not_leave_its_command_running() {
    let s = server();
    common::whole_tree(&Setup::nats(&s.url(), &TIMING), common::Ending::Stop).await;
}

/// The server stops answering (paused) past A's lease: A loses its term
/// and stops its whole tree before it exits; once the server is back, B is
/// elected and finds none of it.
#[tokio::test]
async fn losing_the_term_stops_the_whole_tree() {
    let s = std::cell::RefCell::new(server());
    let b = Setup::nats(&s.borrow().url(), &TIMING);
    common::losing_the_term_stops_the_whole_tree(
        &b,
        || s.borrow_mut().pause().expect("pause nats-server"),
        || s.borrow_mut().resume().expect("resume nats-server"),
    )
    .await;
}

/// B wins the key after A was killed, and waits out the failover grace:
/// `elect leader` shows B as pending, not as the leader (it may never run
/// its command). SIGTERM to B then gives the key up before B exits: the
/// election is free at once, not after B's TTL.
#[tokio::test]
async fn sigterm_in_the_failover_grace_gives_the_key_up() {
    use nix::sys::signal::Signal;
    let s = server();
    let b = Setup::nats(&s.url(), &["--ttl", "6s", "--grace", "2s"]);
    let (ra, rb) = (b.report("a"), b.report("b"));
    let name = "grace";
    let (a, sa) = common::lead(&b, name, "a", &ra).await;
    let mut observer = b.observe(name, false);
    let mut bb = b.run(name, "b", &[], &rb.worker());
    bb.err_with("elect: campaigning for grace as b on ").await;
    a.signal(Signal::SIGKILL);
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);

    // Poll `elect leader` until it names B (after A's lease expired).
    let deadline = Instant::now() + common::PATIENCE;
    let text = loop {
        let line = b.leader_text(name).await;
        if line.contains(" b ") {
            break line;
        }
        assert!(Instant::now() < deadline, "B never won the key: {line:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let json = b.leader_json(name).await;
    // Still in the grace: B's command has not started.
    assert!(rb.lines().is_empty(), "B's command ran: {:?}", rb.lines());
    assert!(
        text.starts_with(&format!("{name}: pending: b in term ")),
        "a candidate in its failover grace shown as: {text:?}"
    );
    assert!(json["leader"].is_null(), "{json}");
    assert_eq!(json["pending"]["identity"], "b", "{json}");
    // `elect observe` shows B as pending too, never as the leader.
    loop {
        let line = observer.out_line().await;
        assert!(
            !line.contains("led by b"),
            "observe showed B leading: {line:?}"
        );
        if line.starts_with(&format!("{name}: pending: b in term ")) {
            break;
        }
    }

    bb.signal(Signal::SIGTERM);
    let done = bb.finish().await;
    assert_eq!(done.code, 128 + Signal::SIGTERM as i32, "{done:?}");
    assert!(rb.lines().is_empty(), "B's command ran: {:?}", rb.lines());
    assert_eq!(b.leader_text(name).await, format!("{name}: no leader"));
    common::assert_free(&b, name, sa.epoch).await;
}

/// Issue 43, item 4: a new name in a bucket that already holds elections
/// is a vacancy with no clean release, so its first term waits out the
/// failover grace; `elect run` says so, instead of a silent pause between
/// "campaigning" and "elected".
#[tokio::test]
async fn a_run_says_when_it_waits_out_the_failover_grace() {
    let s = server();
    let b = Setup::nats(&s.url(), &["--ttl", "6s", "--grace", "2s"]);
    let r = b.report("a");
    // The bucket exists, with another election's record in it.
    assert_eq!(b.run_to_end("other", "a", &[], &r.once()).await.code, 0);
    let done = b.run_to_end("fresh", "a", &[], &r.once()).await;
    assert_eq!(done.code, 0, "{done:?}");
    let said = done.err_line("elect: waiting out the failover grace (2s) before term ");
    assert!(said.contains("fresh had no clean release"), "{said}");
    let at = |what: &str| done.stderr.iter().position(|l| l.contains(what));
    assert!(
        at("waiting out the failover grace") < at("elect: elected: fresh"),
        "{done:?}"
    );
}

/// Issue 43, item 4: `elect leader --slots` shows a slot's holder still in
/// its failover grace as pending, as plain `elect leader` does, never as
/// holding it.
#[tokio::test]
async fn a_slot_in_its_failover_grace_is_shown_pending() {
    use nix::sys::signal::Signal;
    let s = server();
    let b = Setup::nats(&s.url(), &["--ttl", "6s", "--grace", "2s"]);
    let (ra, rb) = (b.report("a"), b.report("b"));
    let name = "slotgrace";
    let mut a = b.run(name, "a", &["--slots", "1"], &ra.worker());
    a.err_with("elect: started ").await;
    let mut bb = b.run(name, "b", &["--slots", "1"], &rb.worker());
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    a.signal(Signal::SIGKILL);
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    let args = [
        "leader",
        "--backend",
        &b.url,
        "--name",
        name,
        "--slots",
        "1",
    ];
    let deadline = Instant::now() + common::PATIENCE;
    let seen = loop {
        let out = common::once(&args).await;
        assert_eq!(out.code, 0, "{out:?}");
        if out.stdout.iter().any(|l| l.contains(" b ")) {
            break out;
        }
        assert!(Instant::now() < deadline, "B never won the slot: {out:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Still in the grace: B's command has not started.
    assert!(rb.lines().is_empty(), "B's command ran: {:?}", rb.lines());
    assert!(
        seen.stdout[0].starts_with(&format!("{name}: slot 0: pending: b in term ")),
        "{seen:?}"
    );
    assert_eq!(
        seen.stdout.last().map(String::as_str),
        Some(format!("{name}: 0 of 1 slots held").as_str()),
        "{seen:?}"
    );
    bb.signal(Signal::SIGTERM);
    let _ = bb.finish().await;
}

/// `replicas=3` on a single server (no cluster): permanent, 78 with a
/// hint naming the fix, not "unavailable, try again later". Before: 69,
/// "check that nats-server runs with JetStream enabled".
#[tokio::test]
async fn replicas_the_server_cannot_have_are_a_configuration_error() {
    let s = server();
    let url = format!("{}?replicas=3&bucket=r3", s.url());
    let done = common::once(&["run", "--backend", &url, "--name", "j", "--", "true"]).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    let hint = done.err_line("elect: hint: ");
    assert!(hint.contains("replicas=1"), "{hint}");
}

/// The server goes away while a candidate waits with `--timeout`: the
/// campaign says why it retries, and when the timeout runs out it exits
/// 69 with the cause, not 75 "not elected". Before: no line while it
/// retried, then 75.
#[tokio::test]
async fn a_bounded_campaign_that_kept_failing_says_why() {
    let mut s = server();
    let b = Setup::nats(&s.url(), &TIMING);
    let ra = b.report("a");
    let (_a, _sa) = common::lead(&b, "down", "a", &ra).await;
    let rb = b.report("b");
    let mut waiting = b.run("down", "b", &["--timeout", "8s"], &rb.once());
    waiting.err_with("elect: campaigning for down as b").await;
    s.kill().expect("kill nats-server");
    let done = waiting.finish().await;
    assert_eq!(done.code, common::UNAVAILABLE, "{done:?}");
    done.err_line("retrying");
    done.err_line("elect: error: not elected within 8s: the backend kept failing");
    assert!(rb.lines().is_empty(), "B's command ran: {:?}", rb.lines());
}

/// `elect revoke` from another process deposes a running leader (ADR 0111).
#[tokio::test]
async fn revoke_stops_the_leader_and_the_next_term_is_above_it() {
    let s = server();
    common::revoke(&Setup::nats(&s.url(), &TIMING)).await;
}

/// `elect run --take-over` and `elect transfer` hand the term to the named
/// successor across processes, with no overlap and no race (ADR 0112).
#[tokio::test]
async fn transfer_hands_the_term_to_the_named_successor() {
    let s = server();
    common::transfer(&Setup::nats(&s.url(), &TIMING)).await;
}

/// A transfer to a candidate that never comes holds the name for the
/// handover window only.
#[tokio::test]
async fn a_transfer_to_nobody_holds_the_name_for_its_window() {
    let s = server();
    common::transfer_to_nobody(&Setup::nats(&s.url(), &TIMING)).await;
}

/// A leader with --yield-to-preferred hands its term to a waiting
/// candidate of a higher --priority, not to one of its own (ADR 0112).
#[tokio::test]
async fn a_leader_yields_to_a_preferred_candidate() {
    let s = server();
    common::preference(&Setup::nats(&s.url(), &TIMING)).await;
}
