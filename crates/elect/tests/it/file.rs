//! `elect` end to end on the file backend (a directory): the kernel frees
//! a killed leader's lock at once.

use crate::common;

use common::Setup;

#[tokio::test]
async fn a_killed_leader_is_replaced_with_a_higher_epoch() {
    common::takeover(&Setup::file()).await;
}

#[tokio::test]
async fn no_wait_and_timeout_give_the_conflict_exit_code() {
    common::no_wait(&Setup::file()).await;
}

#[tokio::test]
async fn signals_are_forwarded_to_the_command() {
    common::signals(&Setup::file()).await;
}

/// Ctrl-C in a terminal: the kernel sends SIGINT to the terminal's whole
/// foreground process group, the command included, so `elect` does not
/// send it a second time (a signal from a process, as in the test above,
/// is still forwarded).
#[tokio::test]
async fn ctrl_c_in_a_terminal_reaches_the_command_once() {
    let b = Setup::file();
    let ints = b.dir.path().join("ints");
    let stop = b.dir.path().join("stop");
    let script = format!(
        "trap 'echo INT >> \"{}\"' INT; echo ready; while [ ! -e \"{}\" ]; do sleep 0.05; done",
        ints.display(),
        stop.display()
    );
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let args = [
        "run",
        "--backend",
        &b.url,
        "--name",
        "job",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let mut run = common::Elect::spawn_in_terminal(&args, "run", pty.slave);
    assert_eq!(run.out_line().await, "ready");

    // Ctrl-C typed at the terminal.
    nix::unistd::write(&pty.master, b"\x03").expect("write ^C");
    run.err_with("SIGINT from the terminal reached the command too")
        .await;
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while !ints.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never saw SIGINT"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    std::fs::write(&stop, "").expect("stop");
    let done = run.finish().await;
    assert_eq!(done.code, 0, "{:#?}", done.stderr);
    assert!(
        !done.stderr.iter().any(|l| l.contains("forwarding SIGINT")),
        "{:#?}",
        done.stderr
    );
    let seen = std::fs::read_to_string(&ints).expect("ints");
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        ["INT"],
        "SIGINT reached the command once"
    );
}

#[tokio::test]
async fn the_command_exit_code_is_elects_and_the_term_is_resigned() {
    common::exit_code(&Setup::file()).await;
}

#[tokio::test]
async fn a_missing_command_exits_127_and_resigns() {
    common::missing_command(&Setup::file()).await;
}

#[tokio::test]
async fn leader_prints_text_and_json() {
    common::leader_output(&Setup::file()).await;
}

#[tokio::test]
async fn observe_prints_each_change_in_order() {
    common::observe_output(&Setup::file(), true).await;
}

#[tokio::test]
async fn ttl_flags_are_refused() {
    let b = Setup::file();
    let r = b.report("x");
    let done = b.run_to_end("ttl", "a", &["--ttl", "3s"], &r.once()).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("elect: error: --ttl, --renew and --grace have no meaning for the file backend");
    done.err_line("elect: hint: ");
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
}

#[tokio::test]
async fn a_command_that_exits_leaves_no_process_behind() {
    common::whole_tree(&Setup::file(), common::Ending::Exit).await;
}

#[tokio::test]
async fn sigterm_to_elect_stops_the_whole_tree() {
    common::whole_tree(&Setup::file(), common::Ending::Term).await;
}

#[tokio::test]
async fn sigkill_of_elect_stops_the_whole_tree() {
    common::whole_tree(&Setup::file(), common::Ending::Kill).await;
}

/// The tree holds the lock, as with flock(1): with both elect and its
/// supervisor SIGKILLed (nothing left to stop the tree), B is not elected
/// while a process of A's tree that kept the claim file open runs; once the
/// last one is gone, B is.
#[tokio::test]
async fn the_lock_is_held_until_the_last_process_of_the_tree_exits() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let b = Setup::file();
    let (ra, rb) = (b.report("a"), b.report("b"));
    let procs = b.dir.path().join("a.procs");
    let mut a = b.run("held", "a", &[], &ra.tree("stay"));
    a.err_with("elect: started ").await;
    let tree = ra.tree_ready(&procs).await;
    let mut bb = b.run("held", "b", &[], &rb.checker(&procs));
    bb.err_with("elect: campaigning for held as b on ").await;
    // The supervisor: elect's child, the command's parent.
    let command = tree[0].pid;
    let supervisor = std::fs::read_to_string(format!("/proc/{command}/stat"))
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            rest.split_whitespace().nth(1)?.parse::<i32>().ok()
        })
        .expect("the command's parent");
    assert_ne!(
        supervisor,
        a.pid().as_raw(),
        "no supervisor between elect and the command"
    );
    // elect is stopped first: it would otherwise see its supervisor's end
    // and exit (70) before its own SIGKILL, and this is about both killed.
    a.signal(Signal::SIGSTOP);
    kill(Pid::from_raw(supervisor), Signal::SIGKILL).expect("kill the supervisor");
    a.signal(Signal::SIGKILL);
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    common::wait_gone(supervisor).await;
    // The processes of the tree that survive (all but the command, which
    // died with the supervisor) keep the lock.
    let survivors: Vec<common::Proc> = tree[1..].iter().copied().filter(|p| p.alive()).collect();
    assert!(!survivors.is_empty(), "{tree:?}");
    tokio::time::sleep(b.hold_window).await;
    assert!(
        rb.lines().is_empty(),
        "B ran while A's tree held the lock: {:?}",
        rb.lines()
    );
    for p in &survivors {
        kill(Pid::from_raw(p.pid), Signal::SIGKILL).expect("kill a survivor");
    }
    let alive = rb.alive_when_checked().await;
    assert!(alive.is_empty(), "{alive:?}");
    bb.signal(Signal::SIGTERM);
    assert_eq!(bb.finish().await.code, 0);
}

