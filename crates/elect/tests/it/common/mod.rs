//! What the `elect` end-to-end tests share: running the real binary and
//! reading its output line by line, a command for it to run that reports
//! to a file, and the scenarios every backend runs.
#![allow(dead_code)] // each test file uses its own part

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use election_url::BackendUrl;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_elect");

/// How long any one expected event may take before the test fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// Exit codes `elect` documents.
pub(crate) const NOT_ELECTED: i32 = 75;
pub(crate) const USAGE: i32 = 64;
pub(crate) const UNAVAILABLE: i32 = 69;
pub(crate) const CONFIG: i32 = 78;
pub(crate) const LOST: i32 = 79;
pub(crate) const NOT_FOUND: i32 = 127;

/// A backend as the tests set it up: its URL (printed by election-url)
/// and the flags and bounds the shared scenarios use with it.
pub(crate) struct Setup {
    /// `--backend`.
    pub(crate) url: String,
    /// Timing flags every `elect run` gets (`--ttl`, `--grace`).
    pub(crate) timing: Vec<String>,
    /// How long a live leader must keep a waiting candidate out in the
    /// takeover test: longer than a TTL, so that renewals are what keeps
    /// it out.
    pub(crate) hold_window: Duration,
    /// For the child's report files.
    pub(crate) dir: tempfile::TempDir,
}

impl Setup {
    /// The file backend in a fresh directory.
    pub(crate) fn file() -> Setup {
        let dir = temp_dir();
        let url = BackendUrl::file(dir.path().join("elections")).to_string();
        Setup {
            url,
            timing: Vec::new(),
            // No lease: the lock is held while A lives.
            hold_window: Duration::from_millis(500),
            dir,
        }
    }

    /// A fresh SQLite database, TTL 3 s.
    pub(crate) fn sqlite() -> Setup {
        let dir = temp_dir();
        let url = election_url::BackendUrl::new(election_sqlite::SqliteUrl::new(
            dir.path().join("elect.db"),
        ))
        .to_string();
        Setup {
            url,
            timing: vec!["--ttl".into(), "3s".into()],
            hold_window: Duration::from_secs(4),
            dir,
        }
    }

    /// NATS at `url`, with `timing` flags for `elect run`.
    pub(crate) fn nats(url: &str, timing: &[&str]) -> Setup {
        let url = BackendUrl::parse(url).expect("a NATS URL");
        Setup {
            url: url.with_secrets().to_string(),
            timing: timing.iter().map(|s| (*s).to_owned()).collect(),
            hold_window: Duration::from_secs(4),
            dir: temp_dir(),
        }
    }

    /// etcd at `url` (`etcd://host:port/prefix`), TTL 3 s.
    pub(crate) fn etcd(url: &str) -> Setup {
        let url = BackendUrl::parse(url).expect("an etcd URL");
        Setup {
            url: url.with_secrets().to_string(),
            timing: vec!["--ttl".into(), "3s".into()],
            hold_window: Duration::from_secs(4),
            dir: temp_dir(),
        }
    }

    /// A report file for one child, in this backend's directory.
    pub(crate) fn report(&self, label: &str) -> Report {
        Report {
            path: self.dir.path().join(format!("{label}.out")),
        }
    }

    /// `elect run` on election `name` as `identity` with the backend's
    /// timing, `extra` flags and `command`.
    pub(crate) fn run(
        &self,
        name: &str,
        identity: &str,
        extra: &[&str],
        command: &[String],
    ) -> Elect {
        let mut args: Vec<String> = [
            "run",
            "--backend",
            &self.url,
            "--name",
            name,
            "--identity",
            identity,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(self.timing.iter().cloned());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args.push("--".to_owned());
        args.extend(command.iter().cloned());
        Elect::spawn(&args, &format!("run {identity}"))
    }

    /// `elect run` to completion.
    pub(crate) async fn run_to_end(
        &self,
        name: &str,
        identity: &str,
        extra: &[&str],
        command: &[String],
    ) -> Finished {
        self.run(name, identity, extra, command).finish().await
    }

    /// `elect leader` (text): exit 0, one line on stdout.
    pub(crate) async fn leader_text(&self, name: &str) -> String {
        let out = once(&["leader", "--backend", &self.url, "--name", name]).await;
        assert_eq!(out.code, 0, "elect leader: {out:?}");
        assert_eq!(out.stdout.len(), 1, "elect leader: {out:?}");
        out.stdout[0].clone()
    }

    /// `elect leader --json`: exit 0, one JSON object on stdout.
    pub(crate) async fn leader_json(&self, name: &str) -> Value {
        let out = once(&["leader", "--backend", &self.url, "--name", name, "--json"]).await;
        assert_eq!(out.code, 0, "elect leader --json: {out:?}");
        assert_eq!(out.stdout.len(), 1, "elect leader --json: {out:?}");
        json(&out.stdout[0])
    }

    /// `elect observe` (`--json` if `json`), with a short poll.
    pub(crate) fn observe(&self, name: &str, json: bool) -> Elect {
        let mut args = vec![
            "observe",
            "--backend",
            &self.url,
            "--name",
            name,
            "--poll",
            "100ms",
        ];
        if json {
            args.push("--json");
        }
        Elect::spawn(&args, if json { "observe --json" } else { "observe" })
    }
}

/// A temp directory on the build's disk.
pub(crate) fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

/// Parses one line as JSON.
pub(crate) fn json(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

/// A finished `elect`: its exit code and every line it wrote.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) code: i32,
    pub(crate) stdout: Vec<String>,
    pub(crate) stderr: Vec<String>,
}

impl Finished {
    /// The one stderr line containing `needle` (fails if none).
    pub(crate) fn err_line(&self, needle: &str) -> &str {
        self.stderr
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no stderr line with {needle:?}: {self:?}"))
    }
}

/// Runs `elect args` to its end (within [`PATIENCE`]).
pub(crate) async fn once(args: &[&str]) -> Finished {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    Elect::spawn(&args, &args.join(" ")).finish().await
}

/// A running `elect`, killed (SIGKILL) when dropped.
pub(crate) struct Elect {
    label: String,
    child: Child,
    out: mpsc::UnboundedReceiver<String>,
    err: mpsc::UnboundedReceiver<String>,
    /// Every line read so far, for failure messages.
    seen_out: Vec<String>,
    seen_err: Vec<String>,
}

fn forward<R>(reader: R, tx: mpsc::UnboundedSender<String>)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut lines = BufReader::new(reader).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
}

