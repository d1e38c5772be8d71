//! `elect` end to end on the file backend (a directory): the kernel frees
//! a killed leader's lock at once.

mod common;

use common::Backend;

#[tokio::test]
async fn a_killed_leader_is_replaced_with_a_higher_epoch() {
    common::takeover(&Backend::file()).await;
}

#[tokio::test]
async fn no_wait_and_timeout_give_the_conflict_exit_code() {
    common::no_wait(&Backend::file()).await;
}

#[tokio::test]
async fn signals_are_forwarded_to_the_command() {
    common::signals(&Backend::file()).await;
}

#[tokio::test]
async fn the_command_exit_code_is_elects_and_the_term_is_resigned() {
    common::exit_code(&Backend::file()).await;
}

#[tokio::test]
async fn a_missing_command_exits_127_and_resigns() {
    common::missing_command(&Backend::file()).await;
}

#[tokio::test]
async fn leader_prints_text_and_json() {
    common::leader_output(&Backend::file()).await;
}

#[tokio::test]
async fn observe_prints_each_change_in_order() {
    common::observe_output(&Backend::file(), true).await;
}

#[tokio::test]
async fn ttl_flags_are_refused() {
    let b = Backend::file();
    let r = b.report("x");
    let done = b.run_to_end("ttl", "a", &["--ttl", "3s"], &r.once()).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("elect: error: --ttl, --renew and --grace have no meaning for the file backend");
    done.err_line("elect: hint: ");
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
}
