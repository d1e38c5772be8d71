//! One `nats-server` process with JetStream, in its own temp directory.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::{Error, monitor, nats_server_bin, ports};

/// How long a start or restart may take before it is an error.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to exit after `SIGTERM`.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between readiness probes.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// What goes into a node's configuration file.
#[derive(Debug, Clone)]
pub(crate) struct NodeConfig {
    pub(crate) name: String,
    pub(crate) client_port: u16,
    pub(crate) monitor_port: u16,
    pub(crate) cluster: Option<ClusterConfig>,
    /// Clients must authenticate (single servers only).
    pub(crate) auth: Option<Auth>,
    /// JetStream is enabled (every server but
    /// [`Server::start_without_jetstream`]'s).
    pub(crate) jetstream: bool,
}

/// How clients must authenticate to a server started with
/// [`Server::start_with_auth`] (its `authorization { .. }` block). Users
/// land in the default account, which has JetStream.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth {
    /// A token (`nats://token@host`, `ConnectOptions::token`).
    Token(String),
    /// One user with a password.
    UserPassword {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
}

impl std::fmt::Debug for Auth {
    // Test secrets still stay out of logs: only the kind shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Token(_) => f.write_str("Auth::Token(..)"),
            Auth::UserPassword { user, .. } => write!(f, "Auth::UserPassword({user:?}, ..)"),
        }
    }
}

