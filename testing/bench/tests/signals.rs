//! The CLI rows' contenders and their child end at a clean handover's
//! SIGINT even when the bench was started with SIGINT ignored (a
//! background job of a non-interactive shell): the bench gives SIGINT and
//! SIGQUIT their default actions before it starts anything.

use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `election-bench helper print` (the rows' child), started by a shell
/// that ignores SIGINT and SIGQUIT, prints its line and then ends on
/// SIGINT, killed by it. On the code before it ignored the SIGINT, and
/// the wait below ran out.
#[test]
fn a_child_started_with_sigint_ignored_ends_on_sigint() {
    let bench = env!("CARGO_BIN_EXE_election-bench");
    let mut child = Command::new("sh")
        .args(["-c", "trap '' INT QUIT; exec \"$0\" helper print", bench])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start sh");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its line");
    assert!(line.trim().parse::<u64>().is_ok(), "a stamp: {line:?}");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid_t"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not end within 30 s of SIGINT: it ignored it");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let sigint = nix::sys::signal::Signal::SIGINT as i32;
    assert_eq!(status.signal(), Some(sigint), "{status:?}");
}