impl Elect {
    /// Starts `elect args`; `label` names it in failures.
    pub(crate) fn spawn<S: AsRef<std::ffi::OsStr>>(args: &[S], label: &str) -> Elect {
        let mut command = Command::new(BIN);
        command.args(args).stdin(Stdio::null());
        Elect::start(command, label)
    }

    /// Starts `elect args` as a shell starts a foreground job in a
    /// terminal: the leader of a new session whose controlling terminal is
    /// `terminal` (a pty's slave side, also its stdin), so its process
    /// group is the terminal's foreground group and gets the terminal's
    /// signals (Ctrl-C written to the master side).
    pub(crate) fn spawn_in_terminal<S: AsRef<std::ffi::OsStr>>(
        args: &[S],
        label: &str,
        terminal: std::os::fd::OwnedFd,
    ) -> Elect {
        let mut command = Command::new(BIN);
        command.args(args).stdin(Stdio::from(terminal));
        #[allow(unsafe_code)]
        // SAFETY: between fork and exec the child only calls setsid(2) and
        // ioctl(2), both async-signal-safe; nothing allocates or locks.
        unsafe {
            command.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                // TIOCSCTTY on stdin: the pty becomes the session's
                // controlling terminal, this process group its foreground.
                if libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Elect::start(command, label)
    }

    pub(crate) fn start(mut command: Command, label: &str) -> Elect {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{label}: cannot start {BIN}: {e}"));
        let (out_tx, out) = mpsc::unbounded_channel();
        let (err_tx, err) = mpsc::unbounded_channel();
        forward(child.stdout.take().expect("piped"), out_tx);
        forward(child.stderr.take().expect("piped"), err_tx);
        Elect {
            label: label.to_owned(),
            child,
            out,
            err,
            seen_out: Vec::new(),
            seen_err: Vec::new(),
        }
    }

    pub(crate) fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id().expect("still running")).expect("a pid_t"))
    }

    pub(crate) fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).unwrap_or_else(|e| panic!("{}: {sig}: {e}", self.label));
    }

    /// Still running (not exited)?
    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// The stderr lines written so far, without waiting.
    pub(crate) fn stderr_so_far(&mut self) -> &[String] {
        while let Ok(line) = self.err.try_recv() {
            self.seen_err.push(line);
        }
        &self.seen_err
    }

    /// Waits for a stderr line for which `pred` holds; returns it.
    pub(crate) async fn err_until(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            match tokio::time::timeout_at(deadline, self.err.recv()).await {
                Ok(Some(line)) => {
                    self.seen_err.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Ok(None) => panic!(
                    "{}: stderr ended without {what}; stderr: {:#?}",
                    self.label, self.seen_err
                ),
                Err(_) => panic!(
                    "{}: no {what} within {PATIENCE:?}; stderr: {:#?}",
                    self.label, self.seen_err
                ),
            }
        }
    }

    /// Waits for a stderr line containing `needle`.
    pub(crate) async fn err_with(&mut self, needle: &str) -> String {
        self.err_until(needle, |l| l.contains(needle)).await
    }

    /// The next stdout line.
    pub(crate) async fn out_line(&mut self) -> String {
        let got = tokio::time::timeout(PATIENCE, self.out.recv()).await;
        if let Ok(Some(line)) = got {
            self.seen_out.push(line.clone());
            return line;
        }
        let why = if got.is_ok() {
            "stdout ended"
        } else {
            "no stdout line within the patience"
        };
        let stderr = self.stderr_so_far().to_vec();
        panic!(
            "{}: {why}; stdout: {:#?}; stderr: {stderr:#?}",
            self.label, self.seen_out
        );
    }

    /// Waits for the exit and the end of its output; the exit code (fails
    /// if killed by a signal).
    pub(crate) async fn finish(mut self) -> Finished {
        let Ok(status) = tokio::time::timeout(PATIENCE, self.child.wait()).await else {
            let stderr = self.stderr_so_far().to_vec();
            while let Ok(line) = self.out.try_recv() {
                self.seen_out.push(line);
            }
            panic!(
                "{}: still running after {PATIENCE:?}; stdout: {:#?}; stderr: {stderr:#?}",
                self.label, self.seen_out
            );
        };
        let status = status.expect("wait");
        let mut stdout = std::mem::take(&mut self.seen_out);
        let mut stderr = std::mem::take(&mut self.seen_err);
        for (rx, lines) in [(&mut self.out, &mut stdout), (&mut self.err, &mut stderr)] {
            // The pipes close when the last holder (elect, or a stray
            // grandchild) exits.
            while let Some(line) = tokio::time::timeout(PATIENCE, rx.recv())
                .await
                .expect("output to end")
            {
                lines.push(line);
            }
        }
        let code = status.code().unwrap_or_else(|| {
            panic!("{}: killed by a signal ({status}): {stderr:#?}", self.label)
        });
        Finished {
            code,
            stdout,
            stderr,
        }
    }

    /// Waits for the exit of an `elect` killed by a signal; the signal.
    pub(crate) async fn killed(mut self) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("exit")
            .expect("wait");
        status
            .signal()
            .unwrap_or_else(|| panic!("{}: exited by itself: {status}", self.label))
    }
}

/// The command `elect` runs in most tests: records its start (pid and
/// the `ELECTION_*` environment) and the signals it gets in a file.
/// `on_term` is the shell run on SIGTERM.
const WORKER: &str = r#"out="$1"
trap "$2" TERM
trap 'echo hup >> "$out"' HUP
trap 'echo int >> "$out"' INT
echo "start $$ $ELECTION_NAME $ELECTION_EPOCH $ELECTION_IDENTITY $ELECTION_TOKEN" >> "$out"
while :; do sleep 0.1; done"#;

/// A child's report file.
pub(crate) struct Report {
    pub(crate) path: PathBuf,
}

/// What a worker saw when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Started {
    pub(crate) pid: i32,
    pub(crate) name: String,
    pub(crate) epoch: u64,
    pub(crate) identity: String,
    pub(crate) token: String,
}

