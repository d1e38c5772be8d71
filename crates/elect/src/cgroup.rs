//! Each term's command tree in a cgroup v2 of its own, so that nothing of
//! a deposed term runs beside the next one on the same host (issue 23,
//! ADR 0049).
//!
//! The supervisor (see [`crate::supervisor`]) finds COMMAND's tree as its
//! descendants, which holds only while it runs. A tree whose supervisor
//! was killed or stopped together with `elect` (SIGKILL of the process
//! group, the OOM killer, Ctrl-Z, a frozen container) has nobody left to
//! stop it, and a process that left as daemons do (fork, `setsid`, fork
//! again, close every descriptor, ignore SIGTERM) runs on. A cgroup holds
//! every process forked inside it, whatever it does to its session or its
//! descriptors, and the kernel can kill all of them at once, also stopped
//! and frozen ones (`cgroup.kill`, Linux 5.14).
//!
//! The layout, under a parent directory on a cgroup2 mount (default
//! `<the cgroup2 mount>/elect`, found in `/proc/self/mountinfo`; another
//! with `ELECT_CGROUP_PARENT=DIR`, none with `ELECT_CGROUP_PARENT=none`):
//! - one directory per election, `<name>-<hash>`: the hash is of the
//!   store that keeps the election, as the backend identifies it
//!   ([`election_core::StoreId`]: the device and inode of the directory or
//!   database file, a PostgreSQL server's system identifier, database and
//!   schema, a NATS bucket's stream), and the name, so every `elect run`
//!   of one election on this host finds the same directory however it
//!   reached the backend (a bind mount, `localhost` or `127.0.0.1`, the
//!   servers in another order), and no other election's;
//! - in it one directory per term, `term-<epoch>`, created by the winner
//!   before COMMAND starts; the supervisor creates COMMAND inside it
//!   (`clone3` with `CLONE_INTO_CGROUP`; on kernels before 5.7 the child
//!   writes `0` to `cgroup.procs` between fork and exec, ADR 0066), so
//!   every process of the tree is born inside it.
//!
//! - a nested run (an `elect run` started by a term's command, so inside
//!   that term's group) makes its election's directory inside the
//!   enclosing term's group, not beside it: the outer term's end (by its
//!   `elect`, or by the next outer winner) kills the inner job too. Every
//!   candidate looks for an election's terms in all its directories under
//!   the parent at the top of the nesting (at the top, and nested in any
//!   term's group), so a nested and a plain candidate of one election
//!   still end each other's earlier terms.
//!
//! A term's group ends (`cgroup.kill`, wait until `cgroup.events` says
//! `populated 0`, `rmdir`, repeated until the directory is gone, since a
//! process moved in after a kill keeps it busy; a removed cgroup takes no
//! process: the write fails with `ENODEV`):
//! - by its own `elect` when the tree has ended (to be sure), when the
//!   supervisor died and when it did not stop the tree by its deadline;
//! - by the **next winner on this host, before it starts its command**:
//!   every group of an earlier term of the election. A group of a later
//!   term means this term is already over: its command is not started.
//!
//! Where no cgroup can be used (no cgroup2 mount, a parent that is not
//! writable, no `cgroup.kill`), `elect run` says at the start of its
//! campaign what is then not guaranteed, and works as before.

use std::io::Write;

use nix::fcntl::{Flock, FlockArg};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable that names the parent directory of the
/// election groups, or `none` to use no cgroup.
pub(crate) const PARENT_ENV: &str = "ELECT_CGROUP_PARENT";

/// The `--help` text on the cgroups (also in the man page).
pub(crate) const HELP: &str = "\
The command's cgroup (elect run):
  ELECT_CGROUP_PARENT=DIR       a cgroup v2 directory for the terms' cgroups
                                [default: <the cgroup2 mount>/elect]
  ELECT_CGROUP_PARENT=none      no cgroup (elect warns at start)
  Each term's command tree runs in DIR/NAME-HASH/term-EPOCH (HASH: the
  store that keeps the election, however the backend was written); the
  next winner on this host kills what is left in an earlier term's group
  before its command starts. An elect run inside a term's group (started
  by its command) makes its groups inside that group, so the outer term's
  end reaches them. Candidates find each other's groups only under the
  same DIR. Needs root or a delegated directory; without one, elect warns.";

