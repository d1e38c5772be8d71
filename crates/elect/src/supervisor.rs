//! The supervisor: a small process between `elect` and COMMAND that owns
//! COMMAND's whole process tree and outlives `elect` (see ADRs 0017, 0031).
//!
//! `elect run` forks it first thing, before the campaign, while `elect` is
//! still single-threaded (no exec: winning then costs one message and the
//! fork and exec of COMMAND, not the start of a second `elect`). Until the
//! term is won it waits on its socket to `elect` and starts nothing; if
//! `elect` exits, or is killed, without winning, the socket reaches end of
//! file and it exits. Once `elect` wins, it sends the term's environment
//! (`G`) and, on the file and SQLite backends, the locked descriptor to
//! inherit (`SCM_RIGHTS`); the supervisor makes itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`) and starts COMMAND: every descendant of
//! COMMAND whose parent exits is re-parented to it, also one that left
//! COMMAND's process group or session (`setsid`, a double fork). So
//! COMMAND's tree is exactly the supervisor's descendants, which it finds
//! in `/proc` and signals through pidfds (no pid-reuse race), and it knows
//! the tree is empty when it has no child left to wait for (`ECHILD`).
//!
//! It ends the tree:
//! - when `elect` says so (a lost term, or COMMAND exited and what it left
//!   behind must stop before the term is given up): SIGTERM to every
//!   process of the tree, SIGKILL at the deadline `elect` gives;
//! - when `elect` is gone (its socket reaches end of file: `elect`
//!   exited or was SIGKILLed): SIGKILL at once;
//! - when `elect` stops renewing the deadline (a watchdog: `elect` stopped
//!   by SIGSTOP, a debugger, a hang): SIGTERM at the end of the lease's
//!   known validity, SIGKILL a kill grace later, both before a successor
//!   can lead. The deadlines are absolute `CLOCK_MONOTONIC` times, which
//!   both processes read from the same kernel clock.
//!
//! On the file backend the claim file's locked descriptor is inherited by
//! the supervisor and COMMAND, as `flock(1)` does: the kernel frees the
//! lock only when the last process holding it has exited.
//!
//! The protocol, one ASCII line per message on one socket:
//! - elect → supervisor: `G HEX(KEY=VALUE)...` (the term was won: start
//!   COMMAND with these variables; the lock rides with it), `V TERM_NS
//!   KILL_NS` (watchdog deadlines), `S SIGNO` (forward a signal to
//!   COMMAND), `K KILL_NS` (stop the tree now, SIGKILL at `KILL_NS`); end
//!   of file: elect is gone (before `G`: exit, starting nothing).
//! - supervisor → elect: `P PID` (COMMAND started), `F ERRNO` (it could not
//!   be started), `W` (the watchdog sent SIGTERM), `Z` (the kill deadline
//!   came with processes left: SIGKILL), `U PID...` (processes that
//!   SIGKILL does not end: another user's), `X CODE` (COMMAND exited,
//!   its shell-style code), `E` (the tree is empty; the supervisor exits).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock both processes share.
pub(crate) use fencing::mono::mono_ns;

/// A tokio instant as `CLOCK_MONOTONIC` nanoseconds (see
/// [`fencing::mono::mono_ns_at`]).
pub(crate) fn mono_ns_at(at: tokio::time::Instant) -> u64 {
    fencing::mono::mono_ns_at(at.into_std())
}

/// One process of the tree: pid and start time (`/proc/PID/stat` field
/// 22), which together name one process even if the pid is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Proc {
    pid: i32,
    start: u64,
}

/// `(pid, ppid, starttime)` of process `pid`, from `/proc`.
fn stat(pid: i32) -> Option<(i32, i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: comm may hold anything; split after the
    // last ')'.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); ppid is field 4, starttime field 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(22 - 3)?.parse().ok()?;
    Some((pid, ppid, start))
}

