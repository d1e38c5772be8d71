//! The holder in a process of its own (this test binary run again as a
//! child), killed with SIGKILL or frozen with SIGSTOP past the TTL. The
//! child writes to a fenced resource every 20 ms while its term is live
//! and prints what happens; the parent's contender takes over only a full
//! TTL after the child's last renewal, with a higher epoch, and a child
//! thawed after losing never has a write refused while it believes it
//! leads (it sees the loss first).

use crate::common;
use crate::race;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use election_postgres::PostgresOptions;
use fencing::Token;
use postgres_testkit::Server;
use tokio::time::Instant;

/// Set in the child: the server's URL.
const CHILD_URL: &str = "ELECTION_POSTGRES_HOLDER_CHILD_URL";
const SLACK: Duration = Duration::from_secs(30);

fn options() -> PostgresOptions {
    PostgresOptions::new(Duration::from_secs(2), Duration::from_millis(500))
        .and_then(|o| o.with_request_timeout(Duration::from_millis(400)))
        .expect("options")
}

/// The child's part: only does anything when run as the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let say = |line: String| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let e = race::election(&url, "child", options()).await;
    let term = e
        .candidate("jobs", "child")
        .expect("candidate")
        .campaign()
        .await
        .expect("the child wins");
    let pool = race::pool(&url, "child-resource");
    let resource = race::Resource::with_pool(pool).await;
    say(format!("WON {}", term.epoch()));
    let mut lost_said = false;
    let mut writes = 0u64;
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until {
        if term.is_lost() {
            if !lost_said {
                say("LOST".into());
                lost_said = true;
            }
        } else if let Ok(token) = Token::issue(&term) {
            match resource.write(token, "child").await {
                Ok(true) => {
                    writes += 1;
                    if writes == 1 {
                        say("WROTE".into());
                    }
                }
                Ok(false) if !term.is_lost() => say("VIOLATION stale while live".into()),
                Ok(false) => say("REFUSED after the loss".into()),
                Err(_) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The child process and what it printed so far.
struct Holder {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Holder {
    fn spawn(server: &Server) -> Holder {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "holder_process::holder_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_URL, server.url())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child");
        let out = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                sink.lock().expect("lines").push(line);
            }
        });
        Holder { child, lines }
    }

    /// Waits (at most `bound`) for a line starting with `prefix`.
    async fn wait_for(&self, prefix: &str, bound: Duration) -> String {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(l) = self
                .lines
                .lock()
                .expect("lines")
                .iter()
                .find(|l| l.contains(prefix))
            {
                return l.clone();
            }
            assert!(
                Instant::now() < deadline,
                "the child printed no {prefix:?} within {bound:?}: {:?}",
                self.lines.lock().expect("lines")
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} failed");
    }

    fn printed(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The renewal version of `jobs`' row.
fn version(server: &Server) -> i64 {
    server
        .sql("SELECT version FROM election.leases WHERE name = 'jobs'")
        .expect("read")
        .parse()
        .expect("a row")
}

/// Waits until the child's row is renewed once more; returns an instant
/// before that renewal committed (when the last read that missed it
/// began). No renewal sent after the fault lands, so the contender may
/// win only a full TTL after this.
async fn next_renewal(server: &Server) -> Instant {
    let first = version(server);
    let deadline = Instant::now() + SLACK;
    let mut before = Instant::now();
    loop {
        let read_at = Instant::now();
        if version(server) > first {
            return before;
        }
        before = read_at;
        assert!(Instant::now() < deadline, "the child never renewed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `fault` on the child after a renewal, then lets a contender in
/// this process win; checks what it must. Returns the child.
async fn takeover(fault: &str) -> (Server, Holder) {
    let server = common::server();
    race::create_ledger(&server);
    server
        .sql("ALTER SYSTEM SET idle_in_transaction_session_timeout = '1s'")
        .expect("set");
    server.sql("SELECT pg_reload_conf()").expect("reload");
    let holder = Holder::spawn(&server);
    let won = holder.wait_for("WON", SLACK).await;
    // libtest may print its own text before ours on the line.
    let child_epoch: u64 = won[won.find("WON ").expect("WON") + 4..]
        .trim()
        .parse()
        .expect("epoch");
    holder.wait_for("WROTE", SLACK).await;
    let e = race::election(&server.url(), "contender", options()).await;
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(Duration::from_millis(20))
        .expect("poll");
    assert!(b.try_campaign().await.expect("answers").is_none());
    let renewed = next_renewal(&server).await;
    holder.signal(fault);
    let term = tokio::time::timeout(options().ttl() + SLACK, b.campaign())
        .await
        .expect("b wins within the bound")
        .expect("b wins");
    let won_at = Instant::now();
    assert!(
        won_at >= renewed + options().ttl(),
        "b won {:?} after the child's last renewal, within the TTL",
        won_at - renewed
    );
    assert!(term.epoch().get() > child_epoch);
    // A child frozen inside its fenced transaction holds the mark row's
    // lock until the server ends its session
    // (`idle_in_transaction_session_timeout`, set below): retried until
    // then.
    let res = race::Resource::open(&server, "b").await;
    let token = Token::issue(&term).expect("token");
    let deadline = Instant::now() + SLACK;
    loop {
        match res.write(token, "b").await {
            Ok(true) => break,
            Ok(false) => panic!("the contender's token was refused as stale"),
            Err(e) => assert!(Instant::now() < deadline, "b cannot write: {e}"),
        }
    }
    // The contender keeps its term while the child is gone.
    term.confirm().await.expect("b holds");
    assert!(!term.is_lost());
    (server, holder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_killed_costs_its_ttl() {
    let (server, holder) = takeover("-KILL").await;
    race::ledger_epochs_never_go_down(&server);
    assert!(
        !holder.printed().iter().any(|l| l.contains("VIOLATION")),
        "{:?}",
        holder.printed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_ttl_sees_the_loss_before_acting() {
    let (server, holder) = takeover("-STOP").await;
    holder.signal("-CONT");
    holder.wait_for("LOST", SLACK).await;
    let printed = holder.printed();
    assert!(
        !printed.iter().any(|l| l.contains("VIOLATION")),
        "{printed:?}"
    );
    race::ledger_epochs_never_go_down(&server);
    // The only rows the child's epoch wrote come before the contender's.
    let last_child = server
        .sql("SELECT coalesce(max(id), 0) FROM public.ledger WHERE who = 'child'")
        .expect("read");
    let first_b = server
        .sql("SELECT min(id) FROM public.ledger WHERE who = 'b'")
        .expect("read");
    assert!(
        last_child.parse::<i64>().expect("id") < first_b.parse::<i64>().expect("id"),
        "a child write landed after the contender's"
    );
}
