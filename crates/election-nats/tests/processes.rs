//! Real candidate processes against a real nats-server: SIGKILL and SIGSTOP
//! of the leader.

use std::process::Stdio;
use std::time::Duration;

use nats_testkit::Server;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const PATIENCE: Duration = Duration::from_secs(60);
const BIN: &str = env!("CARGO_BIN_EXE_election-nats-candidate");
const TTL_MS: u64 = 3000;

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Lines<BufReader<ChildStdout>>,
    name: String,
}

impl Proc {
    fn start(url: &str, identity: &str) -> Proc {
        let mut child = Command::new(BIN)
            .args(["--url", url, "--name", "jobs", "--identity", identity])
            .args(["--ttl-ms", &TTL_MS.to_string(), "--poll-ms", "200"])
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

    async fn line(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.out.next_line())
            .await
            .unwrap_or_else(|_| panic!("{}: silent for {PATIENCE:?}", self.name))
            .expect("read")
            .unwrap_or_else(|| panic!("{}: exited", self.name))
    }

    async fn expect(&mut self, word: &str) -> Vec<String> {
        let line = self.line().await;
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

fn mono_ns() -> u128 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    t.tv_sec() as u128 * 1_000_000_000 + t.tv_nsec() as u128
}

#[tokio::test]
async fn sigkill_of_the_leader_hands_over_after_the_ttl_and_grace() {
    let server = Server::start().expect("nats-server");
    let mut a = Proc::start(&server.url(), "a");
    a.expect("campaigning").await;
    let (e1, _) = a.elected().await;
    let mut b = Proc::start(&server.url(), "b");
    b.expect("campaigning").await;
    let killed = mono_ns();
    kill(a.pid(), Signal::SIGKILL).expect("kill");
    let (e2, at) = b.elected().await;
    assert!(e2 > e1, "epoch {e2} after {e1}");
    let took = Duration::from_nanos((at - killed) as u64);
    // The key expires a TTL after A's last renewal (at most a renew
    // interval before the kill), then B waits the failover grace.
    let renew = Duration::from_millis(TTL_MS / 3);
    assert!(
        took >= Duration::from_millis(TTL_MS) - renew,
        "took over after {took:?}, before the lease could expire"
    );
    b.send("confirm").await;
    assert_eq!(b.expect("confirmed").await, [e2.to_string()]);
}

#[tokio::test]
async fn a_paused_leader_learns_its_loss_before_anything_else() {
    let server = Server::start().expect("nats-server");
    let mut a = Proc::start(&server.url(), "a");
    a.expect("campaigning").await;
    let (e1, _) = a.elected().await;
    let mut b = Proc::start(&server.url(), "b");
    b.expect("campaigning").await;
    kill(a.pid(), Signal::SIGSTOP).expect("stop");
    let (e2, _) = b.elected().await;
    assert!(e2 > e1);
    // A wakes with a commit-point check already queued.
    a.send("confirm").await;
    kill(a.pid(), Signal::SIGCONT).expect("cont");
    let first = a.line().await;
    assert!(
        first.starts_with("lost "),
        "the paused leader did something before learning its loss: {first:?}"
    );
    let second = a.line().await;
    assert!(
        second.starts_with("not-confirmed "),
        "a deposed leader passed the commit point: {second:?}"
    );
    b.send("confirm").await;
    assert_eq!(b.expect("confirmed").await, [e2.to_string()]);
}

#[tokio::test]
async fn a_clean_resign_hands_over_without_grace() {
    let server = Server::start().expect("nats-server");
    let mut a = Proc::start(&server.url(), "a");
    a.expect("campaigning").await;
    let (e1, _) = a.elected().await;
    let mut b = Proc::start(&server.url(), "b");
    b.expect("campaigning").await;
    a.send("resign").await;
    let resigning: u128 = a.expect("resigning").await[0].parse().expect("ns");
    let (e2, at) = b.elected().await;
    assert!(e2 > e1);
    // Woken by the delete, not by polling or the TTL: well under the TTL.
    let took = Duration::from_nanos((at - resigning) as u64);
    assert!(
        took < Duration::from_millis(TTL_MS),
        "handover took {took:?}"
    );
}