/// Every descendant of this process, from one scan of `/proc`.
fn descendants() -> Vec<Proc> {
    let me = nix::unistd::getpid().as_raw();
    let mut children: HashMap<i32, Vec<Proc>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some((pid, ppid, start)) = stat(pid) {
                children.entry(ppid).or_default().push(Proc { pid, start });
            }
        }
    }
    let mut found = Vec::new();
    let mut todo = vec![me];
    while let Some(parent) = todo.pop() {
        for p in children.remove(&parent).unwrap_or_default() {
            todo.push(p.pid);
            found.push(p);
        }
    }
    found
}

/// Sends `sig` to `p` if it is still the same process: through a pidfd
/// opened first and checked against the start time, so a reused pid is
/// never signalled.
#[allow(unsafe_code)]
fn send(p: Proc, sig: Signal) {
    use nix::libc;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p.pid, 0) };
    if fd < 0 {
        if nix::errno::Errno::last() == nix::errno::Errno::ENOSYS
            && stat(p.pid).is_some_and(|(_, _, start)| start == p.start)
        {
            // A kernel before 5.3: no pidfd; the start time was checked
            // an instant ago.
            let _ = nix::sys::signal::kill(Pid::from_raw(p.pid), sig);
        }
        return;
    }
    #[allow(
        clippy::cast_possible_truncation,
        reason = "a new fd (not -1 here) is an int, returned in a long"
    )]
    // SAFETY: fd is a new pidfd this function owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    if stat(p.pid).is_some_and(|(_, _, start)| start == p.start) {
        // SAFETY: pidfd_send_signal(pidfd, sig, info = NULL, flags = 0).
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                sig as libc::c_int,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

/// The end of one wait for children.
enum Reaped {
    /// Some child may still run.
    Running,
    /// No child left: the tree is empty.
    Empty,
}

/// Collects every exited child without blocking; `on_exit` gets each
/// one's pid and shell-style code.
fn reap(mut on_exit: impl FnMut(i32, u8)) -> Reaped {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => on_exit(pid.as_raw(), code.to_le_bytes()[0]),
            Ok(WaitStatus::Signaled(pid, sig, _)) => on_exit(
                pid.as_raw(),
                u8::try_from(128 + sig as i32).unwrap_or(u8::MAX),
            ),
            Ok(WaitStatus::StillAlive) => return Reaped::Running,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return Reaped::Empty,
        }
    }
}