/// The children of process `pid` (`/proc/PID/task/PID/children`).
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Issue 43, item 7: a run that waits says whom it waits for (as
/// `--no-wait` does when it gives up), then takes over when the holder
/// ends.
#[tokio::test]
async fn a_waiting_run_says_who_holds_the_name() {
    use nix::sys::signal::Signal;
    let b = Setup::file();
    let name = "said";
    let ra = b.report("a");
    let (a, sa) = common::lead(&b, name, "a", &ra).await;
    let rb = b.report("b");
    let mut bb = b.run(name, "b", &[], &rb.once());
    bb.err_with(&format!(
        "elect: waiting: {name} is led by a in term {}",
        sa.epoch
    ))
    .await;
    a.signal(Signal::SIGTERM);
    bb.err_with(&format!(
        "elect: elected: {name}, term {} as b",
        sa.epoch + 1
    ))
    .await;
    let _ = a.finish().await;
    let _ = bb.finish().await;
}

/// ADR 0031: a waiting `elect run` already has its supervisor (forked
/// before the campaign), which starts nothing while another candidate
/// leads; it exits when its `elect` is SIGKILLed, and `elect` reaps it
/// before it answers "not elected"; the command never runs.
#[tokio::test]
async fn a_waiters_supervisor_starts_nothing_and_ends_with_elect() {
    use nix::sys::signal::Signal;
    let b = Setup::file();
    let name = "standby";
    let ra = b.report("a");
    let (a, sa) = common::lead(&b, name, "a", &ra).await;

    // B waits: its supervisor exists and has started nothing.
    let rb = b.report("b");
    let mut bb = b.run(name, "b", &[], &rb.once());
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    let sup = children(bb.pid().as_raw());
    assert_eq!(sup.len(), 1, "B's children while it waits: {sup:?}");
    let sup = sup[0];
    assert!(
        children(sup).is_empty(),
        "B's supervisor started something before B won: {:?}",
        children(sup)
    );
    // SIGKILL of B: its supervisor sees the end of file and exits.
    bb.signal(Signal::SIGKILL);
    assert_eq!(bb.killed().await, Signal::SIGKILL as i32);
    common::wait_gone(sup).await;

    // C gives up after its timeout: its supervisor is gone (reaped) by the
    // time C has answered.
    let rc = b.report("c");
    let mut c = b.run(name, "c", &["--timeout", "2s"], &rc.once());
    c.err_with(&format!("elect: campaigning for {name} as c on "))
        .await;
    let csup = children(c.pid().as_raw());
    assert_eq!(csup.len(), 1, "C's children while it waits: {csup:?}");
    let done = c.finish().await;
    assert_eq!(done.code, common::NOT_ELECTED, "{done:?}");
    assert!(
        !common::alive(csup[0]),
        "C's supervisor outlived C's answer"
    );

    common::end(a, &ra, name, sa.epoch).await;
    common::assert_free(&b, name, sa.epoch).await;
    assert!(rb.lines().is_empty(), "B's command ran: {:?}", rb.lines());
    assert!(rc.lines().is_empty(), "C's command ran: {:?}", rc.lines());
}

/// `elect revoke` from another process deposes a running leader (ADR 0111).
#[tokio::test]
async fn revoke_stops_the_leader_and_the_next_term_is_above_it() {
    common::revoke(&Setup::file()).await;
}

/// `elect revoke --fence` where the backend keeps no fences in its store:
/// refused (78) with a hint, and nothing is revoked.
#[tokio::test]
async fn revoke_fence_is_refused_where_fences_are_not_in_the_store() {
    let b = Setup::file();
    let name = "fenced";
    let ra = b.report("a");
    let (a, sa) = common::lead(&b, name, "a", &ra).await;
    let out = common::once(&[
        "revoke",
        "--backend",
        &b.url,
        "--name",
        name,
        "--fence",
        "orders",
    ])
    .await;
    assert_eq!(out.code, common::CONFIG, "{out:?}");
    out.err_line("revoke without --fence and raise each fence to the printed epoch");
    common::assert_led_by(&b.leader_text(name).await, name, "a", sa.epoch);
    common::end(a, &ra, name, sa.epoch).await;
}

/// `elect run --take-over` and `elect transfer` hand the term to the named
/// successor across processes, with no overlap and no race (ADR 0112).
#[tokio::test]
async fn transfer_hands_the_term_to_the_named_successor() {
    common::transfer(&Setup::file()).await;
}

/// A transfer to a candidate that never comes holds the name for the
/// handover window only.
#[tokio::test]
async fn a_transfer_to_nobody_holds_the_name_for_its_window() {
    common::transfer_to_nobody(&Setup::file()).await;
}

/// A leader with --yield-to-preferred hands its term to a waiting
/// candidate of a higher --priority, not to one of its own (ADR 0112).
#[tokio::test]
async fn a_leader_yields_to_a_preferred_candidate() {
    common::preference(&Setup::file()).await;
}