/// The groups of one election on this host. Dropped (when `elect run`
/// ends, elected or not), its directory is removed if no term's group is
/// in it and no other `elect run` of the election on this host has it
/// open (ADR 0076: a waiting candidate keeps it, so a handover makes no
/// cgroup directory and removes none).
#[derive(Debug)]
pub(crate) struct Election {
    /// Where this `elect run` makes its terms' groups: `<parent>/<name>-<hash>`,
    /// or, in a nested run, that directory inside the enclosing term's group.
    dir: PathBuf,
    /// Where every candidate of the election on this host looks for its
    /// terms' groups: the parent at the top of the nesting, searched
    /// through every term's group for nested directories of the election.
    root: PathBuf,
    /// The election's directory name (`<name>-<hash>`).
    dir_name: String,
    /// The directory, open with a shared `flock` for as long as this
    /// `elect` runs: a candidate's presence. Whoever leaves last (its
    /// exclusive `flock` succeeds) removes the directory.
    presence: Option<Flock<std::fs::File>>,
}

/// One term's group.
#[derive(Clone, Debug)]
pub(crate) struct TermGroup {
    dir: PathBuf,
}

/// Why no cgroup is used, and where the election's groups of other
/// candidates on this host would be, to look at them without one.
#[derive(Debug)]
pub(crate) struct Unavailable {
    /// Why.
    pub(crate) why: String,
    /// The election's groups, if a cgroup2 file system is mounted.
    pub(crate) seen: Option<Seen>,
}

/// The groups of one election on this host as a candidate sees them that
/// cannot make or end groups itself (no cgroup of its own: not root,
/// `ELECT_CGROUP_PARENT=none`): it can still tell whether an earlier
/// term's processes run, and wait until they are gone.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    root: PathBuf,
    dir_name: String,
}

/// What a candidate without a cgroup sees of other terms' groups when it
/// wins term `epoch`.
#[derive(Debug, Default)]
pub(crate) struct Beside {
    /// Groups of earlier terms with processes in them.
    pub(crate) earlier: Vec<(u64, TermGroup)>,
    /// The latest later term whose group exists: this term is over.
    pub(crate) later: Option<u64>,
}

impl Seen {
    /// Where the election's groups are seen from.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The other terms' groups of the election, as term `epoch` sees them.
    pub(crate) fn beside(&self, epoch: u64) -> Beside {
        let terms = terms_in(&self.root, &self.dir_name, None).unwrap_or_default();
        Beside {
            later: terms.iter().map(|(e, _)| *e).filter(|e| *e > epoch).max(),
            earlier: terms
                .into_iter()
                .filter(|(e, g)| *e < epoch && g.populated().unwrap_or(false))
                .collect(),
        }
    }
}

/// The mount point of the cgroup2 file system (the first one in
/// `/proc/self/mountinfo`).
pub(crate) fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        // `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER`
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace()
            .nth(4)
            .map(|m| PathBuf::from(unescape(m)))
    })
}