/// Waits until `fd` is readable or `timeout_ms` passed (-1: no limit).
fn readable(fds: &[RawFd], timeout_ms: i32) -> Vec<bool> {
    use nix::libc;
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    #[allow(unsafe_code)]
    // SAFETY: `polled` is a valid array of `polled.len()` pollfds.
    let n = unsafe {
        libc::poll(
            polled.as_mut_ptr(),
            polled.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if n <= 0 {
        return vec![false; fds.len()];
    }
    polled.iter().map(|p| p.revents != 0).collect()
}

/// The supervisor's state.
struct Supervisor {
    command: Option<i32>,
    report: std::fs::File,
    /// Readable when SIGCHLD arrived.
    sigchld: std::fs::File,
    /// Watchdog deadlines (CLOCK_MONOTONIC ns) while elect renews them.
    watch_term: Option<u64>,
    watch_kill: Option<u64>,
    /// The tree got its SIGTERM (from the watchdog or a stop).
    termed: bool,
    /// SIGKILL the tree at this instant.
    kill_at: Option<u64>,
}

impl Supervisor {
    fn tell(&mut self, line: &str) {
        // elect may be gone: nothing to do then.
        let _ = self.report.write_all(format!("{line}\n").as_bytes());
    }

    fn drain_sigchld(&mut self) {
        let mut buf = [0u8; 64];
        while matches!(self.sigchld.read(&mut buf), Ok(n) if n > 0) {}
    }

    /// Reaps; reports COMMAND's exit; true once no child is left.
    fn reap(&mut self) -> bool {
        let mut exited = None;
        let command = self.command;
        let empty = matches!(
            reap(|pid, code| {
                if Some(pid) == command {
                    exited = Some(code);
                }
            }),
            Reaped::Empty
        );
        if let Some(code) = exited {
            self.command = None;
            self.tell(&format!("X {code}"));
        }
        empty
    }

    fn term_tree(&mut self) {
        if self.termed {
            return;
        }
        self.termed = true;
        for p in descendants() {
            send(p, Signal::SIGTERM);
            // A stopped process would only see its SIGTERM at the SIGKILL.
            send(p, Signal::SIGCONT);
        }
    }

    /// SIGKILL to every process of the tree until none is left. One that
    /// cannot be signalled (it became another user's) keeps the tree, and
    /// so the term, alive: after 2 s elect is told (`U PID...`), once.
    fn kill_tree(&mut self) {
        let began = mono_ns();
        let mut told = false;
        loop {
            let left = descendants();
            for &p in &left {
                send(p, Signal::SIGKILL);
            }
            if !told && !left.is_empty() && mono_ns().saturating_sub(began) > 2_000_000_000 {
                told = true;
                let pids: Vec<String> = left.iter().map(|p| p.pid.to_string()).collect();
                self.tell(&format!("U {}", pids.join(" ")));
            }
            if self.reap() {
                return;
            }
            // Wait for the next child to end (or re-scan soon: a process
            // forked during the scan is re-parented here when its parent
            // dies, and found by the next scan).
            let _ = readable(&[self.sigchld.as_raw_fd()], 20);
            self.drain_sigchld();
        }
    }

    fn handle(&mut self, line: &str) {
        let mut words = line.split_whitespace();
        let num = |w: Option<&str>| w.and_then(|w| w.parse::<u64>().ok());
        match words.next() {
            // Once the watchdog fired, its deadlines stay.
            Some("V") if !self.termed => {
                self.watch_term = num(words.next());
                self.watch_kill = num(words.next());
            }
            Some("S") => {
                if let (Some(pid), Some(sig)) = (
                    self.command,
                    num(words.next())
                        .and_then(|s| i32::try_from(s).ok())
                        .and_then(|s| Signal::try_from(s).ok()),
                ) {
                    let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
                }
            }
            Some("K") => {
                let at = num(words.next()).unwrap_or(0);
                self.kill_at = Some(self.kill_at.map_or(at, |k| k.min(at)));
                self.term_tree();
            }
            _ => {}
        }
    }
}

/// One round of `elect`'s own end of the tree (ADR 0049), for when its
/// supervisor died or did not stop the tree by its deadline (stopped,
/// hung): `elect` is a child subreaper from the win on, so COMMAND's tree
/// re-parents to it when the supervisor dies, as it did to the
/// supervisor. SIGKILL to every descendant of this process (the
/// supervisor included: one that did not act by its deadline is of no
/// more use), then every exited child is collected (`on_exit`: pid and
/// shell-style code). Returns the pids that were still there, and
/// whether no child is left (the tree is empty).
pub(crate) fn kill_descendants(on_exit: impl FnMut(i32, u8)) -> (Vec<i32>, bool) {
    let left = descendants();
    for &p in &left {
        send(p, Signal::SIGKILL);
    }
    let empty = matches!(reap(on_exit), Reaped::Empty);
    (left.iter().map(|p| p.pid).collect(), empty)
}

/// Makes this process (`elect`, once elected) a child subreaper, so that
/// COMMAND's tree becomes its own if the supervisor dies.
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)
}

/// `elect`'s end of a supervisor forked before the campaign (see
/// [`Standby::fork`]): it waits for the term and starts nothing until
/// `elect` sends it (`G`); dropped unused, it is closed and reaped.
pub(crate) struct Standby {
    pid: Option<Pid>,
    sock: Option<OwnedFd>,
}

/// Which side of [`Standby::fork`] this process is.
pub(crate) enum Forked {
    /// `elect`, with its standby supervisor.
    Elect(Standby),
    /// The supervisor, which has done its work: `main` returns this code.
    Supervisor(ExitCode),
}