impl Report {
    /// A worker that exits 0 on SIGTERM.
    pub(crate) fn worker(&self) -> Vec<String> {
        self.worker_on_term(r#"echo term >> "$out"; exit 0"#)
    }

    /// A worker that runs `on_term` on SIGTERM.
    pub(crate) fn worker_on_term(&self, on_term: &str) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            WORKER.into(),
            "worker".into(),
            self.path.display().to_string(),
            on_term.into(),
        ]
    }

    /// A command that writes its environment to the file and exits 0.
    pub(crate) fn once(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            r#"echo "start $$ $ELECTION_NAME $ELECTION_EPOCH $ELECTION_IDENTITY $ELECTION_TOKEN" >> "$1""#.into(),
            "once".into(),
            self.path.display().to_string(),
        ]
    }

    /// The lines so far (none if the file does not exist).
    pub(crate) fn lines(&self) -> Vec<String> {
        match std::fs::read_to_string(&self.path) {
            Ok(s) => s.lines().map(str::to_owned).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("{}: {e}", self.path.display()),
        }
    }

    /// Once the checker child said `checked` (`checker`): the processes
    /// it found alive (`alive <pid> ...` lines).
    pub(crate) async fn alive_when_checked(&self) -> Vec<String> {
        self.wait_for("checked").await;
        self.lines()
            .into_iter()
            .filter(|l| l.starts_with("alive "))
            .collect()
    }

    /// Waits until the file has a line equal to `line`.
    pub(crate) async fn wait_for(&self, line: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.lines().iter().any(|l| l == line) {
            assert!(
                Instant::now() < deadline,
                "{}: no {line:?} within {PATIENCE:?}: {:?}",
                self.path.display(),
                self.lines()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the `start` line and parses it.
    pub(crate) async fn started(&self) -> Started {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(line) = self.lines().iter().find(|l| l.starts_with("start ")) {
                let f: Vec<&str> = line.split(' ').collect();
                assert_eq!(f.len(), 6, "start line {line:?}");
                return Started {
                    pid: f[1].parse().expect("pid"),
                    name: f[2].to_owned(),
                    epoch: f[3].parse().unwrap_or_else(|_| panic!("epoch in {line:?}")),
                    identity: f[4].to_owned(),
                    token: f[5].to_owned(),
                };
            }
            assert!(
                Instant::now() < deadline,
                "{}: the command did not start within {PATIENCE:?}",
                self.path.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Whether process `pid` is alive (a zombie is not).
pub(crate) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        }
    }
}

/// Waits until process `pid` is gone.
pub(crate) async fn wait_gone(pid: i32) -> Duration {
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < PATIENCE,
            "process {pid} still alive after {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
        .try_into()
        .expect("before the year 584 million")
}

/// Whether a text `leader` line shows `identity` leading `name` in a term
/// below `epoch`.
fn earlier_term_of(line: &str, name: &str, identity: &str, epoch: u64) -> bool {
    line.strip_prefix(&format!("{name}: led by {identity} in term "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|e| e.parse::<u64>().ok())
        .is_some_and(|e| e < epoch)
}

/// Checks a text `leader` line: `NAME: led by ID in term N` with an
/// optional ` (since <UTC>)`.
pub(crate) fn assert_led_by(line: &str, name: &str, identity: &str, epoch: u64) {
    let head = format!("{name}: led by {identity} in term {epoch}");
    let rest = line
        .strip_prefix(&head)
        .unwrap_or_else(|| panic!("{line:?} does not start with {head:?}"));
    assert!(
        rest.is_empty() || (rest.starts_with(" (since ") && rest.ends_with("Z)")),
        "{line:?}: unexpected tail {rest:?}"
    );
}

/// Checks a JSON `leader` object: `{"name", "leader": {...}}` naming
/// `identity` and `epoch`, elected after `after_ms` (if it says since when).
pub(crate) fn assert_json_led_by(v: &Value, name: &str, identity: &str, epoch: u64, after_ms: u64) {
    assert_eq!(v["name"], name, "{v}");
    let leader = &v["leader"];
    assert_eq!(leader["identity"], identity, "{v}");
    assert_eq!(leader["epoch"], epoch, "{v}");
    if let Some(since) = leader.get("since_unix_ms") {
        let since = since
            .as_u64()
            .unwrap_or_else(|| panic!("since_unix_ms: {v}"));
        // One host, one clock; a little slack for millisecond rounding.
        assert!(
            since + 1000 >= after_ms && since <= now_ms() + 1000,
            "since_unix_ms {since} not between {after_ms} and now: {v}"
        );
        let text = leader["since"]
            .as_str()
            .unwrap_or_else(|| panic!("since: {v}"));
        assert!(text.ends_with('Z') && text.len() == 24, "since {text:?}");
    }
}

/// Checks a JSON `leader` object with no leader.
pub(crate) fn assert_json_no_leader(v: &Value, name: &str) {
    assert_eq!(v["name"], name, "{v}");
    assert!(v["leader"].is_null(), "{v}");
    assert_eq!(v.as_object().map(|o| o.len()), Some(2), "{v}");
}

/// Starts a worker under `elect run` and waits until it runs; checks its
/// environment and the `started` line's pid.
pub(crate) async fn lead(
    b: &Setup,
    name: &str,
    identity: &str,
    report: &Report,
) -> (Elect, Started) {
    lead_with(b, name, identity, report, &[]).await
}

/// As [`lead`], with `extra` arguments to `elect run`.
pub(crate) async fn lead_with(
    b: &Setup,
    name: &str,
    identity: &str,
    report: &Report,
    extra: &[&str],
) -> (Elect, Started) {
    let mut run = b.run(name, identity, extra, &report.worker());
    let started_line = run.err_with("elect: started ").await;
    let s = report.started().await;
    assert_eq!(s.name, name);
    assert_eq!(s.identity, identity);
    assert_eq!(s.token, s.epoch.to_string(), "the token is the epoch");
    assert!(s.epoch >= 1);
    assert!(
        started_line.ends_with(&format!("(pid {})", s.pid)),
        "{started_line:?} does not name pid {}",
        s.pid
    );
    let elected = format!("elect: elected: {name}, term {} as {identity}", s.epoch);
    assert!(
        run.stderr_so_far().contains(&elected),
        "no {elected:?}: {:?}",
        run.stderr_so_far()
    );
    (run, s)
}

/// Ends a run by SIGTERM to `elect`: the worker records it and exits 0,
/// `elect` resigns and exits 0.
pub(crate) async fn end(run: Elect, report: &Report, name: &str, epoch: u64) {
    run.signal(Signal::SIGTERM);
    report.wait_for("term").await;
    let done = run.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line("forwarding SIGTERM to the command");
    assert_eq!(
        done.stderr.last().map(String::as_str),
        Some(format!("elect: resigned {name}, term {epoch}").as_str()),
        "{done:?}"
    );
}

/// Asserts that `name` is free right now: `elect run --no-wait` is elected
/// at once, with an epoch above `above`; returns that epoch.
pub(crate) async fn assert_free(b: &Setup, name: &str, above: u64) -> u64 {
    let report = b.report(&format!("free-{}", now_ms()));
    let done = b
        .run_to_end(name, "prober", &["--no-wait"], &report.once())
        .await;
    assert_eq!(done.code, 0, "{name} is not free: {done:?}");
    let s = report.started().await;
    assert!(s.epoch > above, "epoch {} after {above}", s.epoch);
    s.epoch
}

// ---- Scenarios every backend runs ----

/// Two `elect run`: A's command runs, B waits; SIGKILL of A kills A's
/// command (PR_SET_PDEATHSIG) and B's command starts with a higher epoch.
pub(crate) async fn takeover(b: &Setup) {
    let name = "takeover";
    let (ra, rb) = (b.report("a"), b.report("b"));
    let (a, sa) = lead(b, name, "a", &ra).await;
    let mut bb = b.run(name, "b", &[], &rb.worker());
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    // A lives (and renews): B must not start, for longer than a TTL.
    tokio::time::sleep(b.hold_window).await;
    assert!(alive(sa.pid), "A's command died");
    assert_eq!(ra.lines().len(), 1, "A's command: {:?}", ra.lines());
    assert!(rb.lines().is_empty(), "B's command ran: {:?}", rb.lines());
    assert!(
        !bb.stderr_so_far().iter().any(|l| l.contains("elected")),
        "B elected while A leads: {:?}",
        bb.stderr_so_far()
    );
    assert!(bb.running(), "B gave up: {:?}", bb.stderr_so_far());

    a.signal(Signal::SIGKILL);
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    wait_gone(sa.pid).await;
    // The kernel killed it: it never saw a SIGTERM.
    assert_eq!(ra.lines().len(), 1, "A's command: {:?}", ra.lines());

    let sb = rb.started().await;
    assert_eq!(sb.identity, "b");
    assert_eq!(sb.name, name);
    assert!(
        sb.epoch > sa.epoch,
        "B's epoch {} after A's {}",
        sb.epoch,
        sa.epoch
    );
    assert_eq!(sb.token, sb.epoch.to_string());
    bb.err_with(&format!("elect: elected: {name}, term {} as b", sb.epoch))
        .await;
    end(bb, &rb, name, sb.epoch).await;
}

/// `--no-wait` (and `--timeout`) while another leads: 75, or the
/// `--conflict-exit-code`, the leader named, the command not run; once the
/// leader is gone, `--no-wait` is elected at once.
pub(crate) async fn no_wait(b: &Setup) {
    let name = "no-wait";
    let ra = b.report("a");
    let (a, sa) = lead(b, name, "a", &ra).await;
    let rc = b.report("c");
    let led_by = format!("not elected: {name} is led by a in term {}", sa.epoch);

    let done = b.run_to_end(name, "c", &["--no-wait"], &rc.once()).await;
    assert_eq!(done.code, NOT_ELECTED, "{done:?}");
    done.err_line(&led_by);

    let done = b
        .run_to_end(name, "c", &["-n", "--conflict-exit-code", "9"], &rc.once())
        .await;
    assert_eq!(done.code, 9, "{done:?}");
    done.err_line(&led_by);

    let done = b
        .run_to_end(name, "c", &["--no-wait", "--json"], &rc.once())
        .await;
    assert_eq!(done.code, NOT_ELECTED, "{done:?}");
    // Warnings (a single-replica NATS bucket) may come first.
    let events: Vec<Value> = done
        .stderr
        .iter()
        .map(|l| json(l))
        .filter(|v| v["event"] != "warning")
        .collect();
    let last = events.last().expect("events");
    assert_eq!(last["event"], "not-elected", "{done:?}");
    assert_eq!(last["name"], name);
    assert_eq!(last["leader"]["identity"], "a");
    assert_eq!(last["leader"]["epoch"], sa.epoch);
    // The first event, after a warning (a single-replica NATS bucket).
    let first = events
        .iter()
        .find(|e| e["event"] != "warning")
        .expect("events");
    assert_eq!(first["event"], "campaigning", "{done:?}");
    assert_eq!(first["identity"], "c");

    let t0 = Instant::now();
    let done = b
        .run_to_end(name, "c", &["--timeout", "1s"], &rc.once())
        .await;
    assert_eq!(done.code, NOT_ELECTED, "{done:?}");
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "gave up after {:?}",
        t0.elapsed()
    );

    assert!(rc.lines().is_empty(), "the command ran: {:?}", rc.lines());
    end(a, &ra, name, sa.epoch).await;
    assert_free(b, name, sa.epoch).await;
}

/// SIGHUP and SIGINT reach the command and elect keeps running; SIGTERM
/// reaches it, it exits 0, elect resigns and exits 0. SIGINT starts the
/// kill grace (SIGKILL to the tree if the command has not exited by its
/// end): a grace of 60 s keeps that out of the case (with the default,
/// half the bound, 150 ms at TTL 3 s, a loaded machine's SIGTERM came
/// after it about one run in six, and the command never wrote `term`).
pub(crate) async fn signals(b: &Setup) {
    let name = "signals";
    let r = b.report("a");
    let grace = ["--kill-grace", "60s", "--allow-late-kill"];
    let (mut a, s) = lead_with(b, name, "a", &r, &grace).await;
    for (sig, line) in [(Signal::SIGHUP, "hup"), (Signal::SIGINT, "int")] {
        a.signal(sig);
        r.wait_for(line).await;
        a.err_with(&format!("elect: forwarding {sig} to the command"))
            .await;
    }
    assert!(a.running(), "elect exited: {:?}", a.stderr_so_far());
    assert!(alive(s.pid), "the command died");
    assert_eq!(
        r.lines(),
        [r.lines()[0].clone(), "hup".into(), "int".into()]
    );
    end(a, &r, name, s.epoch).await;
    assert_free(b, name, s.epoch).await;
}

/// The command's exit code is elect's, and elect resigns: the next
/// candidate is elected at once.
pub(crate) async fn exit_code(b: &Setup) {
    let name = "exit-code";
    let cmd: Vec<String> = ["sh", "-c", "exit 7"].map(String::from).to_vec();
    let done = b.run_to_end(name, "a", &[], &cmd).await;
    assert_eq!(done.code, 7, "{done:?}");
    let epoch = elected_epoch(&done);
    assert_eq!(
        done.stderr.last().map(String::as_str),
        Some(format!("elect: resigned {name}, term {epoch}").as_str()),
        "{done:?}"
    );
    // Killed by a signal: 128 + N, as in a shell.
    let cmd: Vec<String> = ["sh", "-c", "kill -USR1 $$"].map(String::from).to_vec();
    let done = b.run_to_end(name, "a", &[], &cmd).await;
    assert_eq!(done.code, 128 + Signal::SIGUSR1 as i32, "{done:?}");
    assert_free(b, name, epoch).await;
}

/// The epoch of the `elected` line in `done`'s stderr.
pub(crate) fn elected_epoch(done: &Finished) -> u64 {
    let line = done.err_line("elect: elected: ");
    line.split(", term ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("no epoch in {line:?}"))
}

/// A command that does not exist (by path or in `$PATH`): 127 before the
/// campaign, so no epoch is spent and nothing is opened or created.
pub(crate) async fn missing_command(b: &Setup) {
    let name = "missing";
    for cmd in [
        "/nonexistent/elect-test-command",
        "elect-test-no-such-command",
    ] {
        let done = b.run_to_end(name, "a", &[], &[cmd.to_owned()]).await;
        assert_eq!(done.code, NOT_FOUND, "{done:?}");
        done.err_line(&format!("elect: error: cannot run {cmd:?}"));
        assert!(
            !done.stderr.iter().any(|l| l.contains("campaigning")),
            "{done:?}"
        );
    }
    let first = assert_free(b, name, 0).await;
    // NATS epochs start at the bucket's creation time; the others at 2.
    if !b.url.starts_with("nats://") {
        assert_eq!(first, 2, "an epoch was spent");
    }
}

/// `elect leader`, text and JSON, while a run holds the election and after.
pub(crate) async fn leader_output(b: &Setup) {
    let name = "leader";
    assert_eq!(b.leader_text(name).await, format!("{name}: no leader"));
    assert_json_no_leader(&b.leader_json(name).await, name);
    let before = now_ms();
    let r = b.report("a");
    let (a, s) = lead(b, name, "a", &r).await;
    assert_led_by(&b.leader_text(name).await, name, "a", s.epoch);
    assert_json_led_by(&b.leader_json(name).await, name, "a", s.epoch, before);
    end(a, &r, name, s.epoch).await;
    assert_eq!(b.leader_text(name).await, format!("{name}: no leader"));
    assert_json_no_leader(&b.leader_json(name).await, name);
}

/// `elect observe`, text and JSON: no leader, the leader, no leader again,
/// in that order; SIGTERM ends it with 0. With `vacancy_first` false the
/// first line is not awaited (see `nats.rs`): the leader must then show
/// up through the run's renewals even if the watch began after the
/// election.
pub(crate) async fn observe_output(b: &Setup, vacancy_first: bool) {
    let name = "observe";
    // One after the other: two first opens of a new SQLite database at
    // once can fail (see `sqlite.rs`).
    let mut text = b.observe(name, false);
    if vacancy_first {
        assert_eq!(text.out_line().await, format!("{name}: no leader"));
    }
    let mut json_ = b.observe(name, true);
    if vacancy_first {
        assert_json_no_leader(&json(&json_.out_line().await), name);
    }

    let before = now_ms();
    let r = b.report("a");
    let (a, s) = lead(b, name, "a", &r).await;
    // On NATS a term's first write may wait out the failover grace, shown
    // as pending (the same identity and term) before it leads.
    let mut pendings = 0;
    let mut led = text.out_line().await;
    // A claim whose answer was lost (a statement cut off under load) is
    // tried again, and wins a later term: the earlier one, held by the
    // same candidate for an instant, may be printed first, in order.
    while earlier_term_of(&led, name, "a", s.epoch) {
        led = text.out_line().await;
    }
    if led.starts_with(&format!("{name}: pending: a in term {} ", s.epoch)) {
        pendings += 1;
        led = text.out_line().await;
    }
    assert_led_by(&led, name, "a", s.epoch);
    let mut led = json(&json_.out_line().await);
    while led["leader"]["identity"] == "a"
        && led["leader"]["epoch"].as_u64().is_some_and(|e| e < s.epoch)
    {
        led = json(&json_.out_line().await);
    }
    if led["pending"]["identity"] == "a" {
        assert_eq!(led["pending"]["epoch"], s.epoch, "{led}");
        pendings += 1;
        led = json(&json_.out_line().await);
    }
    assert_json_led_by(&led, name, "a", s.epoch, before);

    end(a, &r, name, s.epoch).await;
    assert_eq!(text.out_line().await, format!("{name}: no leader"));
    assert_json_no_leader(&json(&json_.out_line().await), name);

    let mut stdout_lines = 0;
    for o in [text, json_] {
        o.signal(Signal::SIGTERM);
        let done = o.finish().await;
        assert_eq!(done.code, 0, "{done:?}");
        stdout_lines += done.stdout.len();
        // At most a note that the directory (database, bucket) did not
        // exist yet when observe began: it creates nothing.
        assert!(
            done.stderr
                .iter()
                .all(|l| l.contains("note") && l.contains("does not exist")),
            "{done:?}"
        );
    }
    let lines = if vacancy_first { 3 } else { 2 };
    assert_eq!(stdout_lines, 2 * lines + pendings, "lines on stdout");
}

impl Elect {
    /// Starts `elect args` with `env` added to its environment.
    pub(crate) fn spawn_with_env<S: AsRef<std::ffi::OsStr>>(
        args: &[S],
        env: &[(&str, &str)],
        label: &str,
    ) -> Elect {
        let mut command = Command::new(BIN);
        command.args(args).stdin(Stdio::null());
        for (k, v) in env {
            command.env(k, v);
        }
        Elect::start(command, label)
    }
}

/// The NUL-separated strings of `/proc/<pid>/<file>` (`cmdline`,
/// `environ`), as `ps` reads them.
pub(crate) fn proc_strings(pid: i32, file: &str) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/{file}"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/{file}: {e}"));
    raw.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

// ---- The command's whole process tree ----

/// A command that forks a tree and records every pid in its report:
/// a child in its process group (`sleep`), a child shell with a
/// grandchild, a child that ignores SIGTERM, and a process in a new
/// session whose parent exits at once (`setsid` and a double fork: it is
/// orphaned). Then `ready`; with `mode` "exit" the command exits 0 once
/// the file `<report>.go` exists, leaving the tree behind; else it waits, exiting 0 on SIGTERM.
const TREE: &str = r#"out="$1"; mode="$2"
echo "start $$ $ELECTION_NAME $ELECTION_EPOCH $ELECTION_IDENTITY $ELECTION_TOKEN" >> "$out"
echo "pid $$" >> "$out"
sleep 1000 & echo "pid $!" >> "$out"
sh -c 'sleep 1000 & echo "pid $!" >> "$1"; wait' tree-child "$out" & echo "pid $!" >> "$out"
(trap '' TERM; exec sleep 1000) & echo "pid $!" >> "$out"
setsid sh -c 'sleep 1000 & echo "pid $!" >> "$1"' tree-session "$out" &
while [ "$(grep -c '^pid ' "$out")" -lt 6 ]; do sleep 0.02; done
echo ready >> "$out"
if [ "$mode" = exit ]; then
  while [ ! -e "$out.go" ]; do sleep 0.02; done
  exit 0
fi
trap 'exit 0' TERM
# `wait` returns at once on the trapped SIGTERM (a foreground `sleep`
# would hold the trap back until it ends, past a short kill grace).
while :; do sleep 0.1 & wait $!; done"#;

/// The next leader's command: at its very start, looks for each process of
/// `procs` (lines `pid starttime`) in `/proc` and records `alive PID` for
/// each still running (same start time, not a zombie), then `checked`;
/// then waits, exiting 0 on SIGTERM.
const CHECKER: &str = r#"out="$1"; procs="$2"
while read -r pid start; do
  if s=$(cat "/proc/$pid/stat" 2>/dev/null); then
    set -- $s
    if [ "${22}" = "$start" ] && [ "$3" != Z ] && [ "$3" != X ]; then echo "alive $pid" >> "$out"; fi
  fi
done < "$procs"
echo checked >> "$out"
trap 'exit 0' TERM
# `wait` returns at once on the trapped SIGTERM (a foreground `sleep`
# would hold the trap back until it ends, past a short kill grace).
while :; do sleep 0.1 & wait $!; done"#;

/// A process and its start time (`/proc/PID/stat` field 22): the pair
/// names one process even if its pid is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) pid: i32,
    pub(crate) start: u64,
}

