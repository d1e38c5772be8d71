//! [`Member`]: one etcd process on 127.0.0.1.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::{Error, etcd_bin, gateway, ports};

/// How long a member may take to answer `/health` after it was started.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// One etcd member: its own temp directory (data and log), a client and a
/// peer port on 127.0.0.1; killed and removed on drop.
#[derive(Debug)]
pub struct Member {
    name: String,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    /// `--initial-cluster`: every member's `name=http://127.0.0.1:peer`.
    initial_cluster: String,
    child: Option<Child>,
    /// Started under a shell that kills etcd when this process's end of
    /// its stdin closes (the shared member: never dropped).
    guarded: bool,
}

impl Member {
    /// Starts a one-member cluster and waits until it is healthy.
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::start().expect("etcd must be available");
    /// println!("etcd at {}", member.endpoint());
    /// ```
    pub fn start() -> Result<Member, Error> {
        ports::retry_on_clash(|| {
            let p = ports::free(2)?;
            let name = "m1".to_owned();
            let initial = format!("{name}=http://127.0.0.1:{}", p[1]);
            let mut m = Member::new(name, p[0], p[1], initial)?;
            m.spawn()?;
            m.wait_ready()?;
            Ok(m)
        })
    }

    /// One member for the whole test process, started on first use: its
    /// tests tell their keys apart by prefix. It is never dropped; a shell
    /// between it and this process kills it and removes its directory when
    /// this process ends, even by `SIGKILL` (its stdin, a pipe from this
    /// process, closes). For faults
    /// (kill, pause, restart) start a [`Member`] of the test's own.
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::shared().expect("etcd must be available");
    /// println!("etcd at {}", member.endpoint());
    /// ```
    pub fn shared() -> Result<&'static Member, Error> {
        static SHARED: std::sync::OnceLock<Member> = std::sync::OnceLock::new();
        static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = STARTING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = SHARED.get() {
            return Ok(m);
        }
        let m = ports::retry_on_clash(|| {
            let p = ports::free(2)?;
            let name = "m1".to_owned();
            let initial = format!("{name}=http://127.0.0.1:{}", p[1]);
            let mut m = Member::new(name, p[0], p[1], initial)?;
            m.guarded = true;
            m.spawn()?;
            m.wait_ready()?;
            Ok(m)
        })?;
        Ok(SHARED.get_or_init(|| m))
    }

    pub(crate) fn new(
        name: String,
        client_port: u16,
        peer_port: u16,
        initial_cluster: String,
    ) -> Result<Member, Error> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("etcd-{name}-"))
            .tempdir()
            .map_err(Error::io("creating a temp directory for etcd"))?;
        Ok(Member {
            name,
            dir,
            client_port,
            peer_port,
            initial_cluster,
            child: None,
            guarded: false,
        })
    }

    pub(crate) fn spawn(&mut self) -> Result<(), Error> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(Error::io(format!("opening {}", self.log_path().display())))?;
        let err = log
            .try_clone()
            .map_err(Error::io("duplicating the log's descriptor"))?;
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut command = if self.guarded {
            // `"$@" &` runs etcd with stdin from /dev/null; `cat` waits for
            // this process's end of the pipe to close. Then the member's
            // directory goes too (its WAL alone preallocates 64 MB, and
            // the shared member is never dropped to remove it).
            let mut c = Command::new("sh");
            c.args([
                "-c",
                "d=$1; shift; \"$@\" & p=$!; cat >/dev/null; kill -9 $p; wait $p; rm -rf \"$d\"",
                "sh",
            ]);
            c.arg(self.dir.path());
            c.arg(etcd_bin()?);
            c.stdin(Stdio::piped());
            c
        } else {
            let mut c = Command::new(etcd_bin()?);
            c.stdin(Stdio::null());
            c
        };
        let child = command
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(self.data_dir())
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "etcd-testkit"])
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(Error::io("spawning etcd"))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the member answers `/health` with a healthy cluster.
    pub(crate) fn wait_ready(&mut self) -> Result<(), Error> {
        let until = Instant::now() + READY_WITHIN;
        loop {
            if gateway::healthy(&self.endpoint()) {
                return Ok(());
            }
            if !self.is_running() {
                return Err(self.start_error("it exited"));
            }
            if Instant::now() > until {
                return Err(self.start_error(&format!("not healthy within {READY_WITHIN:?}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the member answers at all (a cluster member may wait
    /// for the others before it is healthy).
    pub(crate) fn wait_listening(&mut self) -> Result<(), Error> {
        let until = Instant::now() + READY_WITHIN;
        while std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_err() {
            if !self.is_running() {
                return Err(self.start_error("it exited"));
            }
            if Instant::now() > until {
                return Err(self.start_error("its client port did not open"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn start_error(&self, reason: &str) -> Error {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        Error::Start {
            name: self.name.clone(),
            reason: reason.to_owned(),
            log: self.log_path(),
            log_tail: lines[lines.len().saturating_sub(20)..].join("\n"),
        }
    }

    /// `127.0.0.1:PORT`, the client address.
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::start().expect("etcd");
    /// assert!(member.endpoint().starts_with("127.0.0.1:"));
    /// ```
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// The client port.
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::start().expect("etcd");
    /// let proxy = etcd_testkit::Proxy::start(member.client_port()).expect("a proxy");
    /// # drop(proxy);
    /// ```
    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// The member's name (`m1`, `m2`, ...).
    ///
    /// ```no_run
    /// assert_eq!(etcd_testkit::Member::start().expect("etcd").name(), "m1");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The member's temp directory.
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::start().expect("etcd");
    /// assert!(member.dir().exists());
    /// ```
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The member's log (its stdout and stderr).
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::start().expect("etcd");
    /// println!("{}", std::fs::read_to_string(member.log_path()).unwrap_or_default());
    /// ```
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// The process id, while it runs.
    ///
    /// ```no_run
    /// assert!(etcd_testkit::Member::start().expect("etcd").pid().is_some());
    /// ```
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process still runs.
    ///
    /// ```no_run
    /// let mut member = etcd_testkit::Member::start().expect("etcd");
    /// member.kill().expect("killed");
    /// assert!(!member.is_running());
    /// ```
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn signal(&self, signal: Signal) -> Result<(), Error> {
        if let Some(pid) = self.pid() {
            let pid = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
            kill(pid, signal).map_err(|e| Error::Io {
                what: format!("sending {signal} to etcd {}", self.name),
                source: std::io::Error::from(e),
            })?;
        }
        Ok(())
    }

    /// Kills the member (`SIGKILL`) and waits for it.
    ///
    /// ```no_run
    /// let mut member = etcd_testkit::Member::start().expect("etcd");
    /// member.kill().expect("killed");
    /// member.restart().expect("back");
    /// ```
    pub fn kill(&mut self) -> Result<(), Error> {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            c.wait().map_err(Error::io("waiting for etcd"))?;
        }
        Ok(())
    }

    /// Stops the member (`SIGTERM`) and waits for it.
    ///
    /// ```no_run
    /// let mut member = etcd_testkit::Member::start().expect("etcd");
    /// member.stop().expect("stopped");
    /// ```
    pub fn stop(&mut self) -> Result<(), Error> {
        self.resume()?;
        self.signal(Signal::SIGTERM)?;
        if let Some(mut c) = self.child.take() {
            c.wait().map_err(Error::io("waiting for etcd"))?;
        }
        Ok(())
    }

    /// Starts the member again (same ports, same data) after a kill or a
    /// stop, and waits until it answers (a cluster member: until it
    /// listens; the others may be down).
    ///
    /// ```no_run
    /// let mut member = etcd_testkit::Member::start().expect("etcd");
    /// member.restart().expect("back");
    /// ```
    pub fn restart(&mut self) -> Result<(), Error> {
        self.kill()?;
        self.spawn()?;
        if self.initial_cluster.contains(',') {
            self.wait_listening()
        } else {
            self.wait_ready()
        }
    }

    /// Freezes the process (`SIGSTOP`): it holds its connections and
    /// answers nothing.
    ///
    /// ```no_run
    /// let mut member = etcd_testkit::Member::start().expect("etcd");
    /// member.pause().expect("paused");
    /// member.resume().expect("running again");
    /// ```
    pub fn pause(&mut self) -> Result<(), Error> {
        self.signal(Signal::SIGSTOP)
    }

    /// Lets a paused process run again (`SIGCONT`).
    ///
    /// ```no_run
    /// let mut member = etcd_testkit::Member::start().expect("etcd");
    /// member.pause().expect("paused");
    /// member.resume().expect("running again");
    /// ```
    pub fn resume(&mut self) -> Result<(), Error> {
        self.signal(Signal::SIGCONT)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.resume();
        let _ = self.kill();
    }
}