/// The signals a supervisor leaves to `elect` (a terminal's and `elect`'s
/// process group's).
const GROUP_SIGNALS: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The number of threads of this process (`/proc/self/stat` field 20).
fn threads() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    rest.split_whitespace().nth(20 - 3)?.parse().ok()
}

impl Standby {
    /// Forks the supervisor of `command`, which waits (without running
    /// anything) until `elect` wins the term and sends it the term's
    /// environment and the lock to inherit, and exits when `elect`'s end
    /// closes first. No exec: the child is this process's copy, so the
    /// caller must still be single-threaded (no runtime, no thread yet):
    /// after a fork only the calling thread exists, and a lock another
    /// thread held would stay locked forever.
    #[allow(unsafe_code)]
    pub(crate) fn fork(command: &[String]) -> std::io::Result<Forked> {
        use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        debug_assert_eq!(threads(), Some(1), "fork while single-threaded only");
        let (mine, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        // A Ctrl-C between the fork and the supervisor's handlers would
        // kill it: the group's signals wait, blocked, until it has them.
        let mut block = SigSet::empty();
        for sig in GROUP_SIGNALS {
            block.add(sig);
        }
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&block), Some(&mut old))?;
        // SAFETY: this process has one thread (checked above in debug
        // builds; `main` forks before it starts any), so the child is a
        // complete copy that may allocate and take locks.
        let forked = unsafe { nix::unistd::fork() };
        match forked {
            Ok(nix::unistd::ForkResult::Child) => {
                drop(mine);
                Ok(Forked::Supervisor(serve(theirs, command, old)))
            }
            Ok(nix::unistd::ForkResult::Parent { child }) => {
                drop(theirs);
                pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
                Ok(Forked::Elect(Standby {
                    pid: Some(child),
                    sock: Some(mine),
                }))
            }
            Err(e) => {
                let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
                Err(e.into())
            }
        }
    }

    /// The supervisor's pid and `elect`'s end of its socket, for
    /// [`crate::run`] to start COMMAND with.
    pub(crate) fn into_parts(mut self) -> (Pid, OwnedFd) {
        match (self.pid.take(), self.sock.take()) {
            (Some(pid), Some(sock)) => (pid, sock),
            // Both are set until taken, and taking consumes self.
            _ => unreachable!("a standby supervisor is taken once"),
        }
    }
}

impl Drop for Standby {
    /// Not elected (or an error): closing the socket tells the supervisor
    /// to exit without starting anything; it is reaped before `elect`
    /// goes on, so it never outlives `elect`'s answer.
    fn drop(&mut self) {
        drop(self.sock.take());
        if let Some(pid) = self.pid.take() {
            reap_one(pid);
        }
    }
}

/// Waits for child `pid` to exit (retrying on EINTR).
pub(crate) fn reap_one(pid: Pid) {
    while let Err(nix::errno::Errno::EINTR) = nix::sys::wait::waitpid(pid, None) {}
}

