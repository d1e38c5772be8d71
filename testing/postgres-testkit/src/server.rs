//! One PostgreSQL server in its own temp directory.

use std::fs::{self, File};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::{Error, binaries, ports, template};

/// The connections a server accepts unless started with
/// [`Server::start_with_max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: u32 = 300;
/// How long a start or restart may take before it is an error.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after a fast shutdown request.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// The line a server logs once it accepts connections.
const READY_LINE: &str = "database system is ready to accept connections";

/// A running PostgreSQL server (`postgres` and its children) on
/// 127.0.0.1:[`port`](Self::port) and on a unix socket in
/// [`socket_dir`](Self::socket_dir). The superuser is `postgres`; clients
/// on 127.0.0.1 are trusted unless the server was started with
/// [`start_with_password`](Self::start_with_password).
///
/// Dropping it kills the whole process tree and removes its directory.
#[derive(Debug)]
pub struct Server {
    dir: TempDir,
    port: u16,
    password: Option<String>,
    max_connections: u32,
    child: Option<Child>,
    paused: bool,
}

impl Server {
    /// Initialises a data directory (a copy of the per-machine template),
    /// starts the server on a free port and waits (up to 60 s) until it
    /// accepts connections.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] without PostgreSQL's binaries; [`Error::Start`]
    /// with the log's tail when it does not come up.
    pub fn start() -> Result<Self, Error> {
        Self::start_inner(None, DEFAULT_MAX_CONNECTIONS)
    }

