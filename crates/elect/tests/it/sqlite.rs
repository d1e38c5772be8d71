//! `elect` end to end on the SQLite backend (a database file, TTL 3 s): a
//! killed leader's lease is taken over once its whole tree is gone (the
//! same-host lock, ADR 0026), or after a full TTL without renewal.

use crate::common;

use std::time::Duration;

use common::Setup;

#[tokio::test]
async fn a_killed_leader_is_replaced_with_a_higher_epoch() {
    common::takeover(&Setup::sqlite()).await;
}

#[tokio::test]
async fn no_wait_and_timeout_give_the_conflict_exit_code() {
    common::no_wait(&Setup::sqlite()).await;
}

#[tokio::test]
async fn signals_are_forwarded_to_the_command() {
    common::signals(&Setup::sqlite()).await;
}

#[tokio::test]
async fn the_command_exit_code_is_elects_and_the_term_is_resigned() {
    common::exit_code(&Setup::sqlite()).await;
}

#[tokio::test]
async fn a_missing_command_exits_127_and_resigns() {
    common::missing_command(&Setup::sqlite()).await;
}

#[tokio::test]
async fn leader_prints_text_and_json() {
    common::leader_output(&Setup::sqlite()).await;
}

#[tokio::test]
async fn a_killed_holder_reads_presumed_dead_and_observe_shows_the_vacancy() {
    common::a_killed_holder_reads_presumed_dead(&Setup::sqlite()).await;
}

#[tokio::test]
async fn observe_prints_each_change_in_order() {
    common::observe_output(&Setup::sqlite(), true).await;
}

#[tokio::test]
async fn grace_is_refused() {
    let b = Setup::sqlite();
    let r = b.report("x");
    let done = b
        .run_to_end("grace", "a", &["--grace", "1s"], &r.once())
        .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("elect: error: --grace has no meaning for the sqlite backend");
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
}

#[tokio::test]
async fn two_processes_can_open_a_new_database_at_once() {
    for i in 0..10 {
        let b = Setup::sqlite();
        let args = ["leader", "--backend", &b.url, "--name", "j"];
        let (one, two) = tokio::join!(common::once(&args), common::once(&args));
        for done in [one, two] {
            assert_eq!(done.code, 0, "round {i}: {done:?}");
        }
    }
}

#[tokio::test]
async fn a_command_that_exits_leaves_no_process_behind() {
    common::whole_tree(&Setup::sqlite(), common::Ending::Exit).await;
}

#[tokio::test]
async fn sigterm_to_elect_stops_the_whole_tree() {
    common::whole_tree(&Setup::sqlite(), common::Ending::Term).await;
}

#[tokio::test]
async fn sigkill_of_elect_stops_the_whole_tree() {
    common::whole_tree(&Setup::sqlite(), common::Ending::Kill).await;
}

/// SIGSTOP of elect alone (a debugger, a frozen process): its command
/// runs on, but something that does not stop with elect ends it before
/// the lease can expire.
#[tokio::test]
async fn a_stopped_elect_does_not_leave_its_command_running() {
    common::whole_tree(&Setup::sqlite(), common::Ending::Stop).await;
}

/// --kill-grace longer than the time between the end of the lease's known
/// validity and the earliest successor (TTL 3 s: 300 ms) is refused before
/// campaigning, unless --allow-late-kill.
#[tokio::test]
async fn a_kill_grace_past_the_successor_is_refused_unless_allowed() {
    let b = Setup::sqlite();
    let r = b.report("x");
    let done = b
        .run_to_end("late", "a", &["--kill-grace", "10s"], &r.once())
        .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("elect: error: --kill-grace 10s is longer than the 300ms between");
    done.err_line("--allow-late-kill");
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
    let done = b
        .run_to_end(
            "late",
            "a",
            &["--kill-grace", "10s", "--allow-late-kill"],
            &r.once(),
        )
        .await;
    assert_eq!(done.code, 0, "{done:?}");
    let done = b
        .run_to_end("late", "a", &["--kill-grace", "300ms"], &r.once())
        .await;
    assert_eq!(done.code, 0, "{done:?}");
    assert_eq!(r.lines().len(), 2);
}

/// SQLite's same-host lock (ADR 0026) is inherited by the tree like the
/// file backend's claim file: with both elect and its supervisor SIGKILLed,
/// B does not take the shortcut while a process of A's tree runs. (After
/// the TTL B leads anyway: a lease backend cannot stop an escaped tree, see
/// docs/safety.md.)
#[tokio::test]
async fn a_same_host_successor_waits_for_the_whole_tree_not_for_elect() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let b = Setup::sqlite();
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
    // Well inside the TTL (3 s): only the same-host shortcut could elect
    // B this soon, and the tree's inherited lock must stop it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        rb.lines().is_empty(),
        "B ran while A's tree held the same-host lock: {:?}",
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

/// `elect revoke` from another process deposes a running leader (ADR 0111).
#[tokio::test]
async fn revoke_stops_the_leader_and_the_next_term_is_above_it() {
    common::revoke(&Setup::sqlite()).await;
}

/// `elect revoke --fence R`: R's mark is raised to the revocation's epoch
/// in the revocation's own transaction, so R's fence refuses the deposed
/// holder's token (its epoch) before anyone else leads; a fence that was
/// not raised would accept it.
#[tokio::test]
async fn revoke_fence_makes_the_fence_refuse_the_deposed_token() {
    use fencing::{Fence, ResourceName, Token};

    let b = Setup::sqlite();
    let name = "fenced";
    let ra = b.report("a");
    let (a, sa) = common::lead(&b, name, "a", &ra).await;
    let v = common::revoke_json(&b, name, "ops", &["--fence", "orders", "ledger"]).await;
    let fence_at = v["revoked"]["epoch"].as_u64().expect("revoked.epoch");
    assert_eq!(v["fenced"], serde_json::json!(["orders", "ledger"]), "{v}");
    assert!(fence_at > sa.epoch, "{v}");
    let done = a.finish().await;
    assert_eq!(done.code, common::LOST, "{done:?}");

    let db = b.dir.path().join("elect.db");
    let election =
        election_sqlite::SqliteElection::open(&db, election_sqlite::SqliteOptions::default())
            .await
            .expect("open");
    let fence = election.fence();
    let deposed = Token::from_epoch(election_core::Epoch::new(sa.epoch).expect("an epoch"));
    for r in ["orders", "ledger"] {
        let resource = ResourceName::new(r).expect("a resource name");
        let mark = fence.high_water_mark(&resource).await.expect("mark");
        assert_eq!(mark.map(|t| t.epoch().get()), Some(fence_at), "{r}");
        let refused = fence.advance(&resource, deposed).await;
        assert!(
            matches!(refused, Err(fencing::Error::Stale { .. })),
            "{r}: the deposed token {} was not refused: {refused:?}",
            sa.epoch
        );
    }
}

/// `elect run --take-over` and `elect transfer` hand the term to the named
/// successor across processes, with no overlap and no race (ADR 0112).
#[tokio::test]
async fn transfer_hands_the_term_to_the_named_successor() {
    common::transfer(&Setup::sqlite()).await;
}

/// A transfer to a candidate that never comes holds the name for the
/// handover window only.
#[tokio::test]
async fn a_transfer_to_nobody_holds_the_name_for_its_window() {
    common::transfer_to_nobody(&Setup::sqlite()).await;
}

/// A leader with --yield-to-preferred hands its term to a waiting
/// candidate of a higher --priority, not to one of its own (ADR 0112).
#[tokio::test]
async fn a_leader_yields_to_a_preferred_candidate() {
    common::preference(&Setup::sqlite()).await;
}
