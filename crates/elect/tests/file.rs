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

/// Ctrl-C in a terminal: the kernel sends SIGINT to the terminal's whole
/// foreground process group, the command included, so `elect` does not
/// send it a second time (a signal from a process, as in the test above,
/// is still forwarded).
#[tokio::test]
async fn ctrl_c_in_a_terminal_reaches_the_command_once() {
    let b = Backend::file();
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

#[tokio::test]
async fn a_command_that_exits_leaves_no_process_behind() {
    common::whole_tree(&Backend::file(), common::Ending::Exit).await;
}

#[tokio::test]
async fn sigterm_to_elect_stops_the_whole_tree() {
    common::whole_tree(&Backend::file(), common::Ending::Term).await;
}

#[tokio::test]
async fn sigkill_of_elect_stops_the_whole_tree() {
    common::whole_tree(&Backend::file(), common::Ending::Kill).await;
}