/// Hex of `bytes`: the term's environment travels as words of one line.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(word: &str) -> Option<Vec<u8>> {
    if !word.len().is_multiple_of(2) {
        return None;
    }
    (0..word.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(word.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The term's cgroup and environment from a `G` line: `G CGROUP
/// HEX(KEY=VALUE)...`, where CGROUP is the hex of the term's cgroup
/// directory, or `-` for none.
#[allow(clippy::type_complexity)]
fn go_line(
    line: &[u8],
) -> Option<(
    Option<std::path::PathBuf>,
    Vec<(std::ffi::OsString, std::ffi::OsString)>,
)> {
    use std::os::unix::ffi::OsStringExt;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    if words.next()? != "G" {
        return None;
    }
    let cgroup = match words.next()? {
        "-" => None,
        hexed => Some(std::path::PathBuf::from(std::ffi::OsString::from_vec(
            unhex(hexed)?,
        ))),
    };
    let env = words
        .map(|w| {
            let pair = unhex(w)?;
            let eq = pair.iter().position(|&b| b == b'=')?;
            let (k, v) = pair.split_at(eq);
            Some((
                std::ffi::OsString::from_vec(k.to_vec()),
                std::ffi::OsString::from_vec(v[1..].to_vec()),
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((cgroup, env))
}

/// What a standby supervisor waits for: the term's cgroup, its
/// environment and the lock COMMAND's tree inherits.
type Go = (
    Option<std::path::PathBuf>,
    Vec<(std::ffi::OsString, std::ffi::OsString)>,
    Option<OwnedFd>,
);

/// Standby: reads `elect`'s socket until the `G` line (the term was won)
/// and the descriptor that rides with it. `None`: `elect` closed its end
/// (not elected, an error, exited or killed) or sent something else;
/// nothing is started then. Bytes after the line stay in `pending`.
#[allow(unsafe_code)]
fn wait_for_term(sock: RawFd, pending: &mut Vec<u8>) -> Option<Go> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut lock: Option<OwnedFd> = None;
    loop {
        if let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            return go_line(&line).map(|(cgroup, env)| (cgroup, env, lock));
        }
        let mut buf = [0u8; 4096];
        let mut space = nix::cmsg_space!([RawFd; 2]);
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let (n, fds) = match recvmsg::<()>(
            sock,
            &mut iov,
            Some(space.as_mut_slice()),
            MsgFlags::empty(),
        ) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg.cmsgs().into_iter().flatten() {
                    if let ControlMessageOwned::ScmRights(r) = c {
                        fds.extend(r);
                    }
                }
                (msg.bytes, fds)
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        };
        for fd in fds {
            // SAFETY: SCM_RIGHTS installed fd in this process for it to own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            if lock.is_none() {
                lock = Some(fd);
            }
        }
        if n == 0 {
            return None;
        }
        pending.extend_from_slice(&buf[..n]);
    }
}

/// How [`born_in_cgroup`] went.
#[derive(Debug, PartialEq, Eq)]
enum Born {
    /// COMMAND was executed, inside the group: its pid.
    Started(i32),
    /// It could not be started (an errno: the group is gone, ENODEV; the
    /// program is missing, ENOENT; ...).
    Failed(i32),
    /// The kernel has no `clone3` or no `CLONE_INTO_CGROUP` (before 5.7).
    Unsupported,
}

/// `struct clone_args` of `clone3(2)` up to `cgroup` (version 2, 88
/// bytes), which the `libc` crate does not define.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// A C string of `bytes`, or EINVAL for an inner NUL.
fn c_string(bytes: &[u8]) -> Result<std::ffi::CString, i32> {
    std::ffi::CString::new(bytes).map_err(|_| nix::libc::EINVAL)
}

/// Starts COMMAND (with this process's environment plus `env`) as a
/// child born inside the cgroup `dir`: `clone3` with `CLONE_INTO_CGROUP`,
/// then in the child what `std::process::Command` and the fallback's
/// `pre_exec` do (an empty signal mask, SIGPIPE at its default,
/// PR_SET_PDEATHSIG SIGKILL, a check that the parent is still `me`) and
/// `execvpe`. An exec failure comes back through a close-on-exec pipe.
///
/// The supervisor is single-threaded (forked from `elect` before its
/// runtime starts, no threads of its own), so the child of this raw clone
/// may call what a child of `fork` may; it calls only async-signal-safe
/// functions, everything is allocated before the clone.
#[allow(unsafe_code)]
fn born_in_cgroup(
    command: &[String],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    dir: &std::path::Path,
    me: Pid,
) -> Born {
    use nix::libc;
    use std::os::unix::ffi::OsStrExt;
    let prepared = (|| -> Result<_, i32> {
        let program = c_string(command[0].as_bytes())?;
        let argv = command
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(e, _)| e == k))
            .collect();
        vars.extend(env.iter().cloned());
        let envp = vars
            .iter()
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                c_string(&kv)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((program, argv, envp))
    })();
    let (program, argv, envp) = match prepared {
        Ok(p) => p,
        Err(errno) => return Born::Failed(errno),
    };
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    envp_p.push(std::ptr::null());
    let group = match std::fs::File::open(dir) {
        Ok(f) => f,
        Err(e) => return Born::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
    };
    let (rx, tx) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return Born::Failed(e as i32),
    };
    #[allow(clippy::cast_sign_loss, reason = "an open descriptor is not negative")]
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: group.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    let tx_fd = tx.as_raw_fd();
    // SAFETY: clone3 without CLONE_VM is a fork: the child gets a copy of
    // this single-threaded process. It runs only the block below, which
    // calls async-signal-safe functions on memory prepared above, and
    // ends in execvpe or _exit.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            std::ptr::from_ref(&args),
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        // SAFETY: in the child; see above.
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let errno = if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                *libc::__errno_location()
            } else if libc::getppid() != me.as_raw() {
                libc::ESRCH
            } else {
                libc::execvpe(program.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr());
                *libc::__errno_location()
            };
            let bytes = errno.to_ne_bytes();
            libc::write(tx_fd, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127);
        }
    }
    drop(tx);
    drop(group);
    if pid < 0 {
        let errno = nix::errno::Errno::last_raw();
        return match errno {
            libc::ENOSYS | libc::E2BIG | libc::EINVAL => Born::Unsupported,
            _ => Born::Failed(errno),
        };
    }
    #[allow(
        clippy::cast_possible_truncation,
        reason = "clone3 returns a pid_t (not -1 here) in a long"
    )]
    let pid = pid as i32;
    // Closed at exec (nothing read) or one errno from the child.
    let mut rx = std::fs::File::from(rx);
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < buf.len() {
        match rx.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if got == buf.len() {
        // It exited without exec: reaped here, so the loop never sees it.
        let _ = nix::sys::wait::waitpid(Pid::from_raw(pid), None);
        return Born::Failed(i32::from_ne_bytes(buf));
    }
    Born::Started(pid)
}

