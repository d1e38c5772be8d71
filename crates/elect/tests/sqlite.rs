//! `elect` end to end on the SQLite backend (a database file, TTL 3 s): a
//! killed leader's lease is taken over after a full TTL without renewal.

mod common;

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