impl Proc {
    /// The process `pid` as it is now (`None` if gone).
    pub(crate) fn of(pid: i32) -> Option<Proc> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, rest) = stat.rsplit_once(')')?;
        // Fields after the command: state is field 3, starttime field 22.
        let start = rest.split_whitespace().nth(22 - 3)?.parse().ok()?;
        Some(Proc { pid, start })
    }

    /// Still running: same start time, not a zombie.
    pub(crate) fn alive(&self) -> bool {
        alive(self.pid) && Proc::of(self.pid).is_some_and(|p| p.start == self.start)
    }
}

impl Report {
    /// The tree command (see [`TREE`]); `mode` "exit" or "stay".
    pub(crate) fn tree(&self, mode: &str) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            TREE.into(),
            "tree".into(),
            self.path.display().to_string(),
            mode.into(),
        ]
    }

    /// Waits until the tree command is `ready`; its processes, as they are
    /// now (all alive: they sleep for 1000 s), also written to `procs` for
    /// a checker.
    pub(crate) async fn tree_ready(&self, procs: &std::path::Path) -> Vec<Proc> {
        self.wait_for("ready").await;
        let pids: Vec<i32> = self
            .lines()
            .iter()
            .filter_map(|l| l.strip_prefix("pid "))
            .map(|p| p.parse().expect("pid"))
            .collect();
        assert_eq!(pids.len(), 6, "{:?}", self.lines());
        // The command itself (the first) may have exited already ("exit").
        let mut tree: Vec<Proc> = Proc::of(pids[0]).into_iter().collect();
        for &pid in &pids[1..] {
            tree.push(
                Proc::of(pid).unwrap_or_else(|| panic!("tree process {pid} gone before the test")),
            );
        }
        let text: String = tree
            .iter()
            .map(|p| format!("{} {}\n", p.pid, p.start))
            .collect();
        std::fs::write(procs, text).expect("write procs");
        tree
    }

    /// The checker command (see [`CHECKER`]) for the processes in `procs`.
    pub(crate) fn checker(&self, procs: &std::path::Path) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            CHECKER.into(),
            "checker".into(),
            self.path.display().to_string(),
            procs.display().to_string(),
        ]
    }
}

