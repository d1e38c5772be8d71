//! The `etcdctl lock` rows of the CLI group: what people pick for this job,
//! measured in the same run as `elect run` and `flock(1)` and in the same
//! way (see `cli`): `etcdctl lock --ttl=2 cli CHILD` as a shell job, its
//! uncontested start and its clean handover (SIGINT to the leader's process
//! group: `etcdctl` catches it, its child dies, it unlocks and exits).
//!
//! The bench starts its own etcd (one member, listening on two free ports
//! of 127.0.0.1, its data in a temporary directory) from Debian's
//! `etcd-server` package, and runs Debian's `etcd-client` `etcdctl`. When
//! either binary is missing from `PATH` the rows are skipped with a note:
//! the bench never fails for it.
//!
//! Rows: `etcdctl lock` beside `flock(1)` (what etcd itself costs over the
//! local floor), then each `elect run` backend's start and clean handover
//! beside `etcdctl lock`'s (issue 27: on its own ground, a networked store
//! and a shell command, `elect` should be the quicker choice). `etcdctl
//! lock` runs in every backend's race (`cli::race`, which also builds
//! these rows), so each backend's rows beside it are paired round by round.
//! `etcdctl elect NAME PROPOSAL` runs in the etcd backend's race: its
//! uncontested start and clean handover beside `etcdctl lock`'s, and
//! `elect run`'s on etcd beside its.
//!
//! The etcd group (`--only etcd`, [`library`]): `election-etcd` in process
//! and in candidate processes, beside bare requests ([`bare`]) on the same
//! member ([`Member`]: this module's own where etcd is installed, else
//! etcd-testkit's).

pub(crate) mod bare;
pub(crate) mod library;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Result;

/// The session TTL given to `etcdctl lock` (seconds; its default is 60).
pub(crate) const ETCD_TTL: u32 = 2;

/// How long a new `etcdctl` waiter is given to connect and block before
/// the leader leaves (a Go binary that dials gRPC first).
pub(crate) const ETCD_SETTLE: Duration = Duration::from_millis(100);

/// How long etcd may take to answer its first request.
const READY: Duration = Duration::from_secs(30);

/// `etcd` and `etcdctl` as found on `PATH`.
#[derive(Clone, Debug)]
pub(crate) struct Binaries {
    etcd: PathBuf,
    etcdctl: PathBuf,
}

/// Looks `name` up in the directories of `path` (a `PATH` value).
fn on_path(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path).map(|d| d.join(name)).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

impl Binaries {
    /// Both binaries, or a note saying which is missing and how to get it.
    pub(crate) fn find() -> std::result::Result<Binaries, String> {
        Binaries::find_in(&std::env::var_os("PATH").unwrap_or_default())
    }

    /// The same in the directories of `path`.
    fn find_in(path: &std::ffi::OsStr) -> std::result::Result<Binaries, String> {
        match (on_path(path, "etcd"), on_path(path, "etcdctl")) {
            (Some(etcd), Some(etcdctl)) => Ok(Binaries { etcd, etcdctl }),
            (etcd, _) => Err(format!(
                "`etcdctl lock` rows skipped: `{}` is not on PATH (Debian: `apt-get install \
                 etcd-server etcd-client`)",
                if etcd.is_none() { "etcd" } else { "etcdctl" }
            )),
        }
    }

    /// `etcd --version`'s first line's version (`3.4.23`), or `?`.
    fn version(&self) -> String {
        version_of(&self.etcd)
    }
}

/// The version `etcd --version` of the binary `etcd` prints (`3.4.23`), or
/// `?`.
fn version_of(etcd: &Path) -> String {
    Command::new(etcd)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("etcd Version: ").map(str::to_owned))
        })
        .unwrap_or_else(|| "?".into())
}

/// The etcd member the etcd group's rows run on: the bench's own
/// ([`Server`]) from the installed `etcd`, the build the CLI rows'
/// `etcdctl` and `elect run` use, else one that etcd-testkit starts from
/// its pinned build. Stopped on drop.
pub(crate) enum Member {
    /// The bench's own, from `etcd` on `PATH`.
    Installed {
        /// The running member.
        server: Server,
        /// Its version.
        version: String,
    },
    /// etcd-testkit's.
    Testkit {
        /// The running member.
        member: etcd_testkit::Member,
        /// Its version.
        version: String,
    },
}