/// `/proc/self/mountinfo` writes space, tab, newline and backslash in
/// octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(digits) = b.get(i + 1..i + 4)
            && digits.iter().all(|d| (b'0'..=b'7').contains(d))
        {
            let v = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
            // `\400` to `\777` name no byte: kept as written.
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// FNV-1a, 64 bits: a hash that every `elect` version computes alike.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The directory name of election `name` in the store `store` (its
/// [`election_core::StoreId`], or the backend as written where the backend
/// cannot identify its store).
fn election_dir_name(store: &str, name: &str) -> String {
    let shown: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let key = format!("{store}\0{name}");
    format!("{shown}-{:016x}", fnv1a(key.as_bytes()))
}

impl Election {
    /// The groups of election `name` on `backend` (a stable description
    /// of the backend: see the module's docs), under `parent` (from
    /// [`PARENT_ENV`] if `None`): the election's directory is created if
    /// missing. `Err`: no cgroup can be used, and why.
    pub(crate) fn open(
        parent: Option<&std::ffi::OsStr>,
        backend: &str,
        name: &str,
    ) -> Result<Election, Unavailable> {
        let default = || cgroup2_mount().map(|m| m.join("elect"));
        let (parent, none) = match parent
            .map(ToOwned::to_owned)
            .or_else(|| std::env::var_os(PARENT_ENV))
        {
            Some(p) if p == "none" => (default(), true),
            Some(p) if !p.is_empty() => (Some(PathBuf::from(p)), false),
            _ => (default(), false),
        };
        let dir_name = election_dir_name(backend, name);
        // Inside a term's group of an `elect run` (a nested run): this
        // election's groups go below it, so that the outer term's end
        // reaches them too.
        let enclosing = enclosing_term();
        let seen = enclosing
            .as_ref()
            .map(|e| e.root.clone())
            .or_else(|| parent.clone())
            .map(|root| Seen {
                root,
                dir_name: dir_name.clone(),
            });
        let unavailable = |why: String| Unavailable {
            why,
            seen: seen.clone(),
        };
        if none {
            return Err(unavailable(format!("{PARENT_ENV}=none")));
        }
        let Some(parent) = parent else {
            return Err(unavailable("no cgroup2 file system is mounted".into()));
        };
        // Nothing is created outside a cgroup2 file system: the nearest
        // directory of the parent that exists must be on one.
        let existing = parent.ancestors().find(|a| a.exists());
        let on_cgroup2 = existing.is_some_and(|a| {
            nix::sys::statfs::statfs(a)
                .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
        });
        if !on_cgroup2 {
            return Err(unavailable(format!(
                "{} is not on a cgroup2 file system",
                parent.display()
            )));
        }
        let (dir, root) = match enclosing {
            Some(term) => (term.dir.join(&dir_name), term.root),
            None => (parent.join(&dir_name), parent),
        };
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return Err(unavailable(format!("cannot create {}: {e}", dir.display())));
        }
        // Made by another user (root) for the same election: usable only
        // if this process may create the terms' groups in it.
        if let Err(e) = nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK) {
            return Err(unavailable(format!(
                "{} is not writable: {e}",
                dir.display()
            )));
        }
        for file in ["cgroup.procs", "cgroup.kill", "cgroup.events"] {
            if !dir.join(file).exists() {
                return Err(unavailable(format!(
                    "{} has no {file} (not a cgroup v2 directory, or Linux before 5.14)",
                    dir.display()
                )));
            }
        }
        let presence = present(&dir);
        Ok(Election {
            dir,
            root,
            dir_name,
            presence,
        })
    }

    /// The election's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The election's groups as seen without making or ending any.
    pub(crate) fn seen(&self) -> Seen {
        Seen {
            root: self.root.clone(),
            dir_name: self.dir_name.clone(),
        }
    }

    /// The term groups of the election that exist now on this host, by
    /// epoch ([`terms_in`]).
    fn terms(&self) -> std::io::Result<Vec<(u64, TermGroup)>> {
        terms_in(&self.root, &self.dir_name, Some(&self.dir))
    }

    /// The group of term `epoch` (not created).
    pub(crate) fn term(&self, epoch: u64) -> TermGroup {
        TermGroup {
            dir: self.dir.join(format!("term-{epoch}")),
        }
    }

    /// For the winner of term `epoch`, before its command starts: creates
    /// the term's group, then ends every group of an earlier term (each
    /// end is said through `on_leftover` first: epoch and whether
    /// processes were left in it). `Err(Later(n))`: a group of the later
    /// term `n` exists, so this term is already over.
    pub(crate) async fn begin(
        &self,
        epoch: u64,
        mut on_leftover: impl FnMut(u64, bool),
    ) -> Result<TermGroup, Begin> {
        let group = self.term(epoch);
        // The election's directory may have been removed since `open` by
        // the end of another term (see its `Drop`): made again.
        let mut tries = 0;
        loop {
            std::fs::create_dir_all(&self.dir).map_err(Begin::Io)?;
            match std::fs::create_dir(&group.dir) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 100 => tries += 1,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // Left by an earlier run with this very epoch: empty it.
                    group.end().await.map_err(Begin::Io)?;
                }
                Err(e) => return Err(Begin::Io(e)),
            }
        }
        // Created before the scan: a process of an earlier term that
        // creates its group after this scan finds this one (and does not
        // start); one that created it before is found here.
        let terms = self.terms().map_err(Begin::Io)?;
        if let Some((later, _)) = terms.iter().rev().find(|(other, _)| *other > epoch) {
            let _ = group.end().await;
            return Err(Begin::Later(*later));
        }
        for (other, old) in terms {
            // This term's own group; one of this very epoch elsewhere (a
            // nested directory) was left by an earlier run: ended too.
            if other > epoch || old.dir == group.dir {
                continue;
            }
            on_leftover(other, old.populated().unwrap_or(false));
            old.end().await.map_err(Begin::Io)?;
        }
        Ok(group)
    }
}

