//! `elect` end to end on etcd (a real member started by etcd-testkit, TTL
//! 3 s): the scenarios every backend runs (takeover after a SIGKILL, exit
//! codes, `leader` and `observe`, the whole tree, revoke, transfer and
//! preference), and a leader that loses its term when its member stops
//! answering.

use crate::common;

use common::Setup;
use etcd_testkit::Member;

/// The member these scenarios share, each under a prefix of its own.
fn shared(prefix: &str) -> Setup {
    let member = Member::shared().expect("etcd (see etcd-testkit)");
    on(member, prefix)
}

/// `elect`'s setup on `member` under `prefix`, TTL 3 s.
fn on(member: &Member, prefix: &str) -> Setup {
    Setup::etcd(&format!("etcd://{}/{prefix}", member.endpoint()))
}

#[tokio::test]
async fn a_killed_leader_is_replaced_with_a_higher_epoch() {
    common::takeover(&shared("takeover")).await;
}

#[tokio::test]
async fn no_wait_and_timeout_give_the_conflict_exit_code() {
    common::no_wait(&shared("no-wait")).await;
}

#[tokio::test]
async fn signals_are_forwarded_to_the_command() {
    common::signals(&shared("signals")).await;
}

#[tokio::test]
async fn the_command_exit_code_is_elects_and_the_term_is_resigned() {
    common::exit_code(&shared("exit-code")).await;
}

/// On a member of its own: the check that no epoch was spent reads the
/// first epoch, which is the member's revision, and every test of the
/// process moves a shared member's (`cargo test` runs them in one).
#[tokio::test]
async fn a_missing_command_exits_127_and_resigns() {
    let member = Member::start().expect("etcd (see etcd-testkit)");
    common::missing_command(&on(&member, "missing")).await;
}

#[tokio::test]
async fn leader_prints_text_and_json() {
    common::leader_output(&shared("leader")).await;
}

#[tokio::test]
async fn observe_prints_each_change_in_order() {
    common::observe_output(&shared("observe"), true).await;
}

/// A holder SIGKILLed with nobody to take over: etcd deletes its key with
/// its lease, a TTL after its last keep-alive, so `elect leader` names it
/// until then (with no "presumed dead": etcd keeps no lapsed lease) and
/// then says nobody leads; `elect observe`, started while it led, reports
/// the vacancy.
#[tokio::test]
async fn a_killed_holders_key_ages_out_and_observe_shows_the_vacancy() {
    use nix::sys::signal::Signal;
    let b = shared("killed-holder");
    let name = "dead-holder";
    let ra = b.report("a");
    let (a, sa) = common::lead(&b, name, "a", &ra).await;
    let mut watcher = b.observe(name, false);
    common::assert_led_by(&watcher.out_line().await, name, "a", sa.epoch);
    common::assert_led_by(&b.leader_text(name).await, name, "a", sa.epoch);

    a.signal(Signal::SIGKILL);
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    common::wait_gone(sa.pid).await;
    assert_eq!(watcher.out_line().await, format!("{name}: no leader"));
    assert_eq!(b.leader_text(name).await, format!("{name}: no leader"));
    watcher.signal(Signal::SIGINT);
    let done = watcher.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    common::after_a_dead_holder(&b, name, sa.epoch).await;
}

#[tokio::test]
async fn a_command_that_exits_leaves_no_process_behind() {
    common::whole_tree(&shared("tree-exit"), common::Ending::Exit).await;
}

#[tokio::test]
async fn sigkill_of_elect_stops_the_whole_tree() {
    common::whole_tree(&shared("tree-kill"), common::Ending::Kill).await;
}

/// `elect revoke` from another process deposes a running leader (ADR
/// 0111): etcd's revocation takes the transaction's revision as its epoch.
#[tokio::test]
async fn revoke_stops_the_leader_and_the_next_term_is_above_it() {
    common::revoke(&shared("revoke")).await;
}

/// `elect run --take-over` and `elect transfer` hand the term to the named
/// successor across processes, with no overlap and no race (ADR 0112).
#[tokio::test]
async fn transfer_hands_the_term_to_the_named_successor() {
    common::transfer(&shared("transfer")).await;
}

/// A transfer to a candidate that never comes holds the name for the
/// handover window only (the handover key's lease).
#[tokio::test]
async fn a_transfer_to_nobody_holds_the_name_for_its_window() {
    common::transfer_to_nobody(&shared("transfer-nobody")).await;
}

/// A leader with --yield-to-preferred hands its term to a waiting
/// candidate of a higher --priority (ADR 0112).
#[tokio::test]
async fn a_leader_yields_to_a_preferred_candidate() {
    common::preference(&shared("preference")).await;
}

/// The member stops answering (paused) past A's lease: A loses its term
/// and stops its whole tree before it exits; once the member is back, B
/// is elected and finds none of it.
#[tokio::test]
async fn losing_the_term_stops_the_whole_tree() {
    let member = std::cell::RefCell::new(Member::start().expect("etcd (see etcd-testkit)"));
    let b = on(&member.borrow(), "tree-loss");
    common::losing_the_term_stops_the_whole_tree(
        &b,
        || member.borrow_mut().pause().expect("pause etcd"),
        || member.borrow_mut().resume().expect("resume etcd"),
    )
    .await;
}

/// A member older than election-etcd needs (its `Maintenance.Status`
/// version rewritten by the kit's proxy: no etcd before 3.4 installs
/// here): permanent, 78 at once, the message naming the release needed
/// and the hint the fix; COMMAND never runs. Before: it campaigned.
#[tokio::test]
async fn a_server_too_old_exits_78_naming_the_release_needed() {
    let member = Member::shared().expect("etcd (see etcd-testkit)");
    let installed = etcd_testkit::etcd_version().expect("etcd --version");
    let older = etcd_testkit::older_release(&installed);
    let proxy = etcd_testkit::Proxy::start_rewriting(member.client_port(), &installed, &older)
        .expect("a proxy");
    let url = format!("etcd://127.0.0.1:{}/too-old", proxy.port());
    let done = common::once(&["run", "--backend", &url, "--name", "j", "--", "echo", "ran"]).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    let error = done.err_line("elect: error: ");
    assert!(error.contains("needs etcd 3.4 or later"), "{error}");
    assert!(error.contains(&older), "{error}");
    let hint = done.err_line("elect: hint: ");
    assert!(hint.contains("upgrade etcd"), "{hint}");
    assert!(!done.stdout.iter().any(|l| l == "ran"), "{done:?}");
}
