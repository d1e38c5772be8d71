//! Real candidate processes competing through one directory.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const PATIENCE: Duration = Duration::from_secs(30);
const BIN: &str = env!("CARGO_BIN_EXE_election-file-candidate");

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Lines<BufReader<ChildStdout>>,
    name: String,
}

impl Proc {
    fn start(dir: &std::path::Path, identity: &str) -> Proc {
        let mut child = Command::new(BIN)
            .args([
                "--dir",
                dir.to_str().expect("utf-8"),
                "--name",
                "jobs",
                "--identity",
                identity,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn candidate");
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Proc {
            child,
            stdin,
            out,
            name: identity.to_owned(),
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id().expect("running") as i32)
    }

    /// The next line, which must start with `word`; returns the rest.
    async fn expect(&mut self, word: &str) -> Vec<String> {
        let line = tokio::time::timeout(PATIENCE, self.out.next_line())
            .await
            .unwrap_or_else(|_| panic!("{}: no {word:?} within {PATIENCE:?}", self.name))
            .expect("read")
            .unwrap_or_else(|| panic!("{}: exited before {word:?}", self.name));
        let mut parts = line.split(' ').map(str::to_owned);
        assert_eq!(
            parts.next().as_deref(),
            Some(word),
            "{}: got {line:?}",
            self.name
        );
        parts.collect()
    }

    async fn elected(&mut self) -> (u64, u128) {
        let rest = self.expect("elected").await;
        (
            rest[0].parse().expect("epoch"),
            rest[1].parse().expect("ns"),
        )
    }

    async fn send(&mut self, cmd: &str) {
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .await
            .expect("write");
        stdin.flush().await.expect("flush");
    }
}

#[tokio::test]
async fn sigkill_of_the_leader_hands_over_with_a_higher_epoch() {
    let dir = tempfile::tempdir().expect("dir");
    let mut a = Proc::start(dir.path(), "a");
    a.expect("campaigning").await;
    let (e1, _) = a.elected().await;
    let mut b = Proc::start(dir.path(), "b");
    b.expect("campaigning").await;
    kill(a.pid(), Signal::SIGKILL).expect("kill");
    let (e2, _) = b.elected().await;
    assert!(e2 > e1, "epoch {e2} after {e1}");
    b.send("resign").await;
    b.expect("resigning").await;
    b.expect("resigned").await;
    // A third process after the crash and the resign: higher again.
    let mut c = Proc::start(dir.path(), "c");
    c.expect("campaigning").await;
    let (e3, _) = c.elected().await;
    assert!(e3 > e2);
}

#[tokio::test]
async fn a_stopped_follower_does_not_block_the_others() {
    let dir = tempfile::tempdir().expect("dir");
    let mut a = Proc::start(dir.path(), "a");
    a.expect("campaigning").await;
    let (e1, _) = a.elected().await;
    let mut stopped = Proc::start(dir.path(), "stopped");
    stopped.expect("campaigning").await;
    kill(stopped.pid(), Signal::SIGSTOP).expect("stop");
    let mut c = Proc::start(dir.path(), "c");
    c.expect("campaigning").await;
    a.send("resign").await;
    a.expect("resigning").await;
    let (e2, _) = c.elected().await;
    assert!(e2 > e1);
    // And a crash of the new leader still hands over past the stopped one.
    let mut d = Proc::start(dir.path(), "d");
    d.expect("campaigning").await;
    kill(c.pid(), Signal::SIGKILL).expect("kill");
    let (e3, _) = d.elected().await;
    assert!(e3 > e2);
    kill(stopped.pid(), Signal::SIGCONT).expect("cont");
    d.send("resign").await;
    d.expect("resigning").await;
    let (e4, _) = stopped.elected().await;
    assert!(
        e4 > e3,
        "the resumed follower wins next, with a higher epoch"
    );
}

#[tokio::test]
async fn many_processes_take_turns_one_at_a_time() {
    let dir = tempfile::tempdir().expect("dir");
    let mut procs: Vec<Proc> = (0..5)
        .map(|i| Proc::start(dir.path(), &format!("p{i}")))
        .collect();
    for p in &mut procs {
        p.expect("campaigning").await;
    }
    // Each leader resigns as soon as it is elected (stdin closed).
    for p in &mut procs {
        p.stdin.take();
    }
    let mut terms = Vec::new();
    for p in &mut procs {
        let (epoch, elected) = p.elected().await;
        let resigning: u128 = p.expect("resigning").await[0].parse().expect("ns");
        let resigned: u128 = p.expect("resigned").await[0].parse().expect("ns");
        terms.push((elected, resigned, epoch, resigning));
    }
    terms.sort();
    for pair in terms.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        assert!(
            next.2 > prev.2,
            "epochs not increasing in order of election: {terms:?}"
        );
        assert!(next.0 >= prev.3, "two leaders at once: {terms:?}");
    }
}