/// The term groups of the election whose directories are named
/// `dir_name` that exist now on this host, by epoch: in `own` (this run's
/// directory, whose reading must not fail) and in every directory of the
/// election under `root` (at the top, and nested in other elections' term
/// groups).
fn terms_in(
    root: &Path,
    dir_name: &str,
    own: Option<&Path>,
) -> std::io::Result<Vec<(u64, TermGroup)>> {
    let mut dirs: Vec<PathBuf> = own.map(Path::to_path_buf).into_iter().collect();
    election_dirs(root, dir_name, 0, &mut dirs);
    dirs.sort();
    dirs.dedup();
    let mut found = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // Removed meanwhile (its last candidate left), or nested in a
            // term group that ended: nothing of it is left.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) if Some(dir.as_path()) != own => continue,
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            if let Some(epoch) = term_epoch(&entry.file_name()) {
                found.push((epoch, TermGroup { dir: entry.path() }));
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.dir.cmp(&b.1.dir)));
    Ok(found)
}

/// The epoch of a term group's directory name (`term-<epoch>`).
fn term_epoch(name: &std::ffi::OsStr) -> Option<u64> {
    name.to_str()?.strip_prefix("term-")?.parse().ok()
}

/// Whether `name` is an election directory's name (`<name>-<16 hex>`).
fn is_election_dir_name(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .and_then(|n| n.rsplit_once('-'))
        .is_some_and(|(_, hash)| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// How deep nested runs are searched (an election inside a term inside an
/// election ...): far more than anyone nests.
const MAX_NESTING: usize = 16;

/// Adds to `found` every directory named `dir_name` below `dir`: an
/// election's directory at the top (`dir` is the root), or nested in a
/// term group of another election. Only election directories and term
/// groups are searched; unreadable ones are skipped.
fn election_dirs(dir: &Path, dir_name: &str, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > MAX_NESTING {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name();
        if name == dir_name {
            found.push(entry.path());
        }
        // Below an election directory: its term groups; below a term
        // group: the elections nested in it.
        let in_election = depth.is_multiple_of(2) && is_election_dir_name(&name);
        let in_term = !depth.is_multiple_of(2) && term_epoch(&name).is_some();
        if in_election || in_term {
            election_dirs(&entry.path(), dir_name, depth + 1, found);
        }
    }
}

/// The term group this process runs in, when it is one of an `elect run`
/// (a nested run: the command of a term runs `elect run` itself), and the
/// root of that nesting: where the outermost election's directory is.
struct Enclosing {
    /// The innermost term group this process is in.
    dir: PathBuf,
    /// The directory holding the outermost election's directory.
    root: PathBuf,
}

/// This process's cgroup v2 (`/proc/self/cgroup`'s `0::` line) under the
/// cgroup2 mount, if it is a term group of `elect run` or a group a command
/// made below one: `.../<name>-<hash>/term-<epoch>[/...]`.
fn enclosing_term() -> Option<Enclosing> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let full = cgroup2_mount()?.join(own.trim_start_matches('/'));
    enclosing_in(&full)
}

/// [`enclosing_term`] for the cgroup at `full`.
fn enclosing_in(full: &Path) -> Option<Enclosing> {
    // The innermost term group among the ancestors.
    let term = full.ancestors().find(|a| is_term_group(a))?;
    // The outermost: climb while the election directory's parent is
    // itself a term group.
    let mut top = term;
    while let Some(outer) = top
        .parent()
        .and_then(Path::parent)
        .filter(|p| is_term_group(p))
    {
        top = outer;
    }
    Some(Enclosing {
        dir: term.to_path_buf(),
        root: top.parent()?.parent()?.to_path_buf(),
    })
}

/// Whether `dir` is named as a term group in an election directory.
fn is_term_group(dir: &Path) -> bool {
    dir.file_name().is_some_and(|n| term_epoch(n).is_some())
        && dir
            .parent()
            .and_then(Path::file_name)
            .is_some_and(is_election_dir_name)
}

/// Opens the election's directory `dir` (made again if it was removed
/// meanwhile) and takes a shared `flock` on it: this `elect run`'s
/// presence. `None` if that fails (or stays refused for about 100 ms);
/// this process then never removes the directory.
fn present(dir: &Path) -> Option<Flock<std::fs::File>> {
    for _ in 0..100 {
        let _ = std::fs::create_dir_all(dir);
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
            .open(dir)
            .ok()?;
        // Refused only while a leaving candidate removes the directory
        // (its exclusive lock): never waited on, so a candidate stopped
        // there (Ctrl-Z) cannot hold up this one, which then just keeps
        // no presence.
        let locked = match Flock::lock(opened, FlockArg::LockSharedNonblock) {
            Ok(l) => l,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(_) => return None,
        };
        // Removed between the open and the lock: the lock is on a
        // directory that is gone; again, on the new one.
        if same_dir(&locked, dir) {
            return Some(locked);
        }
    }
    None
}

/// Whether `held` is the directory at `dir` now.
fn same_dir(held: &std::fs::File, dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (held.metadata(), std::fs::metadata(dir)) {
        (Ok(held), Ok(now)) => held.ino() == now.ino() && held.dev() == now.dev(),
        _ => false,
    }
}

impl Drop for Election {
    /// Removes the election's directory if no other `elect run` of the
    /// election on this host has it open (this one's exclusive `flock`
    /// succeeds beside no shared one), after the groups of terms whose
    /// processes are all gone (a holder SIGKILLed with nobody winning
    /// after it leaves its group behind). A populated group stays, and so
    /// does the directory, for the next winner to end; a failure (it is
    /// gone) is fine. A winner makes it again before it creates its
    /// term's group.
    fn drop(&mut self) {
        let Some(presence) = self.presence.take() else {
            return;
        };
        // Only the directory this lock is on: one removed from under it
        // (by an `elect` before ADR 0076) and made again belongs to the
        // candidates that hold the new one.
        if presence.relock(FlockArg::LockExclusiveNonblock).is_ok()
            && same_dir(&presence, &self.dir)
        {
            remove_ended_terms(&self.dir);
            let _ = std::fs::remove_dir(&self.dir);
        }
        // The lock goes with the descriptor.
        drop(presence);
    }
}

/// Removes every term group in election directory `dir` that no process
/// is in (nor below it), under the caller's exclusive presence lock: no
/// candidate of the election is running with a presence, so none is
/// between making such a group and starting its command in it. (One that
/// runs without a presence, which only a removal stopped for 100 ms
/// causes, would find its group gone at the clone and not start its
/// command: a refusal, never an overlap.)
fn remove_ended_terms(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if term_epoch(&entry.file_name()).is_none() {
            continue;
        }
        let group = TermGroup { dir: entry.path() };
        if group.populated().is_ok_and(|p| !p) {
            let _ = remove_tree(group.dir());
        }
    }
}