/// The supervisor, forked by [`Standby::fork`] with the group's signals
/// blocked (`mask` is the mask to restore): waits for the term, starts
/// COMMAND, supervises its tree.
#[allow(unsafe_code)]
fn serve(sock: OwnedFd, command: &[String], mask: nix::sys::signal::SigSet) -> ExitCode {
    use nix::sys::signal::{SigmaskHow, pthread_sigmask};
    // SIGCHLD wakes the loop; the terminal's and elect's group signals
    // are elect's to handle (a handler, not SIG_IGN: COMMAND must get the
    // default dispositions at exec).
    let ignored = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in GROUP_SIGNALS {
        let _ = signal_hook::flag::register(sig as i32, ignored.clone());
    }
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&mask), None);
    if command.is_empty() {
        return ExitCode::from(crate::exit::USAGE);
    }
    // Everything that does not depend on the term is made ready while
    // `elect` campaigns, not after it won (ADR 0076): the subreaper flag,
    // the SIGCHLD pipe and its handler, the reporting socket. With no
    // child before the term, none of them acts until COMMAND starts.
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let ctrl = std::fs::File::from(sock);
    let report = match ctrl.try_clone() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("elect: supervisor: {e}");
            return ExitCode::from(crate::exit::INTERNAL);
        }
    };
    let (rx, tx) =
        match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("elect: supervisor: pipe: {e}");
                return ExitCode::from(crate::exit::INTERNAL);
            }
        };
    let tx = std::os::unix::net::UnixStream::from(tx);
    let mut sup = Supervisor {
        command: None,
        report,
        sigchld: std::fs::File::from(rx),
        watch_term: None,
        watch_kill: None,
        termed: false,
        kill_at: None,
    };
    let registered = signal_hook::low_level::pipe::register(Signal::SIGCHLD as i32, tx).is_ok();
    let mut pending = Vec::new();
    let Some((cgroup, env, lock)) = wait_for_term(ctrl.as_raw_fd(), &mut pending) else {
        return ExitCode::SUCCESS;
    };
    if !registered {
        sup.tell("F 0");
        return ExitCode::from(crate::exit::INTERNAL);
    }

    let me = nix::unistd::getpid();
    // COMMAND's tree holds the lock too (flock(1)): it came without
    // FD_CLOEXEC, so COMMAND inherits it, and it stays open here.
    let _lock = lock;
    // Born in the term's cgroup (clone3 with CLONE_INTO_CGROUP, Linux
    // 5.7): no migration of a running process into the group, whose
    // write to `cgroup.procs` waits for an RCU grace period (5-70 ms on a
    // loaded 2-core machine; ADR 0066). A group already removed fails the
    // clone with ENODEV, and COMMAND does not start.
    if let Some(dir) = &cgroup {
        match born_in_cgroup(command, &env, dir, me) {
            Born::Started(pid) => {
                sup.command = Some(pid);
                sup.tell(&format!("P {pid}"));
                return supervise(sup, ctrl, pending);
            }
            Born::Failed(errno) => {
                sup.tell(&format!("F {errno}"));
                return ExitCode::SUCCESS;
            }
            // An older kernel: the child moves itself in (below).
            Born::Unsupported => {}
        }
    }
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]).envs(env);
    // The term's cgroup (see `cgroup`): COMMAND moves itself in before
    // exec, so every process of its tree is born inside. Opened here: a
    // group already removed (a later term ended it) fails the write with
    // ENODEV, and COMMAND does not start.
    let procs = match cgroup.map(|dir| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
    }) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            sup.tell(&format!("F {}", e.raw_os_error().unwrap_or(0)));
            return ExitCode::SUCCESS;
        }
    };
    let procs_fd = procs.as_ref().map(|f| f.as_raw_fd());
    // SAFETY: between fork and exec the child only calls prctl, getppid
    // and write(2) and builds errors from raw codes: no allocation, no
    // locks.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            if nix::unistd::getppid() != me {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            if let Some(fd) = procs_fd {
                // "0": the writing process itself.
                if nix::libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    drop(procs);
    match spawned {
        Ok(child) => {
            #[allow(
                clippy::cast_possible_wrap,
                reason = "a Linux pid is at most PID_MAX_LIMIT, 2^22"
            )]
            let pid = child.id() as i32;
            sup.command = Some(pid);
            sup.tell(&format!("P {}", child.id()));
        }
        Err(e) => {
            sup.tell(&format!("F {}", e.raw_os_error().unwrap_or(0)));
            return ExitCode::SUCCESS;
        }
    }
    supervise(sup, ctrl, pending)
}