/// How the leader's term ends in [`whole_tree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The command exits by itself, leaving its tree behind.
    Exit,
    /// SIGTERM to `elect` (forwarded to the command, which exits).
    Term,
    /// SIGKILL of `elect` alone.
    Kill,
    /// SIGSTOP of `elect` alone (lease backends): its command runs on.
    Stop,
}

/// A runs the tree command, B waits with the checker; A's term ends by
/// `ending`; when B's command starts, no process of A's tree is alive.
pub(crate) async fn whole_tree(b: &Setup, ending: Ending) {
    let name = format!("tree-{ending:?}").to_lowercase();
    let (ra, rb) = (b.report("a"), b.report("b"));
    let procs = b.dir.path().join("a.procs");
    let mode = if ending == Ending::Exit {
        "exit"
    } else {
        "stay"
    };
    // The file backend's default kill grace is 10 s (its lock is held by
    // the tree); the lease backends' is derived from the TTL.
    let extra: &[&str] = if b.timing.is_empty() {
        &["--kill-grace", "1s"]
    } else {
        &[]
    };
    let mut a = b.run(&name, "a", extra, &ra.tree(mode));
    a.err_with("elect: started ").await;
    let tree = ra.tree_ready(&procs).await;
    let mut bb = b.run(&name, "b", &[], &rb.checker(&procs));
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    match ending {
        Ending::Exit => std::fs::write(format!("{}.go", ra.path.display()), "").expect("go"),
        Ending::Term => a.signal(Signal::SIGTERM),
        Ending::Kill => a.signal(Signal::SIGKILL),
        Ending::Stop => a.signal(Signal::SIGSTOP),
    }
    let alive = rb.alive_when_checked().await;
    assert!(
        alive.is_empty(),
        "{ending:?}: A's processes still ran when B's command started: {alive:?} of {tree:?}"
    );
    for p in &tree {
        assert!(!p.alive(), "{ending:?}: {p:?} of A's tree is alive");
    }
    match ending {
        Ending::Exit | Ending::Term => {
            let done = a.finish().await;
            assert_eq!(done.code, 0, "{done:?}");
        }
        Ending::Kill => {
            assert_eq!(a.killed().await, Signal::SIGKILL as i32);
        }
        Ending::Stop => {
            a.signal(Signal::SIGCONT);
            let done = a.finish().await;
            assert_eq!(done.code, LOST, "{done:?}");
        }
    }
    bb.signal(Signal::SIGTERM);
    let done = bb.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
}