/// Why a term's group could not be begun.
#[derive(Debug)]
pub(crate) enum Begin {
    /// A group of this later term exists on this host.
    Later(u64),
    /// The cgroup file system failed.
    Io(std::io::Error),
}

impl TermGroup {
    /// The group's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a process is in the group (or a group below it).
    pub(crate) fn populated(&self) -> std::io::Result<bool> {
        let events = std::fs::read_to_string(self.dir.join("cgroup.events"))?;
        Ok(events.lines().any(|l| l == "populated 1"))
    }

    /// SIGKILL to every process of the group and the groups below it,
    /// stopped and frozen ones included. A group that is gone is fine.
    pub(crate) fn kill(&self) -> std::io::Result<()> {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_CLOEXEC)
            .open(self.dir.join("cgroup.kill"));
        match opened {
            Ok(mut f) => match f.write_all(b"1") {
                Ok(()) => Ok(()),
                Err(e) if e.raw_os_error() == Some(nix::libc::ENODEV) => Ok(()),
                Err(e) => Err(e),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Ends the group: kills every process in it, waits until none is
    /// left, and removes it (and the groups a command made below it), all
    /// repeated until the directory is gone. Waits as long as a process
    /// in it lives (one in uninterruptible sleep ends when its I/O does).
    pub(crate) async fn end(&self) -> std::io::Result<()> {
        loop {
            self.kill()?;
            let populated = match self.populated() {
                Ok(p) => p,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
            if populated {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            match remove_tree(&self.dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                // A process was moved in after the kill: again.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(nix::libc::EBUSY | nix::libc::ENOTEMPTY)
                    ) =>
                {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Removes cgroup `dir` and every cgroup below it (deepest first); the
/// interface files inside go with their directory.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            match remove_tree(&entry.path()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    std::fs::remove_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/sys/fs/cgroup"), "/sys/fs/cgroup");
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/a\\"), r"/a\\");
    }

    #[test]
    fn election_directories_are_stable_and_distinct() {
        let a = election_dir_name("file:///srv/e", "job");
        assert_eq!(a, election_dir_name("file:///srv/e", "job"));
        assert_ne!(a, election_dir_name("file:///srv/f", "job"));
        assert_ne!(a, election_dir_name("file:///srv/e", "job2"));
        assert!(a.starts_with("job-"), "{a}");
        let odd = election_dir_name("x", "a b/ü");
        assert!(
            odd.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "{odd}"
        );
        // FNV-1a's published test vector.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_nested_run_finds_its_enclosing_term_and_the_root_of_the_nesting() {
        let root = Path::new("/cg/elect");
        let outer = root.join("outer-0123456789abcdef/term-5");
        // Directly in the outer term's group, or in a group its command made.
        for own in [outer.clone(), outer.join("worker"), outer.join("a/b")] {
            let found = enclosing_in(&own).expect("nested");
            assert_eq!(found.dir, outer, "{}", own.display());
            assert_eq!(found.root, root);
        }
        // Two levels: the innermost term, the outermost's root.
        let inner = outer.join("inner-fedcba9876543210/term-2");
        let found = enclosing_in(&inner.join("x")).expect("nested twice");
        assert_eq!(found.dir, inner);
        assert_eq!(found.root, root);
        // Not in a term group: a plain group, a term-like name outside an
        // election directory, an election directory itself.
        assert!(enclosing_in(Path::new("/cg/user.slice/term-5")).is_none());
        assert!(enclosing_in(Path::new("/cg/elect/outer-0123456789abcdef")).is_none());
        assert!(enclosing_in(Path::new("/cg/elect/outer-xyz/term-5")).is_none());
        assert!(enclosing_in(Path::new("/")).is_none());
    }

    #[test]
    fn every_directory_of_an_election_is_found_at_the_top_and_nested() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let name = election_dir_name("s", "inner");
        let other = election_dir_name("s", "outer");
        let mk = |p: &Path| std::fs::create_dir_all(p).unwrap();
        let top = root.join(&name);
        let nested = root.join(&other).join("term-3").join(&name);
        let twice = nested
            .join("term-1")
            .join(&other)
            .join("term-9")
            .join(&name);
        for d in [&top, &nested, &twice] {
            mk(d);
        }
        // Not searched: a directory of that name in a group that is not a
        // term's, or in a term group outside an election directory.
        mk(&root.join(&other).join("worker").join(&name));
        mk(&root.join("term-4").join(&name));
        let mut found = Vec::new();
        election_dirs(root, &name, 0, &mut found);
        found.sort();
        let mut want = vec![top, nested, twice];
        want.sort();
        assert_eq!(found, want);
    }

    /// A process in this test's own cgroup2 parent, moved into `group`.
    fn sleeper_in(group: &TermGroup) -> std::process::Child {
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .expect("sleep");
        std::fs::write(group.dir().join("cgroup.procs"), child.id().to_string())
            .expect("move into the group");
        child
    }

    /// With a real cgroup2 (tests run as root): the election's directory
    /// stays while another `elect run` of the election has it open (a
    /// waiting candidate: a handover then makes and removes no cgroup
    /// directory, ADR 0076), and the last one to leave removes it; one
    /// that opens it while it is being removed gets the new one.
    #[test]
    fn the_last_candidate_to_leave_removes_the_election_directory() {
        let mount = cgroup2_mount().expect("a cgroup2 mount (tests run as root)");
        let parent = mount.join(format!("elect-unit-presence-{}", std::process::id()));
        let open = || Election::open(Some(parent.as_os_str()), "file:///unit", "job");
        let a = open().expect("cgroups");
        let b = open().expect("cgroups");
        let dir = a.dir().to_path_buf();
        drop(a);
        assert!(dir.is_dir(), "removed while another candidate had it open");
        drop(b);
        assert!(!dir.exists(), "the last candidate left it behind");
        // A holder SIGKILLed with nobody after it left its term's group:
        // the last to leave removes an empty one with the directory, and
        // leaves a populated one (and so the directory) to the next winner.
        let f = open().expect("cgroups");
        let dead = f.term(7);
        std::fs::create_dir(dead.dir()).expect("a dead holder's group");
        drop(f);
        assert!(!dir.exists(), "an empty dead term's group kept it");
        let g = open().expect("cgroups");
        let alive = g.term(8);
        std::fs::create_dir(alive.dir()).expect("a group with a process");
        let mut orphan = sleeper_in(&alive);
        drop(g);
        assert!(alive.dir().is_dir(), "a populated group was removed");
        orphan.kill().expect("kill");
        orphan.wait().expect("reap");
        let h = open().expect("cgroups");
        drop(h);
        assert!(!dir.exists(), "the ended group was left once empty");
        // Removed from under a holder by something else (an older elect):
        // a new candidate still gets a directory it holds, and removes it.
        let c = open().expect("cgroups");
        std::fs::remove_dir(&dir).expect("remove");
        let d = open().expect("cgroups");
        assert!(dir.is_dir());
        drop(c);
        assert!(dir.is_dir(), "removed by a candidate holding the old one");
        drop(d);
        assert!(!dir.exists());
        // A candidate stopped while it removes the directory (holding the
        // exclusive lock) does not hold up a new one: it runs without a
        // presence, and leaves the directory to the others.
        std::fs::create_dir(&dir).expect("mkdir");
        let remover = std::fs::File::open(&dir).expect("open");
        let remover = Flock::lock(remover, FlockArg::LockExclusive).expect("lock");
        let e = open().expect("cgroups");
        assert!(e.presence.is_none());
        drop(e);
        assert!(dir.is_dir(), "removed without a presence");
        drop(remover);
        std::fs::remove_dir(&dir).expect("remove");
        std::fs::remove_dir(&parent).expect("remove the test's parent");
    }

    /// With a real cgroup2 (CI runs as root): the winner of a later term
    /// kills what is left in an earlier term's group and removes it; an
    /// earlier term that begins after a later one is told so; a removed
    /// group takes no process.
    #[tokio::test]
    async fn a_later_term_ends_earlier_groups_and_an_earlier_one_does_not_begin() {
        let mount = cgroup2_mount().expect("a cgroup2 mount (tests run as root)");
        let parent = mount.join(format!("elect-unit-{}", std::process::id()));
        let groups =
            Election::open(Some(parent.as_os_str()), "file:///unit", "job").expect("cgroups");
        let two = groups
            .begin(2, |_, _| panic!("no earlier term"))
            .await
            .expect("term 2");
        let mut old = sleeper_in(&two);
        assert!(two.populated().expect("events"));
        let mut seen = Vec::new();
        let three = groups
            .begin(3, |epoch, populated| seen.push((epoch, populated)))
            .await
            .expect("term 3");
        assert_eq!(seen, [(2, true)]);
        let status = old.wait().expect("wait");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "{status}"
        );
        assert!(!two.dir().exists(), "term 2's group is still there");
        // A removed group takes no process.
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .open(three.dir().join("cgroup.procs"))
            .expect("open");
        match groups.begin(1, |_, _| {}).await {
            Err(Begin::Later(3)) => {}
            other => panic!("term 1 began beside term 3: {other:?}"),
        }
        three.end().await.expect("end term 3");
        let moved = std::io::Write::write_all(&mut &opened, b"0");
        assert_eq!(
            moved.map_err(|e| e.raw_os_error()),
            Err(Some(nix::libc::ENODEV))
        );
        drop(groups);
        std::fs::remove_dir(&parent).expect("remove the test's parent");
    }
}
