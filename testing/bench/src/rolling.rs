//! The rolling-deploy rows (`--only rolling`, and with the CLI group;
//! issue 45's goal): three replicas of a service run under `elect run`,
//! each replaced in turn by a newer one started with `--take-over`, which
//! asks the leader to hand the term to it once it runs (ADR 0112).
//!
//! A round on one backend: replicas `v1-0` (leads), `v1-1` and `v1-2`
//! (wait); then for k = 0, 1, 2: `v1-k` stops if it is waiting (SIGTERM
//! to its group: a waiter leaving), and `v2-k` starts with `--take-over`;
//! the leader (`v1-0`, then `v2-0`, then `v2-1`) is asked, its command
//! gets SIGTERM and exits, and the term goes to `v2-k`. Each replica's
//! command is `election-bench helper replica`, which prints `S <ns>` when
//! it starts and `E <ns>` when SIGTERM ends it (`CLOCK_MONOTONIC`). Per
//! handover the *gap* is the new leader's `S` minus the old leader's `E`:
//! negative would be an overlap, which fails the bench; a line from any
//! other replica (a waiting one leading in between) fails it too. At the
//! end `v2-2`, the newest, leads.
//!
//! Beside it, on the same backend in the same run, clean handovers of
//! `elect run` (SIGINT to the leader's group, one waiter: the CLI rows'
//! path): the goal is a gap under 50 ms on the local backends and under
//! two such handovers on the network ones.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::Pid;

use super::cli::{Contender, Field, LEASE_TTL, SETTLE, Stores};
use super::ofd::mono_ns;
use crate::Result;

/// How long any one expected line may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The `election-bench helper replica` child: `S <ns>` at its start, `E
/// <ns>` when SIGTERM (or SIGINT) comes, then exit 0.
pub(crate) fn replica_child() -> Result<()> {
    use std::io::Write;
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set.thread_block()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "S {}", mono_ns())?;
    out.flush()?;
    set.wait()?;
    writeln!(out, "E {}", mono_ns())?;
    out.flush()?;
    Ok(())
}

/// One replica: `elect run --identity ID [--take-over] -- replica`.
struct Replica {
    id: String,
    child: Child,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = signal(&self.child, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn signal(child: &Child, sig: Signal) -> Result<()> {
    killpg(
        Pid::from_raw(i32::try_from(child.id()).map_err(|_| "a pid above pid_t")?),
        sig,
    )
    .map_err(|e| format!("kill -{sig} of a replica's group: {e}"))?;
    Ok(())
}

/// A line of a replica: its identity, `S` or `E`, the stamp.
type Said = (String, char, u64);

/// The replicas of one round on one backend.
struct Deploy<'a> {
    elect: &'a Path,
    exe: &'a Path,
    url: &'a str,
    extra: &'a [String],
    name: String,
    log: PathBuf,
    lines: (Sender<Said>, Receiver<Said>),
}

impl Deploy<'_> {
    fn start(&self, id: &str, take_over: bool) -> Result<Replica> {
        let mut cmd = Command::new(self.elect);
        cmd.args([
            "run",
            "--backend",
            self.url,
            "--name",
            &self.name,
            "--identity",
            id,
        ])
        .args(self.extra);
        if let Some(parent) = crate::cgroups::parent() {
            cmd.env("ELECT_CGROUP_PARENT", parent);
        }
        if take_over {
            cmd.arg("--take-over");
        }
        cmd.arg("--").arg(self.exe).args(["helper", "replica"]);
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("open {}: {e}", self.log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| format!("start elect run: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let tx = self.lines.0.clone();
        let who = id.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let mut f = line.split(' ');
                if let (Some(kind), Some(Ok(stamp))) = (
                    f.next().and_then(|k| k.chars().next()),
                    f.next().map(str::parse::<u64>),
                ) {
                    let _ = tx.send((who.clone(), kind, stamp));
                }
            }
        });
        Ok(Replica {
            id: id.to_owned(),
            child,
        })
    }

    fn next(&self) -> Result<Said> {
        self.lines
            .1
            .recv_timeout(TIMEOUT)
            .map_err(|_| format!("no replica said anything within {TIMEOUT:?}").into())
    }

    /// Waits for `id`'s `kind` line; any other line fails.
    fn expect(&self, id: &str, kind: char) -> Result<u64> {
        let (who, k, at) = self.next()?;
        if who != id || k != kind {
            return Err(format!("{who} said {k} where {id} was to say {kind}").into());
        }
        Ok(at)
    }

    /// One rolling deploy of three replicas: the gaps (ns, the new
    /// leader's start minus the old leader's end) of its three handovers.
    fn round(&self) -> Result<Vec<i64>> {
        let mut old: Vec<Option<Replica>> = Vec::new();
        old.push(Some(self.start("v1-0", false)?));
        self.expect("v1-0", 'S')?;
        old.push(Some(self.start("v1-1", false)?));
        old.push(Some(self.start("v1-2", false)?));
        std::thread::sleep(SETTLE);
        let mut leader = "v1-0".to_owned();
        let mut new: Vec<Replica> = Vec::new();
        let mut gaps = Vec::new();
        for (k, slot) in old.iter_mut().enumerate() {
            // A waiting old replica leaves; the leading one stays until it
            // hands over (it exits by itself then).
            if slot.as_ref().is_some_and(|r| r.id != leader)
                && let Some(mut waiting) = slot.take()
            {
                signal(&waiting.child, Signal::SIGTERM)?;
                waiting.child.wait()?;
            }
            let id = format!("v2-{k}");
            new.push(self.start(&id, true)?);
            let ended = self.expect(&leader, 'E')?;
            let began = self.expect(&id, 'S')?;
            let gap =
                i64::try_from(began).unwrap_or(i64::MAX) - i64::try_from(ended).unwrap_or(i64::MAX);
            if gap < 0 {
                return Err(
                    format!("{id} started {} µs before {leader} ended", -gap / 1000).into(),
                );
            }
            gaps.push(gap);
            leader = id;
            // Let the new leader's replica settle before the next one.
            std::thread::sleep(SETTLE);
        }
        if let Ok((who, k, _)) = self.lines.1.try_recv() {
            return Err(format!("{who} said {k} after the deploy ended").into());
        }
        drop(old);
        drop(new);
        Ok(gaps)
    }
}