    /// Like [`start`](Self::start), but the server accepts up to
    /// `max_connections` connections (`max_connections`, kept across
    /// restarts) instead of [`DEFAULT_MAX_CONNECTIONS`]: for a test or a
    /// bench with more client processes than that allows.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with_max_connections(max_connections: u32) -> Result<Self, Error> {
        Self::start_inner(None, max_connections)
    }

    /// Like [`start`](Self::start), but clients on 127.0.0.1 must give
    /// `password` for the `postgres` user (SCRAM); the unix socket stays
    /// trusted for [`sql`](Self::sql).
    pub fn start_with_password(password: &str) -> Result<Self, Error> {
        Self::start_inner(Some(password.to_owned()), DEFAULT_MAX_CONNECTIONS)
    }

    fn start_inner(password: Option<String>, max_connections: u32) -> Result<Self, Error> {
        let bins = binaries()?;
        let template = template::template(&bins)?;
        ports::retry_on_clash(|| {
            let dir = tempfile::Builder::new()
                .prefix("postgres-testkit-")
                .tempdir()
                .map_err(Error::io("making the server's temp dir"))?;
            as_server_user::hand_over(dir.path())?;
            run(Command::new("cp")
                .arg("-a")
                .arg(&template)
                .arg(dir.path().join("data")))?;
            // The template may not belong to the server user (a target
            // directory copied with `cp -r` by root: the server then
            // failed with "could not access the server configuration
            // file ... Permission denied"), so the copy is handed over whole.
            as_server_user::hand_over_tree(&dir.path().join("data"))?;
            if password.is_some() {
                let hba = "local all all trust\n\
                           host all all 127.0.0.1/32 scram-sha-256\n\
                           host all all ::1/128 scram-sha-256\n";
                let path = dir.path().join("data").join("pg_hba.conf");
                fs::write(&path, hba).map_err(Error::io(format!("writing {}", path.display())))?;
            }
            let mut server = Self {
                dir,
                port: ports::free()?,
                password: password.clone(),
                max_connections,
                child: None,
                paused: false,
            };
            server.spawn_and_wait()?;
            if let Some(pw) = &password {
                let quoted = pw.replace('\'', "''");
                server.sql(&format!("ALTER USER postgres PASSWORD '{quoted}'"))?;
            }
            Ok(server)
        })
    }

    fn spawn_and_wait(&mut self) -> Result<(), Error> {
        let bins = binaries()?;
        let log_path = self.log_path();
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(Error::io(format!("opening {}", log_path.display())))?;
        let err = log
            .try_clone()
            .map_err(Error::io("duplicating the log file"))?;
        let from = fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let mut cmd = Command::new(bins.tool("postgres"));
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=on"])
            .arg("-c")
            .arg(format!("max_connections={}", self.max_connections))
            .args(["-c", "shared_buffers=32MB", "-c", "logging_collector=off"])
            // Dynamic shared memory in files under the data directory, not
            // in /dev/shm: a server killed with SIGKILL (every drop, and
            // the fault tests) left its segment there, in RAM, for good
            // (3,728 segments, 2.0 GB, on this project's machine).
            .args(["-c", "dynamic_shared_memory_type=mmap"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0);
        as_server_user::apply(&mut cmd);
        let child = cmd.spawn().map_err(Error::io(format!(
            "starting {}",
            bins.tool("postgres").display()
        )))?;
        self.child = Some(child);
        self.paused = false;
        let start = Instant::now();
        loop {
            let text = fs::read(&log_path).unwrap_or_default();
            let tail = &text[usize::try_from(from).unwrap_or(usize::MAX).min(text.len())..];
            if String::from_utf8_lossy(tail).contains(READY_LINE) {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
                .is_some();
            if exited || start.elapsed() > READY_TIMEOUT {
                self.kill_tree();
                return Err(Error::Start {
                    port: self.port,
                    waited: start.elapsed(),
                    log: log_path.clone(),
                    log_tail: last_lines(&String::from_utf8_lossy(tail), 20),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`, with the password
    /// when the server has one.
    pub fn url(&self) -> String {
        match &self.password {
            Some(pw) => format!(
                "postgres://postgres:{}@127.0.0.1:{}/postgres",
                percent_encode(pw),
                self.port
            ),
            None => self.url_without_password(),
        }
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres` (no password even
    /// when the server wants one).
    pub fn url_without_password(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The TCP port on 127.0.0.1 (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the unix socket (`.s.PGSQL.<port>`), the data
    /// directory and the log.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server's log (its stderr), appended across restarts.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// The postmaster's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Runs `sql` through `psql` as the superuser over the unix socket and
    /// returns what it printed (unaligned, tuples only), trimmed.
    ///
    /// # Errors
    ///
    /// [`Error::Command`] with psql's message when the statement fails.
    pub fn sql(&self, sql: &str) -> Result<String, Error> {
        let bins = binaries()?;
        let out = Command::new(bins.tool("psql"))
            .arg("-h")
            .arg(self.dir.path())
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", "postgres", "-d", "postgres", "-X", "-At"])
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(Error::io("running psql"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(Error::Command {
                command: format!("psql -c {sql:?}"),
                status: out.status.to_string(),
                output: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    /// Waits until exactly one session of this server waits for a lock
    /// (`pg_stat_activity`), checking every 5 ms for at most `patience`;
    /// whether it saw one. For a test that ends a transaction of its own
    /// once a statement it runs beside has queued behind its locks.
    ///
    /// # Errors
    ///
    /// [`Error::Command`] when `pg_stat_activity` cannot be read.
    pub async fn one_session_waits_for_a_lock(&self, patience: Duration) -> Result<bool, Error> {
        let deadline = Instant::now() + patience;
        loop {
            let waiting =
                self.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")?;
            if waiting == "1" {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Whether the postmaster is still running (reaps it if it exited).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => match child.try_wait() {
                Ok(None) => true,
                _ => {
                    self.child = None;
                    false
                }
            },
            None => false,
        }
    }

    /// Kills the postmaster and every backend with `SIGKILL` (a crash:
    /// no shutdown checkpoint; the next start replays the WAL).
    pub fn kill(&mut self) -> Result<(), Error> {
        self.kill_tree();
        Ok(())
    }

    /// Stops the server cleanly (fast shutdown: `SIGINT`), killing it if it
    /// takes longer than 20 s.
    pub fn stop(&mut self) -> Result<(), Error> {
        let Some(pid) = self.pid() else {
            return Ok(());
        };
        if self.paused {
            self.resume()?;
        }
        let pid = pid_of(pid);
        let _ = signal::kill(pid, Signal::SIGINT);
        let start = Instant::now();
        let Some(child) = &mut self.child else {
            return Ok(());
        };
        while start.elapsed() < STOP_TIMEOUT {
            if let Ok(Some(_)) = child.try_wait() {
                // A fast shutdown waits for every backend to exit.
                self.child = None;
                return Ok(());
            }
            thread::sleep(POLL_INTERVAL);
        }
        self.kill_tree();
        Ok(())
    }

    /// Starts the server again on the same port with the same data (after
    /// [`kill`](Self::kill) or [`stop`](Self::stop); stops it first if it
    /// runs) and waits until it accepts connections.
    pub fn restart(&mut self) -> Result<(), Error> {
        if self.is_running() {
            self.stop()?;
        }
        self.spawn_and_wait()
    }

    /// Freezes the postmaster and every backend with `SIGSTOP`: connections
    /// stay open, nothing answers.
    pub fn pause(&mut self) -> Result<(), Error> {
        self.signal_tree(Signal::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// Thaws a paused server with `SIGCONT`.
    pub fn resume(&mut self) -> Result<(), Error> {
        self.signal_tree(Signal::SIGCONT)?;
        self.paused = false;
        Ok(())
    }

    /// Sends `sig` to the postmaster and every child it has forked (each
    /// backend makes itself a process-group leader, so a group signal
    /// would miss them). The postmaster is stopped first so that it forks
    /// no child between the listing and the signal.
    fn signal_tree(&self, sig: Signal) -> Result<(), Error> {
        let context = || format!("sending {sig} to PostgreSQL on port {}", self.port);
        let pid = self.pid().ok_or_else(|| Error::Io {
            context: context(),
            source: std::io::Error::other("it is not running"),
        })?;
        let postmaster = pid_of(pid);
        if sig == Signal::SIGCONT {
            for child in children_of(pid) {
                let _ = signal::kill(pid_of(child), sig);
            }
            return signal::kill(postmaster, sig).map_err(|e| Error::Io {
                context: context(),
                source: e.into(),
            });
        }
        signal::kill(postmaster, Signal::SIGSTOP).map_err(|e| Error::Io {
            context: context(),
            source: e.into(),
        })?;
        for child in children_of(pid) {
            let _ = signal::kill(pid_of(child), sig);
        }
        if sig != Signal::SIGSTOP {
            let _ = signal::kill(postmaster, sig);
        }
        Ok(())
    }

    /// `SIGKILL` to the postmaster and its children, then waits until all
    /// of them are gone (a backend still attached to the old shared memory
    /// would stop the next start).
    fn kill_tree(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            let segment = sysv_segment(&self.data_dir(), pid);
            let _ = signal::kill(pid_of(pid), Signal::SIGSTOP);
            let children = children_of(pid);
            for c in &children {
                let _ = signal::kill(pid_of(*c), Signal::SIGKILL);
            }
            let _ = signal::kill(pid_of(pid), Signal::SIGKILL);
            let _ = child.wait();
            let start = Instant::now();
            while children.iter().any(|c| alive(*c)) && start.elapsed() < STOP_TIMEOUT {
                thread::sleep(Duration::from_millis(5));
            }
            if let Some(id) = segment {
                remove_sysv_segment(id);
            }
        }
        self.paused = false;
    }
}

/// The id of the SysV shared memory segment the postmaster `pid` made:
/// the second number of `postmaster.pid`'s seventh line (key, id), read
/// only when the file's first line is `pid` (a file a restart rewrote
/// names another segment).
///
/// A postmaster killed with `SIGKILL` cannot remove it, and a SIGKILL is
/// how every server here ends; the kernel keeps such segments until
/// reboot, and at `kernel.shmmni` (4,096) of them no server starts
/// ("could not create shared memory segment: No space left on device").
/// This project's machine reached that after a day of test runs.
fn sysv_segment(data_dir: &Path, pid: u32) -> Option<i32> {
    let text = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    let mut lines = text.lines();
    if lines.next()?.trim().parse::<u32>().ok()? != pid {
        return None;
    }
    lines.nth(5)?.split_whitespace().nth(1)?.parse().ok()
}

/// Marks the segment `id` for removal (`shmctl(IPC_RMID)`): the kernel
/// frees it once no process has it attached. A segment already gone is
/// not an error.
#[allow(unsafe_code)]
fn remove_sysv_segment(id: i32) {
    // SAFETY: IPC_RMID takes no buffer (a null pointer is allowed) and
    // touches no memory of this process.
    let _ = unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
}

/// The processes whose parent is `pid` (from `/proc/<pid>/stat`).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| stat_of(*p).is_some_and(|(_, ppid)| ppid == pid))
        .collect()
}

/// A process that exists and is not a zombie.
fn alive(pid: u32) -> bool {
    stat_of(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// The state letter and parent pid of `pid`.
fn stat_of(pid: u32) -> Option<(char, u32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ...": comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill_tree();
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `cmd` to completion; a failure is [`Error::Command`] with what it
/// printed.
pub(crate) fn run(cmd: &mut Command) -> Result<(), Error> {
    let line = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(Error::io(format!("running {line}")))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    Err(Error::Command {
        command: line,
        status: out.status.to_string(),
        output: if stderr.is_empty() {
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        } else {
            stderr
        },
    })
}

/// PostgreSQL refuses to run as root: as root, its tools run as the
/// `postgres` user, which owns the directories it writes.
pub(crate) mod as_server_user {
    use std::os::unix::process::CommandExt as _;
    use std::path::Path;
    use std::process::Command;

    use nix::unistd::{Uid, User, chown};

    use crate::Error;

    /// The user the server runs as: `postgres` when we are root, else none
    /// (run as ourselves).
    fn user() -> Result<Option<User>, Error> {
        if !Uid::effective().is_root() {
            return Ok(None);
        }
        match User::from_name("postgres") {
            Ok(Some(user)) => Ok(Some(user)),
            _ => Err(Error::Missing {
                looked: "a `postgres` user to run the server as (running as root)".to_owned(),
            }),
        }
    }

    /// Gives `dir` to the server user.
    pub(crate) fn hand_over(dir: &Path) -> Result<(), Error> {
        if let Some(user) = user()? {
            chown(dir, Some(user.uid), Some(user.gid)).map_err(|e| Error::Io {
                context: format!("chown {} to postgres", dir.display()),
                source: e.into(),
            })?;
        }
        Ok(())
    }

    /// Gives `dir` and everything below it to the server user
    /// (`chown -R`).
    pub(crate) fn hand_over_tree(dir: &Path) -> Result<(), Error> {
        if let Some(user) = user()? {
            super::run(
                Command::new("chown")
                    .arg("-R")
                    .arg(format!("{}:{}", user.uid, user.gid))
                    .arg(dir),
            )?;
        }
        Ok(())
    }

    /// Makes `cmd` run as the server user.
    pub(crate) fn apply(cmd: &mut Command) {
        if let Ok(Some(user)) = user() {
            cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
    }
}

/// A process id as nix takes it: a Linux pid is at most 2^22.
fn pid_of(raw: u32) -> Pid {
    Pid::from_raw(i32::try_from(raw).expect("a pid_t"))
}