impl Member {
    /// Starts one member, its output appended to `log`.
    pub(crate) fn start(log: &Path) -> Result<Member> {
        match Binaries::find() {
            Ok(bins) => Ok(Member::Installed {
                version: bins.version(),
                server: Server::start(&bins, log)?,
            }),
            Err(_) => Ok(Member::Testkit {
                member: etcd_testkit::Member::start()?,
                version: version_of(&etcd_testkit::etcd_bin()?),
            }),
        }
    }

    /// Its client address, `127.0.0.1:PORT`.
    pub(crate) fn endpoint(&self) -> String {
        match self {
            Member::Installed { server, .. } => {
                server.endpoint.trim_start_matches("http://").to_owned()
            }
            Member::Testkit { member, .. } => member.endpoint(),
        }
    }

    /// Which build it is, for the notes: `etcd 3.4.23 (the installed …)`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Member::Installed { version, .. } => format!(
                "etcd {version} (the installed `etcd`, the build the CLI rows' `etcdctl` runs \
                 against)"
            ),
            Member::Testkit { version, .. } => {
                format!("etcd {version} (etcd-testkit's pinned build: no `etcd` on PATH)")
            }
        }
    }
}

/// A free TCP port of 127.0.0.1 (bound, read, released).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One etcd member of the bench's own, killed and its data removed on drop.
pub(crate) struct Server {
    child: Child,
    endpoint: String,
    _data: tempfile::TempDir,
}

impl Server {
    /// Starts etcd on two free ports of 127.0.0.1, its data in a new
    /// temporary directory, its output appended to `log`, and waits until
    /// `etcdctl endpoint health` answers.
    pub(crate) fn start(bins: &Binaries, log: &Path) -> Result<Server> {
        let data = tempfile::Builder::new().prefix("bench-etcd").tempdir()?;
        let (client, peer) = (free_port()?, free_port()?);
        let endpoint = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let out = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)?;
        let child = Command::new(&bins.etcd)
            .arg("--name=bench")
            .arg(format!("--data-dir={}", data.path().display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=bench={peer_url}"))
            .arg("--initial-cluster-state=new")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("start {}: {e}", bins.etcd.display()))?;
        let mut server = Server {
            child,
            endpoint,
            _data: data,
        };
        let t = Instant::now();
        loop {
            if let Some(status) = server.child.try_wait()? {
                return Err(
                    format!("etcd exited at start ({status}); see {}", log.display()).into(),
                );
            }
            let healthy = Command::new(&bins.etcdctl)
                .env("ETCDCTL_API", "3")
                .arg(format!("--endpoints={}", server.endpoint))
                .args(["--dial-timeout=1s", "--command-timeout=1s"])
                .args(["endpoint", "health"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?
                .success();
            if healthy {
                return Ok(server);
            }
            if t.elapsed() > READY {
                return Err(format!("etcd did not answer within {READY:?}").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the report's header says of these rows.
pub(crate) fn header() -> String {
    format!(
        "; beside them `etcdctl lock --ttl={ETCD_TTL}` when etcd is installed (its own \
         member on 127.0.0.1, as many uncontested starts and clean handovers, {} ms to settle), \
         and in the etcd backend's race `etcdctl elect` as well (as many, the same settle)",
        ETCD_SETTLE.as_millis()
    )
}

/// The bench's etcd member and what runs `etcdctl lock` against it.
pub(crate) struct Etcd {
    bins: Binaries,
    version: String,
    server: Server,
}

impl Etcd {
    /// Starts one etcd member when etcd is installed; without it, a note
    /// in `notes` and `None`, never a failure.
    pub(crate) fn start(log: &Path, notes: &mut Vec<String>) -> Result<Option<Etcd>> {
        let bins = match Binaries::find() {
            Ok(bins) => bins,
            Err(note) => {
                eprintln!("bench: {note}");
                notes.push(note);
                return Ok(None);
            }
        };
        let version = bins.version();
        let server = crate::step("cli: start one etcd member", || Server::start(&bins, log))?;
        Ok(Some(Etcd {
            bins,
            version,
            server,
        }))
    }

    /// The `etcdctl` binary.
    pub(crate) fn etcdctl(&self) -> &Path {
        &self.bins.etcdctl
    }

    /// The member's client URL.
    pub(crate) fn endpoint(&self) -> &str {
        &self.server.endpoint
    }

    /// `etcd --version`'s version (`3.4.23`), or `?`.
    pub(crate) fn version(&self) -> &str {
        &self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without etcd on `PATH` the rows are a note, never a failure.
    #[test]
    fn missing_etcd_is_a_note() {
        let note = Binaries::find_in(std::ffi::OsStr::new("/nonexistent")).unwrap_err();
        assert!(note.contains("skipped") && note.contains("etcd"), "{note}");
    }
}