/// The rolling-deploy rows: per backend, the gaps of `rounds` rolling
/// deploys beside `elect run`'s clean handover on the same backend.
pub(crate) fn rows(
    s: &super::cli::Setup<'_>,
    rows: &mut Vec<crate::Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let rounds = s.counts.rounds.div_ceil(10).max(3);
    let file_dir = s.dir.join("rolling-file");
    std::fs::create_dir_all(&file_dir)?;
    let stores = Stores::start("rolling", s.log, notes)?;
    let ttl = vec!["--ttl".to_owned(), LEASE_TTL.to_owned()];
    let backends: Vec<(&str, String, Vec<String>)> = vec![
        (
            "file",
            election_url::BackendUrl::file(&file_dir).to_string(),
            Vec::new(),
        ),
        (
            "sqlite",
            crate::sqlite::sqlite_url(&s.dir.join("rolling.db"))?.to_string(),
            ttl.clone(),
        ),
        ("nats", stores.nats.url(), ttl.clone()),
        // A schema of its own: this server comes from the same template as
        // the CLI rows' (same system identifier and database), so without
        // it the two are one store to `elect run`'s cgroups, and this
        // one's epochs, from 2 again, would read as earlier terms of the
        // CLI rows' election (`elect run` refuses to start those).
        (
            "postgres",
            format!("{}?schema=rolling", stores.pg.url()),
            ttl.clone(),
        ),
        (
            "etcd",
            format!("etcd://{}/bench-rolling", stores.etcd_endpoint),
            ttl.clone(),
        ),
    ];
    let child: Vec<OsString> = vec![
        s.exe.as_os_str().to_owned(),
        "helper".into(),
        "print".into(),
    ];
    for (backend, url, extra) in backends {
        let gaps = crate::step(
            &format!("rolling: {rounds} rolling deploys of three replicas, {backend}"),
            || {
                let mut gaps = Vec::new();
                for round in 0..rounds {
                    let deploy = Deploy {
                        elect: s.elect_bin,
                        exe: s.exe,
                        url: &url,
                        extra: &extra,
                        name: format!("rolling-{}-{round}", std::process::id()),
                        log: s.log.to_path_buf(),
                        lines: channel(),
                    };
                    gaps.extend(deploy.round()?);
                }
                Ok(gaps)
            },
        )?;
        let gaps: Vec<u64> = gaps.iter().map(|g| g.unsigned_abs()).collect();
        let handovers = crate::step(
            &format!("rolling: {rounds} clean handovers of elect run, {backend}"),
            || {
                let contender = Contender::Elect {
                    bin: s.elect_bin.to_path_buf(),
                    url: url.clone(),
                    extra: extra.clone(),
                };
                let mut field = Field::new(contender, child.clone(), s.log);
                let mut chain = field.begin_chain(2)?;
                let mut samples = Vec::new();
                for _ in 0..=rounds {
                    samples.push(field.chain_round(&mut chain, Signal::SIGINT)?);
                }
                samples.remove(0);
                Ok(samples)
            },
        )?;
        let ttl = if backend == "file" {
            String::new()
        } else {
            format!(", TTL {LEASE_TTL}")
        };
        rows.push(super::cli::row(
            format!(
                "rolling deploy ({backend}{ttl}): the leader's command ended → its successor's \
                 started, `elect run --take-over`, 3 replicas, no overlap"
            ),
            &gaps,
            "`elect run` clean handover (SIGINT), 2 processes",
            &handovers,
        )?);
    }
    Ok(())
}