/// Polls until every server in `nodes` greets clients and `/healthz`
/// answers 200, looking at all of them each round: one that exits (its
/// ports taken between picking and binding them, say) fails the wait at
/// once, with its log, rather than after another waited out the deadline
/// for a peer that is gone (ADR 0084). A timeout names every server that
/// was not ready, and why.
pub(crate) fn wait_all_ready(nodes: &mut [Server], deadline: Instant) -> Result<(), Error> {
    loop {
        let mut waiting = Vec::new();
        for (i, node) in nodes.iter_mut().enumerate() {
            if let Some(why) = node.readiness()? {
                waiting.push((i, why));
            }
        }
        let Some(&(first, _)) = waiting.first() else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            let why = match nodes {
                [_] => format!("last probe: {}", waiting[0].1),
                _ => {
                    let each: Vec<String> = waiting
                        .iter()
                        .map(|(i, why)| format!("{}: {why}", nodes[*i].name()))
                        .collect();
                    format!("last probes: {}", each.join("; "))
                }
            };
            return Err(nodes[first].start_error(format!("not ready in time; {why}")));
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// `text` as a double-quoted string of the server's configuration format.
fn quoted(text: &str) -> String {
    let mut q = String::with_capacity(text.len() + 2);
    q.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// The `cluster { .. }` block of a node's configuration.
#[derive(Debug, Clone)]
pub(crate) struct ClusterConfig {
    pub(crate) name: String,
    pub(crate) port: u16,
    /// Route ports of all nodes, this one included (the server ignores a
    /// route to itself).
    pub(crate) routes: Vec<u16>,
}

/// A running (or stopped) `nats-server` with JetStream on 127.0.0.1.
///
/// It has its own temp directory holding its config file, JetStream store
/// and log (the server's stdout and stderr). Ports, store and name stay the
/// same across [`restart`](Self::restart). Dropping it kills the process
/// (`SIGKILL`) and removes the temp directory.
#[derive(Debug)]
pub struct Server {
    bin: PathBuf,
    config: NodeConfig,
    child: Option<Child>,
    paused: bool,
    dir: TempDir,
}

impl Server {
    /// Starts a single server named `nats-testkit` on free ports and waits
    /// (up to 30 s) until it accepts clients and JetStream is ready.
    ///
    /// Installs the pinned `nats-server` first if needed (see
    /// [`nats_server_bin`]).
    pub fn start() -> Result<Self, Error> {
        Self::start_single(None, true)
    }

    /// Like [`start`](Self::start), but clients must authenticate as
    /// `auth` says; a client without (or with wrong) credentials is refused
    /// with an authorization violation.
    pub fn start_with_auth(auth: Auth) -> Result<Self, Error> {
        Self::start_single(Some(auth), true)
    }

    /// Like [`start`](Self::start), but without JetStream (a plain
    /// `nats-server`, as one started without `-js`): every JetStream
    /// request finds no responder.
    pub fn start_without_jetstream() -> Result<Self, Error> {
        Self::start_single(None, false)
    }

    fn start_single(auth: Option<Auth>, jetstream: bool) -> Result<Self, Error> {
        let bin = nats_server_bin()?;
        ports::retry_on_clash(|| {
            let ports = ports::free(2)?;
            let config = NodeConfig {
                name: "nats-testkit".to_owned(),
                client_port: ports[0],
                monitor_port: ports[1],
                cluster: None,
                auth: auth.clone(),
                jetstream,
            };
            let mut server = Self::spawn(bin.clone(), config)?;
            server.wait_ready(Instant::now() + READY_TIMEOUT)?;
            server.settle_probe();
            Ok(server)
        })
    }

    /// Waits (up to 2 s, and never fails) until the server no longer
    /// counts the readiness probe's client connection, closed but maybe
    /// not yet noticed: nobody else knows the port yet, so a test that
    /// counts [`connections`](Self::connections) from a fresh server
    /// counts only its own (CI saw the probe counted once).
    fn settle_probe(&self) {
        let bound = Instant::now() + Duration::from_secs(2);
        while self.connections().is_ok_and(|n| n != 0) && Instant::now() < bound {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Writes the config and starts the process without waiting for it.
    pub(crate) fn spawn(bin: PathBuf, config: NodeConfig) -> Result<Self, Error> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("nats-testkit-{}-", config.name))
            .tempdir()
            .map_err(Error::io("creating a temp dir"))?;
        let mut server = Self {
            bin,
            config,
            child: None,
            paused: false,
            dir,
        };
        let conf = server.render_config();
        let conf_path = server.config_path();
        fs::write(&conf_path, conf)
            .map_err(Error::io(format!("writing {}", conf_path.display())))?;
        server.spawn_process()?;
        Ok(server)
    }

    fn spawn_process(&mut self) -> Result<(), Error> {
        let log_path = self.log_path();
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(Error::io(format!("opening {}", log_path.display())))?;
        let log2 = log
            .try_clone()
            .map_err(Error::io(format!("duplicating {}", log_path.display())))?;
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(self.config_path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(Error::io(format!("running {}", self.bin.display())))?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    fn render_config(&self) -> String {
        let c = &self.config;
        let mut conf = format!(
            "server_name: \"{name}\"\n\
             listen: \"127.0.0.1:{client}\"\n\
             http: \"127.0.0.1:{monitor}\"\n",
            name = c.name,
            client = c.client_port,
            monitor = c.monitor_port,
        );
        if c.jetstream {
            let _ = writeln!(
                conf,
                "jetstream {{\n  store_dir: \"{}\"\n}}",
                self.store_dir().display()
            );
        }
        if let Some(cluster) = &c.cluster {
            let _ = write!(
                conf,
                "cluster {{\n  name: \"{}\"\n  listen: \"127.0.0.1:{}\"\n  routes: [\n",
                cluster.name, cluster.port
            );
            for port in &cluster.routes {
                let _ = writeln!(conf, "    \"nats-route://127.0.0.1:{port}\"");
            }
            conf.push_str("  ]\n}\n");
        }
        match &c.auth {
            None => {}
            Some(Auth::Token(token)) => {
                let _ = writeln!(conf, "authorization {{\n  token: {}\n}}", quoted(token));
            }
            Some(Auth::UserPassword { user, password }) => {
                let _ = writeln!(
                    conf,
                    "authorization {{\n  user: {}\n  password: {}\n}}",
                    quoted(user),
                    quoted(password)
                );
            }
        }
        conf
    }

    /// Polls until the server greets clients and `/healthz` answers 200
    /// (which covers JetStream, and contact with a meta leader when
    /// clustered); fails early if the process exits.
    pub(crate) fn wait_ready(&mut self, deadline: Instant) -> Result<(), Error> {
        wait_all_ready(std::slice::from_mut(self), deadline)
    }

    /// One look: `Ok(None)` if the server is ready, `Ok(Some(why not))`
    /// if it runs and is not ready yet, an error (with its log) if it is
    /// not running, exited among them (a port taken meanwhile shows there).
    fn readiness(&mut self) -> Result<Option<String>, Error> {
        let Some(child) = self.child.as_mut() else {
            return Err(self.start_error("it is not running (killed or stopped)".to_owned()));
        };
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                return Err(self.start_error(format!("it exited with {status}")));
            }
            Ok(None) => {}
            Err(e) => return Err(self.start_error(format!("waiting for it failed: {e}"))),
        }
        Ok(self.probe().err())
    }

    fn probe(&self) -> Result<(), String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.config.client_port));
        let mut greeting = [0u8; 5];
        TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            .and_then(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(2)))?;
                s.read_exact(&mut greeting)
            })
            .map_err(|e| format!("client port {}: {e}", self.config.client_port))?;
        if &greeting != b"INFO " {
            return Err(format!("client port greeted with {greeting:?}"));
        }
        match monitor::get(self.config.monitor_port, "/healthz") {
            Ok((200, _)) => Ok(()),
            Ok((status, body)) => Err(format!("/healthz answered {status}: {}", body.trim())),
            Err(e) => Err(format!("/healthz: {e}")),
        }
    }

    fn start_error(&self, reason: String) -> Error {
        let log = self.log_path();
        let text = fs::read_to_string(&log).unwrap_or_else(|e| format!("(unreadable: {e})"));
        // Leave out the warnings our own readiness probes cause.
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains("Healthcheck failed"))
            .collect();
        let log_tail = lines[lines.len().saturating_sub(30)..].join("\n");
        Error::Start {
            name: self.config.name.clone(),
            reason,
            log,
            log_tail,
        }
    }

    /// The client URL, `nats://127.0.0.1:<client port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.config.client_port)
    }

    /// The port clients connect to.
    pub fn client_port(&self) -> u16 {
        self.config.client_port
    }

    /// The HTTP monitoring port (`/varz`, `/jsz`, `/healthz`, ...).
    pub fn monitor_port(&self) -> u16 {
        self.config.monitor_port
    }

    /// How many client connections the server has open now, as its
    /// monitoring endpoint `/connz` counts them (`num_connections`): a
    /// test's way to see how many connections a process (or several) made.
    /// Routes between cluster nodes are not client connections. A server
    /// just started counts none: its start waits until the server no
    /// longer counts the start's own probe of the client port.
    ///
    /// ```
    /// use nats_testkit::Server;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = Server::start()?;
    /// assert_eq!(server.connections()?, 0);
    /// let client = async_nats::connect(server.url()).await?;
    /// client.flush().await?;
    /// assert_eq!(server.connections()?, 1);
    /// # Ok(()) }
    /// ```
    pub fn connections(&self) -> Result<usize, Error> {
        let (status, body) = monitor::get(self.config.monitor_port, "/connz")
            .map_err(Error::io(format!("GET /connz of {}", self.config.name)))?;
        let bad = |what: &str| Error::Io {
            context: format!("GET /connz of {}", self.config.name),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{what}: {status} {}", body.trim()),
            ),
        };
        if status != 200 {
            return Err(bad("not 200"));
        }
        monitor::field(&body, "num_connections")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad("no num_connections"))
    }

    /// The server's name (`server_name`).
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The process id, or `None` after [`kill`](Self::kill) or
    /// [`stop`](Self::stop).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The temp directory holding this server's config, store and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The JetStream store directory (kept across restarts).
    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// The log file: the server's stdout and stderr, appended across
    /// restarts.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats-server.log")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("nats-server.conf")
    }

    /// Whether the process is alive (a paused one is). Reaps it if it
    /// exited by itself.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                self.child = None;
                false
            }
            None => false,
        }
    }

    /// Kills the process with `SIGKILL` and waits for it to exit. Does
    /// nothing if it is not running.
    pub fn kill(&mut self) -> Result<(), Error> {
        self.paused = false;
        if let Some(mut child) = self.child.take() {
            child
                .kill()
                .and_then(|()| child.wait())
                .map_err(Error::io(format!("killing nats-server {}", self.name())))?;
        }
        Ok(())
    }

    /// Asks the process to shut down (`SIGTERM`; a paused one is resumed so
    /// it can) and waits up to 10 s for it to exit, then kills it and
    /// returns an error. Does nothing if it is not running.
    pub fn stop(&mut self) -> Result<(), Error> {
        if self.child.is_none() {
            return Ok(());
        }
        self.signal(Signal::SIGTERM)?;
        if self.paused {
            self.signal(Signal::SIGCONT)?;
            self.paused = false;
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while self.is_running() {
            if Instant::now() >= deadline {
                self.kill()?;
                return Err(Error::Timeout {
                    what: format!("nats-server {} to exit after SIGTERM", self.name()),
                    waited: STOP_TIMEOUT,
                    last: "still running; killed it with SIGKILL".to_owned(),
                });
            }
            thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Starts the server again with the same ports, name and store, first
    /// stopping it ([`stop`](Self::stop)) if it is running, and waits (up to
    /// 30 s) until it is ready as in [`start`](Self::start).
    pub fn restart(&mut self) -> Result<(), Error> {
        self.stop()?;
        self.spawn_process()?;
        self.wait_ready(Instant::now() + READY_TIMEOUT)
    }

    /// Freezes the process (`SIGSTOP`): it keeps its sockets but answers
    /// nothing, like a hung or partitioned server. Returns once every
    /// thread of the process is stopped (the kernel stops them shortly
    /// after the signal is sent, not at once), waiting up to 5 s.
    pub fn pause(&mut self) -> Result<(), Error> {
        self.signal(Signal::SIGSTOP)?;
        self.paused = true;
        let pid = self.pid().ok_or_else(|| Error::Io {
            context: format!("pausing nats-server {}", self.name()),
            source: std::io::Error::other("it is not running"),
        })?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let running = running_threads(pid);
            if running.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("nats-server {} to stop after SIGSTOP", self.name()),
                    waited: Duration::from_secs(5),
                    last: format!("threads not stopped: {running:?}"),
                });
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets a paused process run again (`SIGCONT`).
    pub fn resume(&mut self) -> Result<(), Error> {
        self.signal(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// Whether the process was started and is not killed, stopped or paused
    /// by this handle.
    pub(crate) fn is_live(&self) -> bool {
        self.child.is_some() && !self.paused
    }

    fn signal(&self, sig: Signal) -> Result<(), Error> {
        let context = || format!("sending {sig} to nats-server {}", self.name());
        let child = self.child.as_ref().ok_or_else(|| Error::Io {
            context: context(),
            source: std::io::Error::other("it is not running"),
        })?;
        let pid = i32::try_from(child.id()).map_err(|e| Error::Io {
            context: context(),
            source: std::io::Error::other(e),
        })?;
        signal::kill(Pid::from_raw(pid), sig).map_err(|errno| Error::Io {
            context: context(),
            source: errno.into(),
        })
    }
}

/// The threads of process `pid` that are not stopped, as
/// `/proc/<pid>/task/<tid>/stat` shows them (`T` or `t`: stopped).
fn running_threads(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new(); // gone: nothing runs
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // The state follows the command name, which is in parentheses.
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            (!matches!(state, 'T' | 't'))
                .then(|| format!("{:?} in state {state}", task.file_name()))
        })
        .collect()
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