/// The supervisor's loop once COMMAND runs: messages from `elect`,
/// SIGCHLD, the watchdog and kill deadlines, until the tree is empty.
fn supervise(mut sup: Supervisor, mut ctrl: std::fs::File, mut pending: Vec<u8>) -> ExitCode {
    let mut ctrl_open = true;
    // Lines that came with the `G` line.
    while let Some(end) = pending.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = pending.drain(..=end).collect();
        sup.handle(String::from_utf8_lossy(&line).trim());
    }
    loop {
        let now = mono_ns();
        if sup.watch_term.is_some_and(|t| now >= t) && !sup.termed {
            sup.tell("W");
            sup.term_tree();
            sup.kill_at = match (sup.kill_at, sup.watch_kill) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        if sup.kill_at.is_some_and(|k| now >= k) || !ctrl_open {
            if ctrl_open && !descendants().is_empty() {
                sup.tell("Z");
            }
            sup.kill_tree();
        }
        if sup.reap() && sup.command.is_none() {
            sup.tell("E");
            return ExitCode::SUCCESS;
        }
        let next = [sup.watch_term.filter(|_| !sup.termed), sup.kill_at]
            .into_iter()
            .flatten()
            .min();
        let timeout_ms = match next {
            // Round up: never wake before the deadline and spin.
            Some(at) => i32::try_from(at.saturating_sub(now).div_ceil(1_000_000))
                .unwrap_or(i32::MAX)
                .clamp(0, 1000),
            None => 1000,
        };
        let ready = readable(&[ctrl.as_raw_fd(), sup.sigchld.as_raw_fd()], timeout_ms);
        if ready[1] {
            sup.drain_sigchld();
        }
        if ready[0] {
            let mut buf = [0u8; 512];
            match ctrl.read(&mut buf) {
                Ok(0) => ctrl_open = false,
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        sup.handle(String::from_utf8_lossy(&line).trim());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => ctrl_open = false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a real cgroup2 (tests run as root): COMMAND is born inside
    /// the term's group (its `/proc/PID/cgroup` names it from its first
    /// instruction, no migration); a missing program and a removed group
    /// start nothing and say why.
    #[test]
    fn a_command_is_born_in_the_terms_cgroup() {
        let mount = crate::cgroup::cgroup2_mount().expect("a cgroup2 mount (tests run as root)");
        let group = mount.join(format!("elect-born-{}", std::process::id()));
        std::fs::create_dir(&group).expect("create the group");
        let me = nix::unistd::getpid();
        let env = [("ELECTION_EPOCH".into(), "7".into())];
        let sh = [
            "sh",
            "-c",
            "test \"$ELECTION_EPOCH\" = 7 && exec sleep 1000",
        ]
        .map(String::from);
        let pid = match born_in_cgroup(&sh, &env, &group, me) {
            Born::Started(pid) => pid,
            other => panic!("not started: {other:?}"),
        };
        let procs = std::fs::read_to_string(group.join("cgroup.procs")).expect("procs");
        assert_eq!(procs.trim(), pid.to_string(), "not in the group");
        // The shell found the variable and became `sleep` (a shell that
        // exited stays `sh` until reaped).
        let comm = format!("/proc/{pid}/comm");
        let started = std::time::Instant::now();
        while std::fs::read_to_string(&comm).map_or(true, |c| c.trim() != "sleep") {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the command never became `sleep`: $ELECTION_EPOCH was not 7"
            );
            std::thread::yield_now();
        }
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        let status = nix::sys::wait::waitpid(Pid::from_raw(pid), None).expect("wait");
        assert_eq!(
            status,
            nix::sys::wait::WaitStatus::Signaled(Pid::from_raw(pid), Signal::SIGKILL, false),
            "it did not run until killed (the variable was not set?)"
        );
        let missing = ["/nonexistent/elect-test"].map(String::from);
        assert_eq!(
            born_in_cgroup(&missing, &env, &group, me),
            Born::Failed(nix::libc::ENOENT)
        );
        std::fs::remove_dir(&group).expect("remove the group");
        assert!(matches!(
            born_in_cgroup(&sh, &env, &group, me),
            Born::Failed(nix::libc::ENOENT | nix::libc::ENODEV)
        ));
    }

    #[test]
    fn stat_reads_parent_and_start_time() {
        let me = nix::unistd::getpid().as_raw();
        let (pid, ppid, start) = stat(me).expect("own stat");
        assert_eq!(pid, me);
        assert_eq!(ppid, nix::unistd::getppid().as_raw());
        assert!(start > 0);
        assert_eq!(stat(-1), None);
    }

    #[test]
    fn descendants_are_found_and_signalled_by_start_time() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("piped")),
            &mut line,
        )
        .expect("grandchild pid");
        let grandchild: i32 = line.trim().parse().expect("pid");
        let found = descendants();
        let pids: Vec<i32> = found.iter().map(|p| p.pid).collect();
        assert!(
            pids.contains(&i32::try_from(child.id()).unwrap()),
            "{found:?}"
        );
        assert!(pids.contains(&grandchild), "{found:?}");
        let g = found
            .iter()
            .find(|p| p.pid == grandchild)
            .copied()
            .expect("found");
        // A stale start time names another process: not signalled.
        send(
            Proc {
                start: g.start + 1,
                ..g
            },
            Signal::SIGKILL,
        );
        assert!(
            stat(grandchild).is_some(),
            "a stale start time was signalled"
        );
        send(g, Signal::SIGKILL);
        let status = child.wait().expect("wait");
        assert!(status.success(), "{status}");
    }
}