/// Issue 26 item 6: a holder SIGKILLed with nobody to take over (SQLite,
/// PostgreSQL: its lease row stays). `elect leader` names it with its last
/// renewal, and once its TTL has passed with no renewal marks it presumed
/// dead (text and JSON); `elect observe`, started while it led, reports
/// the vacancy (`no leader`), as it does on NATS when the key ages out.
pub(crate) async fn a_killed_holder_reads_presumed_dead(b: &Setup) {
    let name = "dead-holder";
    let ra = b.report("a");
    let (a, sa) = lead(b, name, "a", &ra).await;
    let mut watcher = b.observe(name, false);
    let first = watcher.out_line().await;
    assert_led_by(&first, name, "a", sa.epoch);
    let live = b.leader_text(name).await;
    assert_led_by(&live, name, "a", sa.epoch);
    assert!(live.contains(", last renewed "), "{live}");
    assert!(!live.contains("presumed dead"), "{live}");
    let v = b.leader_json(name).await;
    assert_eq!(v["leader"]["presumed_dead"], false, "{v}");
    assert!(v["leader"]["renewed_unix_ms"].is_u64(), "{v}");

    a.signal(Signal::SIGKILL);
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    wait_gone(sa.pid).await;

    // Nobody campaigns: the row names A until a reader finds its lease
    // ran out (one TTL after its last renewal).
    let deadline = Instant::now() + PATIENCE;
    let dead = loop {
        let line = b.leader_text(name).await;
        if line.contains("presumed dead") {
            break line;
        }
        assert_led_by(&line, name, "a", sa.epoch);
        assert!(
            Instant::now() < deadline,
            "not presumed dead {PATIENCE:?} after the kill: {line}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let head = format!("{name}: led by a in term {} (since ", sa.epoch);
    assert!(dead.starts_with(&head), "{dead}");
    assert!(
        dead.contains("; presumed dead: its lease ran out at "),
        "{dead}"
    );
    let v = b.leader_json(name).await;
    assert_eq!(v["leader"]["identity"], "a", "{v}");
    assert_eq!(v["leader"]["presumed_dead"], true, "{v}");
    let renewed = v["leader"]["renewed_unix_ms"].as_u64().expect("renewed");
    let ttl = v["leader"]["ttl_ms"].as_u64().expect("ttl_ms");
    assert!(renewed + ttl < now_ms(), "{v}");

    assert_eq!(watcher.out_line().await, format!("{name}: no leader"));
    watcher.signal(Signal::SIGINT);
    let done = watcher.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    after_a_dead_holder(b, name, sa.epoch).await;
}

/// The name of a holder SIGKILLed with nobody after it (epoch `dead`) is
/// won again in a later term, and the winner, leaving last, ends the dead
/// term's group and removes the election's cgroup directory (which would
/// otherwise stay on this host until a reboot).
pub(crate) async fn after_a_dead_holder(b: &Setup, name: &str, dead: u64) {
    let rb = b.report("b");
    let (bb, sb) = lead(b, name, "b", &rb).await;
    assert!(sb.epoch > dead, "term {} after {dead}", sb.epoch);
    bb.signal(Signal::SIGTERM);
    let done = bb.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
}

/// `elect revoke --json` of `name` as `by`: exit 0, one JSON object.
pub(crate) async fn revoke_json(b: &Setup, name: &str, by: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "revoke",
        "--backend",
        &b.url,
        "--name",
        name,
        "--identity",
        by,
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = once(&args).await;
    assert_eq!(out.code, 0, "elect revoke: {out:?}");
    assert_eq!(out.stdout.len(), 1, "elect revoke: {out:?}");
    json(&out.stdout[0])
}

/// An operator's revoke from another process (ADR 0111): A's `elect run`
/// leads; `elect revoke` deposes it with an epoch above A's; A's command
/// is stopped and A exits with the loss's code; `elect leader` shows the
/// revocation and who asked; the next `elect run` leads above it.
pub(crate) async fn revoke(b: &Setup) {
    let name = "revoke";
    let ra = b.report("a");
    let (a, sa) = lead(b, name, "a", &ra).await;

    let before = now_ms();
    let v = revoke_json(b, name, "ops/alice", &[]).await;
    assert_eq!(v["name"], name, "{v}");
    assert_eq!(v["deposed"]["identity"], "a", "{v}");
    assert_eq!(v["deposed"]["epoch"], sa.epoch, "{v}");
    assert_eq!(v["revoked"]["by"], "ops/alice", "{v}");
    let fence = v["revoked"]["epoch"]
        .as_u64()
        .unwrap_or_else(|| panic!("revoked.epoch: {v}"));
    assert!(
        fence > sa.epoch,
        "revocation {fence} not above {}",
        sa.epoch
    );

    // A loses its term: its command is stopped, elect exits 79.
    let done = a.finish().await;
    assert_eq!(done.code, LOST, "{done:?}");
    done.err_line(&format!("lost {name}, term {}", sa.epoch));
    wait_gone(sa.pid).await;

    // `leader` names the revocation and who asked, until the next term.
    let line = b.leader_text(name).await;
    let head = format!("{name}: no leader; revoked by ops/alice at ");
    assert!(
        line.starts_with(&head) && line.ends_with(&format!("Z (epoch {fence})")),
        "{line:?}"
    );
    let v = b.leader_json(name).await;
    assert!(v["leader"].is_null(), "{v}");
    assert_eq!(v["revoked"]["by"], "ops/alice", "{v}");
    assert_eq!(v["revoked"]["epoch"], fence, "{v}");
    if let Some(at) = v["revoked"]["at_unix_ms"].as_u64() {
        assert!(at + 1000 >= before && at <= now_ms() + 1000, "{v}");
    }

    // A second revoke finds nothing to revoke.
    let v = revoke_json(b, name, "ops/bob", &[]).await;
    assert!(v["deposed"].is_null() && v["revoked"].is_null(), "{v}");

    // The next term is above the revocation.
    let rb = b.report("b");
    let done = b.run_to_end(name, "b", &[], &rb.once()).await;
    assert_eq!(done.code, 0, "{done:?}");
    let sb = rb.started().await;
    assert!(
        sb.epoch > fence,
        "B's epoch {} not above the revocation's {fence}",
        sb.epoch
    );
}

/// A transfer across processes (ADR 0112): A's `elect run` leads and C's
/// waits; B starts with `--take-over`, which asks A to hand the name to
/// B: A's command gets SIGTERM, exits, and A hands its term to B (exit 0,
/// "handed"); B leads above A's epoch, after A's command is gone (no
/// overlap), and C, waiting before B came, does not lead in between.
/// Then `elect transfer --to c --wait` asks B to hand the name to C: C
/// leads above B, and `elect transfer` says so.
pub(crate) async fn transfer(b: &Setup) {
    let name = "transfer";
    let ra = b.report("a");
    let (a, sa) = lead(b, name, "a", &ra).await;
    let rc = b.report("c");
    let mut c = b.run(name, "c", &[], &rc.worker());
    c.err_with(&format!("elect: campaigning for {name} as c"))
        .await;

    let rb = b.report("b");
    let mut bee = b.run(name, "b", &["--take-over"], &rb.worker());
    bee.err_with(&format!(
        "elect: asked a (term {}) to hand {name} to b",
        sa.epoch
    ))
    .await;
    let sb = rb.started().await;
    assert!(!alive(sa.pid), "A's command ran while B led");
    assert!(
        sb.epoch > sa.epoch,
        "B's epoch {} not above A's {}",
        sb.epoch,
        sa.epoch
    );
    assert_eq!(rc.lines(), Vec::<String>::new(), "C ran a name handed to B");
    let done = a.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line(&format!(
        "asked to hand {name} to b: sending SIGTERM to the command"
    ));
    assert_eq!(
        done.stderr.last().map(String::as_str),
        Some(format!("elect: handed {name}, term {}, to b", sa.epoch).as_str()),
        "{done:?}"
    );
    let v = b.leader_json(name).await;
    assert_eq!(v["leader"]["identity"], "b", "{v}");

    // An operator asks B to hand over to C, and waits for it.
    let out = once(&[
        "transfer",
        "--backend",
        &b.url,
        "--name",
        name,
        "--to",
        "c",
        "--identity",
        "deploy/1",
        "--wait",
        "60s",
    ])
    .await;
    assert_eq!(out.code, 0, "elect transfer: {out:?}");
    assert_eq!(
        out.stdout.first().map(String::as_str),
        Some(format!("{name}: asked b (epoch {}) to hand over to c", sb.epoch).as_str()),
        "{out:?}"
    );
    let sc = rc.started().await;
    assert!(!alive(sb.pid), "B's command ran while C led");
    assert!(
        sc.epoch > sb.epoch,
        "C's epoch {} not above B's {}",
        sc.epoch,
        sb.epoch
    );
    assert!(
        out.stdout
            .last()
            .is_some_and(|l| l.starts_with(&format!("{name}: led by c in term {}", sc.epoch))),
        "{out:?}"
    );
    let done = bee.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line(&format!("handed {name}, term {}, to c", sb.epoch));
    end(c, &rc, name, sc.epoch).await;
}

/// A transfer to a candidate that never campaigns: the name stays
/// reserved for it (`elect leader` shows the handover, a waiting candidate
/// does not lead) until the window has passed, then the waiting candidate
/// leads; `elect transfer --wait` gives up with 75.
pub(crate) async fn transfer_to_nobody(b: &Setup) {
    let name = "handed-to-nobody";
    let ra = b.report("a");
    let mut a = b.run(name, "a", &["--handover-window", "3s"], &ra.worker());
    a.err_with("elect: started ").await;
    let sa = ra.started().await;
    let rc = b.report("c");
    let mut c = b.run(name, "c", &[], &rc.worker());
    c.err_with(&format!("elect: campaigning for {name} as c"))
        .await;
    let asked = Instant::now();
    let out = once(&[
        "transfer",
        "--backend",
        &b.url,
        "--name",
        name,
        "--to",
        "ghost",
        "--wait",
        "1s",
    ])
    .await;
    assert_eq!(out.code, 75, "elect transfer: {out:?}");
    let done = a.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line(&format!("handed {name}, term {}, to ghost", sa.epoch));
    let shown = b.leader_text(name).await;
    if rc.lines().is_empty() {
        // Still within the window: the reservation is shown.
        let head = format!(
            "{name}: no leader; handed by a (epoch {}) to ghost",
            sa.epoch
        );
        assert!(shown.starts_with(&head), "{shown:?}");
    }
    let sc = rc.started().await;
    assert!(
        asked.elapsed() >= Duration::from_secs(3),
        "C led {:?} after a handover reserved for 3s",
        asked.elapsed()
    );
    assert!(sc.epoch > sa.epoch);
    end(c, &rc, name, sc.epoch).await;
}

/// Preference (ADR 0112): A leads with priority 1 and yields to preferred
/// candidates; B (priority 1) waits and is never told about; Z (priority
/// 5) waits, and after its --prefer-after tells A, which stops its
/// command and hands the term to Z, not to B that waited longer.
pub(crate) async fn preference(b: &Setup) {
    let name = "preferred";
    let ra = b.report("a");
    let mut a = b.run(
        name,
        "a",
        &["--priority", "1", "--yield-to-preferred"],
        &ra.worker(),
    );
    a.err_with("elect: started ").await;
    let sa = ra.started().await;
    let rb = b.report("b");
    let mut bee = b.run(
        name,
        "b",
        &["--priority", "1", "--prefer-after", "100ms"],
        &rb.worker(),
    );
    bee.err_with(&format!("elect: told a (term {}) that b waits", sa.epoch))
        .await;
    let rz = b.report("z");
    let mut z = b.run(
        name,
        "z",
        &["--priority", "5", "--prefer-after", "500ms"],
        &rz.worker(),
    );
    z.err_with(&format!(
        "elect: told a (term {}) that z waits for {name} with priority 5",
        sa.epoch
    ))
    .await;
    let sz = rz.started().await;
    assert!(!alive(sa.pid), "A's command ran while Z led");
    assert!(sz.epoch > sa.epoch);
    assert_eq!(
        rb.lines(),
        Vec::<String>::new(),
        "B led instead of the preferred Z"
    );
    let done = a.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line(&format!("handed {name}, term {}, to z", sa.epoch));
    end(z, &rz, name, sz.epoch).await;
    let sb = rb.started().await;
    end(bee, &rb, name, sb.epoch).await;
}

/// The server stops answering past A's lease (`pause`): A loses its term
/// and stops its whole tree before it exits; once the server is back
/// (`resume`), B is elected and finds none of it.
pub(crate) async fn losing_the_term_stops_the_whole_tree(
    b: &Setup,
    pause: impl FnOnce(),
    resume: impl FnOnce(),
) {
    let (ra, rb) = (b.report("a"), b.report("b"));
    let procs = b.dir.path().join("a.procs");
    let mut a = b.run("tree-loss", "a", &[], &ra.tree("stay"));
    a.err_with("elect: started ").await;
    let tree = ra.tree_ready(&procs).await;
    pause();
    a.err_with("elect: lost tree-loss, term ").await;
    let done = a.finish().await;
    assert_eq!(done.code, LOST, "{done:?}");
    for p in &tree {
        assert!(!p.alive(), "{p:?} of A's tree outlived A's lost term");
    }
    resume();
    let bb = b.run("tree-loss", "b", &[], &rb.checker(&procs));
    let alive = rb.alive_when_checked().await;
    assert!(alive.is_empty(), "{alive:?}");
    bb.signal(Signal::SIGTERM);
    assert_eq!(bb.finish().await.code, 0);
}
