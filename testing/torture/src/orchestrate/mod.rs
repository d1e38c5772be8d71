//! The orchestrator: starts the backend and N candidate processes, injects
//! faults on a seeded schedule, writes `faults.history`, ends the run with
//! every fault healed, and hands the run directory to the checker.
//!
//! In `--elect` mode ([`Plan::elect`]) a candidate is an `elect run`
//! process whose command (`torture-command`) writes through the fence,
//! and the mix has the deployment's faults ([`Mix::elect_faults`]).

mod candidates;
mod faults;
pub mod lease_sets;
pub mod proxy;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use backend_kit::{Faults, Store};

use self::candidates::Candidates;
use self::proxy::{Mode, Proxy};
use crate::history::{FaultEvent, HistoryWriter};
use crate::resource::ResourceSpec;
use crate::rng::Rng;

/// The election every candidate campaigns in (`torture-candidate`'s).
pub const ELECTION: &str = "torture";

/// What a run tortures: a backend of backend-kit's one list (`file`,
/// `sqlite`, `postgres`, `nats`, `nats-cluster`; the candidates get the
/// backend's URL; on one NATS server or etcd member each through a proxy
/// of its own).
pub use backend_kit::Kind as Target;

/// The faults a run may draw on a backend, per mode (a trait because
/// [`Target`] is backend-kit's `Kind`).
pub trait Mix: Copy {
    /// The default mix: the faults that apply to this backend, except a
    /// lost stream tail on a single NATS server (not covered by the
    /// library; `--faults rollback` still injects it).
    fn faults(self) -> Vec<Fault>;

    /// Whether `--elect` mode (candidates are `elect run` processes) runs
    /// on this backend: file and SQLite.
    fn has_elect_mode(self) -> bool;

    /// The default mix of `--elect` mode: every kind that applies to
    /// `elect run` on this backend (empty where the mode does not run).
    fn elect_faults(self) -> Vec<Fault>;

    /// Whether `fault` can be injected in `--elect` mode on this backend:
    /// `kill`, `stop`, `resign` (SIGTERM to `elect`), the supervisor's and
    /// the group's faults, `spellings` and `nested` everywhere it runs;
    /// `fencefiles` where the resource is guarded by a `FileFence` and
    /// `reboot` (the default directory) on the file backend; `fencerows`
    /// and `hardlink` on SQLite.
    fn allows_elect(self, fault: Fault) -> bool;

    /// Whether `fault` can be injected in `--lease-sets` mode (every
    /// backend): members join, leave cleanly, are killed (SIGKILL) or
    /// stopped past the TTL (SIGSTOP).
    fn allows_lease_sets(self, fault: Fault) -> bool;

    /// The default mix of `--lease-sets` mode.
    fn lease_set_faults(self) -> Vec<Fault>;

    /// Whether `fault` can be injected on this backend.
    fn allows(self, fault: Fault) -> bool;
}

/// Every kind of the default mixes, in the order a mix lists them: the
/// schedule draws a fault by its index in the mix, so this order is part
/// of what a seed reproduces.
const MIX_ORDER: [Fault; 25] = {
    use Fault::*;
    [
        Kill,
        Stop,
        Resign,
        Clock,
        Server,
        Blackhole,
        Drop,
        Deafen,
        PgTerminate,
        PgStop,
        Node,
        Meta,
        Cancel,
        Close,
        Unguarded,
        RowDelete,
        FenceDrop,
        Recreate,
        MaxAge,
        Rollback,
        // Last: the mixes of the backends that existed before them (and
        // so their seeds) stay as they were.
        KeyDelete,
        Compact,
        // Issue 45's, after every older kind for the same reason.
        Transfer,
        Revoke,
        Prefer,
    ]
};

/// The mixes, from what the backend has (backend-kit's capabilities of a
/// [`Target`]); no backend is named here.
impl Mix for Target {
    fn faults(self) -> Vec<Fault> {
        // Not `rollback` on one server: a lost stream tail there is
        // documented as not covered (the library warns on a bucket with a
        // single replica); `--faults rollback` shows what it does.
        MIX_ORDER
            .into_iter()
            .filter(|&f| self.allows(f) && (f != Fault::Rollback || self.is_replicated()))
            .collect()
    }

    fn has_elect_mode(self) -> bool {
        self.is_directory() || self.is_database_file()
    }

    fn elect_faults(self) -> Vec<Fault> {
        Fault::ALL
            .into_iter()
            .filter(|&f| self.allows_elect(f))
            .collect()
    }

    fn allows_elect(self, fault: Fault) -> bool {
        use Fault::*;
        self.has_elect_mode()
            && match fault {
                Kill | Stop | Resign | SupKill | SupStop | GroupStop | Spellings | Nested => true,
                FenceFiles | Reboot => self.is_directory(),
                FenceRows | HardLink => self.is_database_file(),
                _ => false,
            }
    }

    fn allows_lease_sets(self, fault: Fault) -> bool {
        use Fault::*;
        match fault {
            Join | Leave | Kill | Stop => true,
            // An operator's revoke of one key (ADR 0111).
            Revoke => self.revokes(),
            _ => false,
        }
    }

    fn lease_set_faults(self) -> Vec<Fault> {
        Fault::ALL
            .into_iter()
            .filter(|&f| self.allows_lease_sets(f))
            .collect()
    }

    fn allows(self, fault: Fault) -> bool {
        use Fault::*;
        match fault {
            // `--elect` mode only.
            SupKill | SupStop | GroupStop | FenceFiles | FenceRows | HardLink | Spellings
            | Nested | Reboot => false,
            // `--lease-sets` mode only.
            Join | Leave => false,
            Kill | Stop | Resign | Cancel | Close | Unguarded => true,
            // Every backend transfers (ADR 0112) and carries preferred
            // candidates' requests.
            Transfer | Prefer => true,
            Revoke => self.revokes(),
            Clock => self.has_wall_clock(),
            RowDelete => self.has_lease_rows(),
            KeyDelete => self.has_election_keys(),
            Compact => self.has_compaction(),
            FenceDrop => self.is_database_file(),
            Server => self.has_server(),
            Blackhole | Drop | Deafen => self.is_proxied(),
            PgTerminate => self.has_sessions(),
            PgStop => self.has_pausable_server(),
            Node | Meta => self.is_replicated(),
            Recreate | MaxAge | Rollback => self.has_buckets(),
        }
    }
}

/// A kind of fault (the history's names: `kill`, `stop`, ...).
pub use crate::history::FaultKind as Fault;

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The backend.
    pub backend: Target,
    /// The schedule's seed.
    pub seed: u64,
    /// How long faults are injected.
    pub duration: Duration,
    /// Candidate processes.
    pub candidates: usize,
    /// Lease TTL (SQLite, NATS).
    pub ttl: Duration,
    /// Renew interval.
    pub renew: Duration,
    /// Failover grace (NATS).
    pub grace: Duration,
    /// Poll interval of waiting candidates.
    pub poll: Duration,
    /// Faults to draw from.
    pub faults: Vec<Fault>,
    /// The run directory (histories, resource, logs).
    pub out: PathBuf,
    /// Candidates ignore losses and write without the fence.
    pub unsafe_mode: bool,
    /// `torture-candidate`.
    pub candidate_bin: PathBuf,
    /// `--elect` mode: candidates are `elect run` processes.
    pub elect: Option<ElectBins>,
    /// `--lease-sets` mode: candidates are balanced lease-set members.
    pub lease_sets: Option<LeaseSets>,
}

/// The settings of `--lease-sets` mode: `candidates` is the most members
/// at once; the run starts with one fewer, so one can join.
#[derive(Clone, Debug)]
pub struct LeaseSets {
    /// How many keys every member offers.
    pub keys: usize,
    /// How often a member rereads the group.
    pub every: Duration,
    /// How often a member writes each key it holds.
    pub write_every: Duration,
    /// `torture-member`.
    pub member_bin: PathBuf,
}

/// The binaries of `--elect` mode.
#[derive(Clone, Debug)]
pub struct ElectBins {
    /// `elect` (crates/elect).
    pub elect: PathBuf,
    /// `torture-command`, the command `elect run` starts.
    pub command: PathBuf,
}

impl Plan {
    /// The names of the faults the run may inject, comma-separated, as the
    /// run's first line prints them.
    pub fn fault_names(&self) -> String {
        self.faults
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Whether the `--elect` candidates keep the election in the file
    /// backend's default directory (no `--backend`): when the mix has
    /// `reboot`, which wipes what a reboot empties around it.
    pub fn uses_default_dir(&self) -> bool {
        self.elect.is_some() && self.backend.is_directory() && self.faults.contains(&Fault::Reboot)
    }

    /// Whether `fault` can be injected in this plan's mode and backend.
    pub fn allows(&self, fault: Fault) -> bool {
        if self.lease_sets.is_some() {
            self.backend.allows_lease_sets(fault)
        } else if self.elect.is_some() {
            self.backend.allows_elect(fault)
        } else {
            self.backend.allows(fault)
        }
    }
}

impl Plan {
    /// How soon after the last fault healed a leader must exist: the
    /// backend's promise plus slack for a loaded machine.
    pub fn liveness_bound(&self) -> Duration {
        // `--elect` mode: an exited `elect` is started again between
        // faults, and then campaigns from its start.
        let slack = Duration::from_secs(if self.elect.is_some() { 10 } else { 5 });
        // `--lease-sets`: a crashed member's keys move once its membership
        // slot is reaped (its lease judged run out: a TTL and more) and
        // the others see it (`every`), then claim.
        let slack = match &self.lease_sets {
            Some(sets) => slack + 2 * self.ttl + sets.every,
            None => slack,
        };
        // The protocol's bound, noticed within a poll; a restarted server's
        // or node's recovery before the TTL is counted.
        let timing = backend_kit::Timing {
            ttl: self.ttl,
            renew: self.renew,
            grace: self.grace,
            poll: self.poll,
        };
        self.backend.takeover_bound(&timing) + self.poll + slack + self.backend.recovery()
    }

    /// The fenced resource the candidates write to: a log file guarded by
    /// a `FileFence`; where the store is a database file, a table of a
    /// database beside it with the same engine's fence (`advance_in`), or,
    /// when the mix has `fdrop` (not in `--elect` mode), a log file
    /// guarded by that engine's `fenced`.
    pub fn resource(&self) -> ResourceSpec {
        if !self.backend.is_database_file() {
            ResourceSpec::File(self.out.join("resource"))
        } else if self.elect.is_none() && self.faults.contains(&Fault::FenceDrop) {
            ResourceSpec::SqliteFenced(self.out.join("resource"))
        } else {
            // `--elect` mode: a table fenced by `advance_in` (its fence
            // rows are what `fencerows` deletes).
            ResourceSpec::Sqlite(self.out.join("resource.db"))
        }
    }

    /// The command that reproduces this run.
    pub fn command(&self) -> String {
        let faults: Vec<&str> = self.faults.iter().map(|f| f.name()).collect();
        format!(
            "cargo xtask torture --backend {} --seed {} --duration {}s --candidates {} --ttl-ms {} --renew-ms {} --grace-ms {} --poll-ms {} --faults {}{}{}",
            self.backend,
            self.seed,
            self.duration.as_secs(),
            self.candidates,
            self.ttl.as_millis(),
            self.renew.as_millis(),
            self.grace.as_millis(),
            self.poll.as_millis(),
            faults.join(","),
            if self.unsafe_mode { " --unsafe" } else { "" },
            if self.elect.is_some() { " --elect" } else { "" }
        ) + &match &self.lease_sets {
            Some(sets) => format!(
                " --lease-sets --keys {} --every-ms {} --write-every-ms {}",
                sets.keys,
                sets.every.as_millis(),
                sets.write_every.as_millis()
            ),
            None => String::new(),
        }
    }
}

/// What went wrong setting a run up or driving it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O failure (spawning, the run directory).
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The backend could not be started, or a fault on it injected or
    /// healed (backend-kit's `Faults`, or a server of its deployment).
    #[error("the backend: {0}")]
    Store(#[from] backend_kit::Error),
    /// A fault on the backend's own state (a lease row, a bucket) could not
    /// be injected or healed.
    #[error("{what}: {reason}")]
    Backend {
        /// What was being done.
        what: String,
        /// Why it failed.
        reason: String,
    },
}

fn backend_error(what: impl Into<String>) -> impl FnOnce(String) -> Error {
    let what = what.into();
    move |reason| Error::Backend { what, reason }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Counts of what a run did, for the summary.
#[derive(Debug, Default)]
pub struct Ran {
    /// Faults injected, by name.
    pub faults: std::collections::BTreeMap<&'static str, usize>,
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// A run under way: what [`setup`] started.
struct Running {
    /// The run directory, absolute.
    out: PathBuf,
    /// `faults.history`.
    history: HistoryWriter,
    /// The backend (its servers, and its faults).
    store: Store,
    /// On one NATS server: a proxy per candidate slot (its `--backend`).
    proxies: Vec<Proxy>,
    /// The candidate processes.
    candidates: Candidates,
}

/// Runs the plan: returns what it injected; the histories and the resource
/// are in `plan.out` for the checker.
pub async fn run(plan: &Plan) -> Result<Ran, Error> {
    let mut running = setup(plan).await?;
    let ran = inject_faults(plan, &mut running).await?;
    end(plan, running).await?;
    Ok(ran)
}

/// Starts the plan's backend ([`Kind::start_in`](backend_kit::Kind::start_in)
/// the run directory) and its candidates.
async fn setup(plan: &Plan) -> Result<Running, Error> {
    std::fs::create_dir_all(&plan.out).map_err(io(format!("create {}", plan.out.display())))?;
    // Absolute: the candidates' backend URLs refuse a relative path.
    let out =
        std::path::absolute(&plan.out).map_err(io(format!("resolve {}", plan.out.display())))?;
    let path = out.join("faults.history");
    let history = HistoryWriter::create(&path).map_err(io(format!("create {}", path.display())))?;

    let ms = |d: Duration| d.as_millis().to_string();
    let mut common: Vec<String> = vec![
        "--ttl-ms".into(),
        ms(plan.ttl),
        "--renew-ms".into(),
        ms(plan.renew),
        "--grace-ms".into(),
        ms(plan.grace),
        "--poll-ms".into(),
        ms(plan.poll),
    ];
    if plan.unsafe_mode {
        common.push("--unsafe".into());
    }
    if plan.backend.lease_sets_apart() {
        // `close`'s lease set must contend with the candidates.
        common.push("--set-of-claims".into());
    }
    let mut extra = vec![Vec::new(); plan.candidates];
    let store = blocking(|| plan.backend.start_in(&out))?;
    let mut proxies = Vec::new();
    if let Some(port) = store.proxied_port() {
        // One server: each candidate through a proxy of its own.
        let upstream = format!("127.0.0.1:{port}")
            .parse()
            .expect("a socket address");
        for slot_args in &mut extra {
            let p = Proxy::start(upstream).await.map_err(io("start a proxy"))?;
            let url = store.url_through(p.port()).expect("a proxied store's URL");
            *slot_args = vec!["--backend".into(), url];
            proxies.push(p);
        }
    } else {
        common.extend(["--backend".into(), store.url()]);
    }
    let resource = match plan.resource() {
        // The run directory's absolute path.
        ResourceSpec::File(_) => ResourceSpec::File(out.join("resource")),
        other => other,
    };
    common.extend(["--resource".into(), resource.to_string()]);
    if plan.elect.is_some() {
        create_host_dirs(&out).map_err(io("create the candidates' host directories"))?;
    }
    let mut candidates = match &plan.elect {
        None => Candidates::new(&plan.candidate_bin, &out, common, extra),
        Some(bins) => Candidates::elect(
            &out,
            plan.candidates,
            elect_launch(plan, &out, bins, &store),
        ),
    };
    for slot in 0..candidates.len() {
        let (writer, pid) = candidates
            .spawn(slot)
            .map_err(io("spawn torture-candidate"))?;
        let _ = history.record(&FaultEvent::Spawn { writer, pid });
    }
    Ok(Running {
        out,
        history,
        store,
        proxies,
        candidates,
    })
}

/// A supervisor's part: a candidate that exited by itself (it refuses to
/// go on, e.g. with a bucket whose settings changed) is started again.
fn restart_exited(candidates: &mut Candidates, log: &impl Fn(FaultEvent)) -> Result<(), Error> {
    for slot in candidates.exited() {
        let (writer, pid) = candidates
            .spawn(slot)
            .map_err(io("restart an exited torture-candidate"))?;
        log(FaultEvent::Spawn { writer, pid });
    }
    Ok(())
}

/// The fault loop: for `plan.duration`, a pause, then a fault drawn from
/// the plan's mix (the schedule's RNG seeded with `plan.seed`), injected
/// and healed.
async fn inject_faults(plan: &Plan, running: &mut Running) -> Result<Ran, Error> {
    let Running {
        out,
        history,
        store,
        proxies,
        candidates,
    } = running;
    let mut injector = Injector {
        plan,
        out,
        history,
        store,
        proxies,
        candidates,
        rng: Rng::new(plan.seed),
        stop_for: plan.ttl + plan.ttl / 2,
        late_writers: 0,
        operator: None,
        priority_rounds: 0,
    };
    let mut ran = Ran::default();
    let started = Instant::now();
    while started.elapsed() < plan.duration {
        let (fault, target, writer) = injector.next_fault().await?;
        *ran.faults.entry(fault.name()).or_default() += 1;
        injector.inject(fault, target, &writer).await?;
    }
    Ok(ran)
}

/// What a line of `faults.history` is written with.
fn logger(history: &HistoryWriter) -> impl Fn(FaultEvent) + '_ {
    move |event| {
        let _ = history.record(&event);
    }
}

/// The fault loop under way: the run's parts, the schedule's RNG, and
/// what the faults keep between them.
struct Injector<'a> {
    plan: &'a Plan,
    /// The run directory, absolute.
    out: &'a std::path::Path,
    /// `faults.history`.
    history: &'a HistoryWriter,
    /// The backend (its servers, and its faults).
    store: &'a mut Store,
    /// The proxies of the candidate slots, where the backend has them.
    proxies: &'a mut [Proxy],
    candidates: &'a mut Candidates,
    /// The schedule, seeded with `plan.seed`: the loop draws from it, then
    /// each fault, always in the same order.
    rng: Rng,
    /// How long a stopped process (or group, or server) stays stopped.
    stop_for: Duration,
    /// The late writers of `fencefiles` and `fencerows` so far.
    late_writers: u32,
    /// `revoke`'s operator: the orchestrator's own backend (opened on
    /// first use, as `elect revoke` opens it) and the resource whose
    /// fence it raises.
    operator: Option<(election_url::Backend, crate::resource::Resource)>,
    /// `prefer`'s rounds so far: each round's priorities are drawn above
    /// every earlier round's, so that a term won in an earlier round (its
    /// priority fixed when it campaigned) is below the waiters again.
    priority_rounds: u64,
}

impl Injector<'_> {
    /// Lets the group settle (a pause while reading what the candidates
    /// say), starts again a candidate that exited, and draws the next
    /// fault and its target (the leader, or a random candidate): the
    /// fault, the target's slot and its writer id.
    async fn next_fault(&mut self) -> Result<(Fault, usize, String), Error> {
        let Injector {
            plan,
            history,
            candidates,
            rng,
            ..
        } = self;
        let pause = Duration::from_millis(rng.range_ms(300, 2000));
        let until = Instant::now() + pause;
        while Instant::now() < until {
            candidates.next(until - Instant::now()).await;
        }
        restart_exited(candidates, &logger(history))?;
        let fault = plan.faults[rng.index(plan.faults.len())];
        let target = candidates
            .leader()
            .unwrap_or_else(|| rng.index(candidates.len()));
        let writer = candidates.writer(target);
        Ok((fault, target, writer))
    }

    /// Injects `fault` on `target` (whose writer id is `writer`) and heals
    /// it. A fault the backend does not have does nothing.
    async fn inject(&mut self, fault: Fault, target: usize, writer: &str) -> Result<(), Error> {
        match fault {
            Fault::Kill => self.kill(fault, target, writer).await?,
            Fault::Stop => self.stop(fault, target, writer).await?,
            Fault::SupKill => self.sup_kill(fault, target, writer).await?,
            Fault::SupStop => self.sup_stop(fault, target, writer).await?,
            Fault::GroupStop => self.group_stop(fault, target, writer).await?,
            Fault::FenceFiles if self.rng.below(2) == 0 && self.candidates.leader().is_some() => {
                self.lock_race(fault, target).await?
            }
            Fault::FenceFiles | Fault::FenceRows => self.fence_state(fault).await?,
            Fault::HardLink => {
                let log = logger(self.history);
                let (store, candidates) = (&*self.store, &mut *self.candidates);
                hard_link(
                    self.plan,
                    store,
                    candidates,
                    &log,
                    &mut self.rng,
                    target,
                    fault,
                )
                .await?;
            }
            Fault::Spellings | Fault::Nested => {
                let log = logger(self.history);
                let (store, candidates) = (&*self.store, &mut *self.candidates);
                other_ways(
                    self.plan, self.out, store, candidates, &log, target, writer, fault,
                )
                .await?;
            }
            Fault::Reboot => {
                let log = logger(self.history);
                reboot(self.out, self.candidates, &log, &mut self.rng, fault).await?;
            }
            Fault::Resign => self.resign(fault, writer).await?,
            Fault::Clock => self.clock(fault).await?,
            Fault::Server => self.server(fault).await?,
            Fault::PgTerminate => self.terminate_sessions(fault, target, writer).await?,
            Fault::PgStop => self.pause_server(fault).await?,
            Fault::Blackhole | Fault::Drop | Fault::Deafen => {
                self.proxy_fault(fault, target, writer).await?
            }
            Fault::Cancel => self.cancel(fault, target, writer).await?,
            Fault::Close => self.close(fault, writer).await?,
            Fault::Unguarded => self.unguarded(fault).await?,
            Fault::RowDelete => self.row_delete(fault).await?,
            Fault::KeyDelete => self.key_delete(fault, writer).await?,
            Fault::Compact => self.compact(fault).await?,
            Fault::Transfer => self.transfer(fault).await?,
            Fault::Revoke => self.revoke(fault, writer).await?,
            Fault::Prefer => self.prefer(fault).await?,
            Fault::FenceDrop => self.fence_drop(fault).await?,
            Fault::Recreate | Fault::MaxAge => self.bucket(fault).await?,
            Fault::Rollback => self.rollback(fault).await?,
            // `--lease-sets` mode's (`lease_sets::run`); never drawn here.
            Fault::Join | Fault::Leave => {}
            Fault::Node | Fault::Meta => self.node(fault).await?,
        }
        Ok(())
    }

    /// `kill`: the target SIGKILLed, started again after a while.
    async fn kill(&mut self, fault: Fault, target: usize, writer: &str) -> Result<(), Error> {
        let Injector {
            history,
            candidates,
            rng,
            ..
        } = self;
        let log = logger(history);
        log(FaultEvent::fault_or_heal(true, fault, writer, ""));
        candidates.kill(target).await;
        log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        tokio::time::sleep(Duration::from_millis(rng.range_ms(50, 1000))).await;
        let (w, pid) = candidates
            .spawn(target)
            .map_err(io("respawn torture-candidate"))?;
        log(FaultEvent::Spawn { writer: w, pid });
        Ok(())
    }

    /// `stop`: the target SIGSTOPped past the TTL, then continued.
    async fn stop(&mut self, fault: Fault, target: usize, writer: &str) -> Result<(), Error> {
        let Injector {
            history,
            candidates,
            stop_for,
            ..
        } = self;
        let log = logger(history);
        log(FaultEvent::fault_or_heal(true, fault, writer, ""));
        candidates.signal(target, Signal::SIGSTOP);
        tokio::time::sleep(*stop_for).await;
        candidates.signal(target, Signal::SIGCONT);
        log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        Ok(())
    }

    /// `supkill` (`--elect` mode): the target's supervisor SIGKILLed.
    async fn sup_kill(&mut self, fault: Fault, target: usize, writer: &str) -> Result<(), Error> {
        let Injector {
            history,
            candidates,
            ..
        } = self;
        let log = logger(history);
        let sup = candidates.supervisor_pid(target);
        log(FaultEvent::fault_or_heal(
            true,
            fault,
            writer,
            format!("supervisor pid {}", sup.unwrap_or(0)),
        ));
        if let Some(sup) = sup {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(sup), Signal::SIGKILL);
        }
        log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        Ok(())
    }

    /// `supstop` (`--elect` mode): the supervisor stopped alone, then a
    /// loss of its `elect`.
    async fn sup_stop(&mut self, fault: Fault, target: usize, writer: &str) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            candidates,
            stop_for,
            ..
        } = self;
        let log = logger(history);
        // The supervisor stopped alone, then a loss: `elect` is
        // stopped past the TTL and woken while the supervisor is
        // still stopped; the supervisor wakes a TTL later.
        let sup = candidates.supervisor_pid(target);
        log(FaultEvent::fault_or_heal(
            true,
            fault,
            writer,
            format!("supervisor pid {}", sup.unwrap_or(0)),
        ));
        let signal_sup = |sig| {
            if let Some(sup) = sup {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(sup), sig);
            }
        };
        signal_sup(Signal::SIGSTOP);
        tokio::time::sleep(Duration::from_millis(50)).await;
        candidates.signal(target, Signal::SIGSTOP);
        tokio::time::sleep(*stop_for).await;
        candidates.signal(target, Signal::SIGCONT);
        let until = Instant::now() + plan.ttl;
        while Instant::now() < until {
            candidates.next(until - Instant::now()).await;
        }
        signal_sup(Signal::SIGCONT);
        log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        Ok(())
    }

    /// `groupstop` (`--elect` mode): `elect`'s process group stopped.
    async fn group_stop(&mut self, fault: Fault, target: usize, writer: &str) -> Result<(), Error> {
        let Injector {
            history,
            candidates,
            stop_for,
            ..
        } = self;
        let log = logger(history);
        // SIGSTOP of elect's process group (Ctrl-Z, a frozen
        // container's processes): what left the group runs on.
        log(FaultEvent::fault_or_heal(true, fault, writer, ""));
        candidates.signal_group(target, Signal::SIGSTOP);
        tokio::time::sleep(*stop_for).await;
        candidates.signal_group(target, Signal::SIGCONT);
        log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        Ok(())
    }

    /// `fencefiles`, half the time with a leader: the fence's lock file
    /// deleted while a late writer holds it.
    async fn lock_race(&mut self, fault: Fault, target: usize) -> Result<(), Error> {
        let Injector {
            plan,
            out,
            history,
            candidates,
            late_writers,
            ..
        } = self;
        let log = logger(history);
        // The lock file deleted while a writer is inside the
        // fence: a late writer with the leader's token takes the
        // lock and holds it; the lock file is deleted; the
        // leader's `elect` is killed, so the next term's command
        // opens a new lock file and writes; then the late writer
        // appends, a term behind.
        let leader = candidates.leader().unwrap_or(target);
        let w = candidates.writer(leader);
        let epoch = candidates.epoch(leader).unwrap_or(0);
        let lock = out
            .join("resource")
            .join(format!("{}.fence.lock", crate::resource::RESOURCE_NAME));
        log(FaultEvent::fault_or_heal(
            true,
            fault,
            &w,
            format!("lock-race term {epoch}"),
        ));
        *late_writers += 1;
        let hold = 2 * plan.ttl + Duration::from_secs(1);
        let mut late =
            late_command(plan, out, *late_writers).map_err(io("start the late writer"))?;
        late.arg("--late-token")
            .arg(epoch.to_string())
            .arg("--hold-ms")
            .arg(hold.as_millis().to_string());
        let late = late.status();
        let waited = async {
            // Inside the fence by then (it waits for the leader's
            // write under way, a few ms).
            tokio::time::sleep(Duration::from_millis(300)).await;
            let removed = std::fs::remove_file(&lock)
                .map_or_else(|e| e.kind().to_string(), |()| "removed".into());
            candidates.kill(leader).await;
            let (nw, pid) = candidates.spawn(leader).map_err(io("respawn elect"))?;
            log(FaultEvent::Spawn { writer: nw, pid });
            Ok::<String, Error>(removed)
        };
        let (late, removed) = tokio::join!(
            tokio::time::timeout(hold + Duration::from_secs(20), late),
            waited
        );
        let late = match late {
            Ok(Ok(s)) => s.to_string().replace(' ', "_"),
            Ok(Err(e)) => format!("error={}", e.to_string().replace(' ', "_")),
            Err(_) => "timed_out".into(),
        };
        let repaired = repair_file_fence(out).await;
        log(FaultEvent::fault_or_heal(
            false,
            fault,
            &w,
            format!("lock={} late-writer={late} {repaired}", removed?),
        ));
        Ok(())
    }

    /// `fencefiles` and `fencerows`: the fence's state deleted while
    /// writers run, then a late writer tries once.
    async fn fence_state(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            plan,
            out,
            history,
            late_writers,
            ..
        } = self;
        let log = logger(history);
        // The fence's state deleted while writers run, as a
        // temporary-file cleaner or an operator might; then a
        // writer whose token is below every term's tries once.
        // Every process of the candidates is stopped meanwhile
        // (a few ms), so that no term's write puts a mark back
        // first.
        let end_file = out.join(candidates::END_FILE).display().to_string();
        let frozen = candidates::processes_naming(&end_file);
        let signal_all = |sig| {
            for &pid in &frozen {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
            }
        };
        signal_all(Signal::SIGSTOP);
        let what = if fault == Fault::FenceFiles {
            // The mark file alone: with the lock file deleted too
            // nothing is left to tell the resource from a new one
            // (documented as not covered).
            // Nor once an earlier lock race left the lock file
            // missing: the mark is then kept.
            let name = crate::resource::RESOURCE_NAME;
            let mark = format!("{name}.fence");
            let dir = out.join("resource");
            log(FaultEvent::fault_or_heal(true, fault, "fence", &mark));
            if !dir.join(format!("{mark}.lock")).exists() {
                format!("{mark}=kept:no-lock-file")
            } else {
                match std::fs::remove_file(dir.join(&mark)) {
                    Ok(()) => format!("{mark}=removed"),
                    Err(e) => format!("{mark}={}", e.kind().to_string().replace(' ', "-")),
                }
            }
        } else {
            log(FaultEvent::fault_or_heal(
                true,
                fault,
                "fence",
                "election_fences",
            ));
            // A stopped writer may hold the database's write lock:
            // then everyone is woken and it is tried again.
            let mut what = String::new();
            for _ in 0..10 {
                what =
                    faults::delete_fence_rows(&out.join("resource.db"), Duration::from_millis(200))
                        .await;
                if !what.contains("locked") {
                    break;
                }
                signal_all(Signal::SIGCONT);
                tokio::time::sleep(Duration::from_millis(50)).await;
                signal_all(Signal::SIGSTOP);
            }
            what
        };
        *late_writers += 1;
        let mut late =
            late_command(plan, out, *late_writers).map_err(io("start the late writer"))?;
        late.arg("--unguarded-once");
        let late = match tokio::time::timeout(Duration::from_secs(5), late.status()).await {
            Ok(Ok(s)) => s.to_string().replace(' ', "_"),
            Ok(Err(e)) => format!("error={}", e.to_string().replace(' ', "_")),
            Err(_) => "timed_out".into(),
        };
        signal_all(Signal::SIGCONT);
        let repaired = if fault == Fault::FenceFiles {
            repair_file_fence(out).await
        } else {
            String::new()
        };
        log(FaultEvent::fault_or_heal(
            false,
            fault,
            "fence",
            format!("{what} late-writer={late} {repaired}"),
        ));
        Ok(())
    }

    /// `resign`: the leader told to resign a few times in a row.
    async fn resign(&mut self, fault: Fault, writer: &str) -> Result<(), Error> {
        let Injector {
            history,
            candidates,
            rng,
            ..
        } = self;
        let log = logger(history);
        log(FaultEvent::fault_or_heal(true, fault, writer, ""));
        for _ in 0..rng.range_ms(3, 8) {
            if let Some(leader) = candidates.leader() {
                candidates.send(leader, "resign").await;
            }
            tokio::time::sleep(Duration::from_millis(rng.range_ms(20, 200))).await;
        }
        log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        Ok(())
    }

    /// `clock`: a random candidate's wall clock shifted by an hour or two.
    async fn clock(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            history,
            candidates,
            rng,
            ..
        } = self;
        let log = logger(history);
        let secs = i64::try_from(rng.range_ms(3600, 7200)).expect("at most 7200")
            * if rng.below(2) == 0 { 1 } else { -1 };
        let slot = rng.index(candidates.len());
        let w = candidates.writer(slot);
        log(FaultEvent::fault_or_heal(
            true,
            fault,
            &w,
            format!("{secs}s"),
        ));
        candidates.send(slot, &format!("clock {secs}")).await;
        log(FaultEvent::fault_or_heal(false, fault, &w, ""));
        Ok(())
    }

    /// `server`: the one server killed, started again after a while.
    async fn server(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            store,
            rng,
            ..
        } = self;
        let log = logger(history);
        if let Some(name) = store.server() {
            log(FaultEvent::fault_or_heal(true, fault, name, ""));
            blocking(|| store.kill_server())?;
            tokio::time::sleep(Duration::from_millis(rng.range_ms(
                200,
                2 * u64::try_from(plan.ttl.as_millis()).unwrap_or(u64::MAX / 2),
            )))
            .await;
            blocking(|| store.restart_server())?;
            log(FaultEvent::fault_or_heal(false, fault, name, ""));
        }
        Ok(())
    }

    /// `pgterm`: the server's sessions of the target ended.
    async fn terminate_sessions(
        &mut self,
        fault: Fault,
        target: usize,
        writer: &str,
    ) -> Result<(), Error> {
        let Injector {
            history,
            store,
            candidates,
            ..
        } = self;
        let log = logger(history);
        if let Some(server_port) = store.session_port() {
            // The holder's sessions (pool and listener alike), found
            // by the local ports of its process's connections to the
            // server; a random candidate's when no one leads.
            let ports = candidates
                .pid(target)
                .map(|pid| (pid, faults::client_ports(pid, server_port)));
            let (pid, ports) = ports.unwrap_or_default();
            let list = ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let ended = blocking(|| store.terminate_sessions(&ports))?;
            let role = if candidates.leads(target) {
                "holder"
            } else {
                "candidate"
            };
            log(FaultEvent::fault_or_heal(
                true,
                fault,
                writer,
                format!("{role} pid {pid}: terminated backends [{ended}] of its ports [{list}]"),
            ));
            log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        }
        Ok(())
    }

    /// `pgstop`: the server paused past the TTL.
    async fn pause_server(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            history,
            store,
            stop_for,
            ..
        } = self;
        let log = logger(history);
        if let Some(name) = store.pausable_server() {
            log(FaultEvent::fault_or_heal(true, fault, name, ""));
            blocking(|| store.pause_server())?;
            tokio::time::sleep(*stop_for).await;
            blocking(|| store.resume_server())?;
            log(FaultEvent::fault_or_heal(false, fault, name, ""));
        }
        Ok(())
    }

    /// `blackhole`, `drop`, `deafen`: the target's proxy stops
    /// forwarding, drops its connections, or forwards one way only.
    async fn proxy_fault(
        &mut self,
        fault: Fault,
        target: usize,
        writer: &str,
    ) -> Result<(), Error> {
        let Injector {
            history,
            proxies,
            stop_for,
            ..
        } = self;
        let log = logger(history);
        if !proxies.is_empty() {
            log(FaultEvent::fault_or_heal(true, fault, writer, ""));
            if fault == Fault::Drop {
                proxies[target].drop_connections();
            } else {
                let mode = if fault == Fault::Blackhole {
                    Mode::Blackhole
                } else {
                    Mode::Deafen
                };
                proxies[target].set(mode);
                tokio::time::sleep(*stop_for).await;
                proxies[target].set(Mode::Pass);
            }
            log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        }
        Ok(())
    }

    /// `cancel`: the leader's `lead()` dropped mid-write.
    async fn cancel(&mut self, fault: Fault, target: usize, writer: &str) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            candidates,
            ..
        } = self;
        let log = logger(history);
        // The leader's `lead()` is dropped mid-write; the heal waits
        // out the write's synchronous section (a quarter TTL).
        log(FaultEvent::fault_or_heal(true, fault, writer, ""));
        candidates.send(target, "cancel").await;
        let until = Instant::now() + plan.ttl;
        while Instant::now() < until {
            candidates.next(until - Instant::now()).await;
        }
        log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        Ok(())
    }

    /// `close`: the leader's lease set closed mid-write.
    async fn close(&mut self, fault: Fault, writer: &str) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            candidates,
            ..
        } = self;
        let log = logger(history);
        // The others are frozen while the leader's lease set takes
        // the key over (else they race it), and woken the moment it
        // says `elected`: the set is then about to close mid-write.
        if let Some(leader) = candidates.leader() {
            log(FaultEvent::fault_or_heal(true, fault, writer, ""));
            let others: Vec<usize> = (0..candidates.len()).filter(|&s| s != leader).collect();
            for &slot in &others {
                candidates.signal(slot, Signal::SIGSTOP);
            }
            candidates.send(leader, "close").await;
            let until = Instant::now() + Duration::from_secs(5);
            let mut resigned = false;
            while Instant::now() < until {
                candidates.next(until - Instant::now()).await;
                let leads = candidates.leads(leader);
                if !leads {
                    resigned = true;
                } else if resigned {
                    break;
                }
            }
            for &slot in &others {
                candidates.signal(slot, Signal::SIGCONT);
            }
            let until = Instant::now() + plan.ttl;
            while Instant::now() < until {
                candidates.next(until - Instant::now()).await;
            }
            log(FaultEvent::fault_or_heal(false, fault, writer, ""));
        }
        Ok(())
    }

    /// `unguarded`: a random candidate writes once without the guard.
    async fn unguarded(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            history,
            candidates,
            rng,
            ..
        } = self;
        let log = logger(history);
        let slot = rng.index(candidates.len());
        let w = candidates.writer(slot);
        log(FaultEvent::fault_or_heal(true, fault, &w, ""));
        candidates.send(slot, "unguarded").await;
        log(FaultEvent::fault_or_heal(false, fault, &w, ""));
        Ok(())
    }

    /// `rowdel`: the election's lease row deleted by hand.
    async fn row_delete(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector { history, store, .. } = self;
        let log = logger(history);
        if store.lease_rows() {
            log(FaultEvent::fault_or_heal(true, fault, "lease-row", ""));
            let record = store.delete_lease_row(ELECTION).await?;
            log(FaultEvent::fault_or_heal(
                false,
                fault,
                "lease-row",
                record.unwrap_or_default(),
            ));
        }
        Ok(())
    }

    /// `keydel`: the election's key deleted by hand (its holder's lease
    /// left running). Healed once deleted: the holder hears by its watch
    /// or its next renewal, a contender may win first.
    async fn key_delete(&mut self, fault: Fault, writer: &str) -> Result<(), Error> {
        let Injector {
            history,
            store,
            candidates,
            ..
        } = self;
        let log = logger(history);
        // The target is the holder believed now (none: a random one).
        let holder = if candidates.leader().is_some() {
            writer
        } else {
            "election-key"
        };
        log(FaultEvent::fault_or_heal(true, fault, holder, ""));
        let what = store.delete_election_key(ELECTION).await?;
        log(FaultEvent::fault_or_heal(
            false,
            fault,
            holder,
            what.unwrap_or_default(),
        ));
        Ok(())
    }

    /// `transfer`: the leader hands its term to another live candidate,
    /// to one SIGKILLed right after it was named (started again, with a
    /// new identity, after a while), or to a ghost nobody is. Healed once
    /// the successor leads, or the window (½–2 TTLs) and a TTL passed.
    async fn transfer(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            candidates,
            rng,
            ..
        } = self;
        let log = logger(history);
        let Some(leader) = candidates.leader() else {
            return Ok(());
        };
        let ttl_ms = u64::try_from(plan.ttl.as_millis()).unwrap_or(u64::MAX / 4);
        let window = Duration::from_millis(rng.range_ms(ttl_ms / 2, 2 * ttl_ms).max(1));
        let others: Vec<usize> = (0..candidates.len()).filter(|&s| s != leader).collect();
        // Half the time a live successor; a quarter each, one that dies
        // and a ghost.
        let pick = rng.below(4);
        let successor = (!others.is_empty() && pick < 3).then(|| others[rng.index(others.len())]);
        let (to, how) = match successor {
            Some(slot) if pick < 2 => (candidates.writer(slot), "live"),
            Some(slot) => (candidates.writer(slot), "dies"),
            None => (format!("ghost-{}", rng.below(1000)), "ghost"),
        };
        // The holder as the candidates say now (the checker reads its
        // history for the term's end).
        let holder = candidates.writer(leader);
        log(FaultEvent::fault_or_heal(
            true,
            fault,
            &holder,
            format!("to {to} {how} window {}ms", window.as_millis()),
        ));
        candidates
            .send(leader, &format!("transfer {to} {}", window.as_millis()))
            .await;
        let sent = Instant::now();
        if how == "dies"
            && let Some(slot) = successor
        {
            candidates.kill(slot).await;
            tokio::time::sleep(Duration::from_millis(rng.range_ms(50, 1000))).await;
            let (w, pid) = candidates
                .spawn(slot)
                .map_err(io("respawn torture-candidate"))?;
            log(FaultEvent::Spawn { writer: w, pid });
        }
        let until = sent + window + plan.ttl;
        while Instant::now() < until {
            if how == "live" && successor.is_some_and(|slot| candidates.leads(slot)) {
                break;
            }
            candidates.next(until - Instant::now()).await;
        }
        let led = candidates
            .leader()
            .map_or_else(|| "none".to_owned(), |l| candidates.writer(l));
        log(FaultEvent::fault_or_heal(
            false,
            fault,
            &holder,
            format!("then-led {led}"),
        ));
        Ok(())
    }

    /// `revoke`: the leader's next write stalls between its `write` line
    /// and the fence; meanwhile the orchestrator revokes the term
    /// (`Election::revoke`, its own backend opened as an operator) and
    /// raises the resource's fence to the revocation's epoch, as `elect
    /// revoke --fence` does; then the write resumes and must be refused.
    /// Healed a TTL later. The heal's detail names the deposed term and
    /// the revocation's epoch (`deposed <id> <epoch> revocation <epoch>`),
    /// which the checker holds every later term above.
    async fn revoke(&mut self, fault: Fault, writer: &str) -> Result<(), Error> {
        if self.candidates.leader().is_none() {
            return Ok(());
        }
        if self.operator.is_none() {
            self.operator = Some(open_operator(self.plan, self.store).await?);
        }
        let Injector {
            plan,
            history,
            candidates,
            operator: Some((backend, resource)),
            ..
        } = self
        else {
            return Ok(());
        };
        let log = logger(history);
        let Some(leader) = candidates.leader() else {
            return Ok(());
        };
        log(FaultEvent::fault_or_heal(true, fault, writer, ""));
        // The write begins within a write interval (20 ms) and waits 1 s
        // before the fence; the revoke and the fence's advance take a few
        // milliseconds.
        candidates.send(leader, "stall 1000").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let detail = revoke_fenced(plan, backend, ELECTION, Some(resource)).await;
        let until = Instant::now() + plan.ttl;
        while Instant::now() < until {
            candidates.next(until - Instant::now()).await;
        }
        log(FaultEvent::fault_or_heal(false, fault, writer, detail));
        Ok(())
    }

    /// `prefer`: priorities flapping: 2–4 rounds of a TTL and a half, each
    /// giving every candidate a random priority (4n+1 to 4n+4 in the run's
    /// n-th round: the order among candidates flaps, and a term won in an
    /// earlier round is below every waiter); a waiting candidate above 0
    /// asks the holder (`Election::prefer`), a holder of a lower priority
    /// yields to it. Healed with every priority back at 0; the heal's
    /// detail lists who led after each round.
    async fn prefer(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            candidates,
            rng,
            priority_rounds,
            ..
        } = self;
        let log = logger(history);
        let rounds: Vec<Vec<u64>> = (0..rng.range_ms(2, 4))
            .map(|_| {
                let base = 4 * *priority_rounds;
                *priority_rounds += 1;
                (0..candidates.len())
                    .map(|_| base + 1 + rng.below(4))
                    .collect()
            })
            .collect();
        let shown = rounds
            .iter()
            .map(|r| r.iter().map(u64::to_string).collect::<Vec<_>>().join(","))
            .collect::<Vec<_>>()
            .join(";");
        log(FaultEvent::fault_or_heal(true, fault, "priorities", &shown));
        let mut led = Vec::new();
        for priorities in &rounds {
            for (slot, p) in priorities.iter().enumerate() {
                candidates.send(slot, &format!("priority {p}")).await;
            }
            let until = Instant::now() + plan.ttl + plan.ttl / 2;
            while Instant::now() < until {
                candidates.next(until - Instant::now()).await;
            }
            led.push(
                candidates
                    .leader()
                    .map_or_else(|| "none".to_owned(), |l| candidates.writer(l)),
            );
        }
        for slot in 0..candidates.len() {
            candidates.send(slot, "priority 0").await;
        }
        log(FaultEvent::fault_or_heal(
            false,
            fault,
            "priorities",
            format!("led {}", led.join(",")),
        ));
        Ok(())
    }

    /// `compact`: the store's history compacted up to its revision now.
    async fn compact(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector { history, store, .. } = self;
        let log = logger(history);
        log(FaultEvent::fault_or_heal(true, fault, "history", ""));
        let what = store.compact().await?;
        log(FaultEvent::fault_or_heal(
            false,
            fault,
            "history",
            what.unwrap_or_default(),
        ));
        Ok(())
    }

    /// `fdrop`: the leader frozen mid-write while the others drop their
    /// writes' futures.
    async fn fence_drop(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            candidates,
            stop_for,
            ..
        } = self;
        let log = logger(history);
        // Deterministic: the leader freezes in the middle of a
        // write; every other candidate drops each write's future
        // right after the write ran, for 3 TTLs; the leader wakes
        // after the next term has written. The mark must have
        // been durable before those writes ran.
        if let Some(leader) = candidates.leader() {
            let w = candidates.writer(leader);
            log(FaultEvent::fault_or_heal(true, fault, &w, ""));
            let drop_ms = 3 * plan.ttl.as_millis();
            let dropping_until = Instant::now() + 3 * plan.ttl;
            for slot in (0..candidates.len()).filter(|&s| s != leader) {
                candidates.send(slot, &format!("fdrop {drop_ms}")).await;
            }
            candidates.send(leader, "stall").await;
            tokio::time::sleep(Duration::from_millis(150)).await;
            candidates.signal(leader, Signal::SIGSTOP);
            tokio::time::sleep(*stop_for).await;
            candidates.signal(leader, Signal::SIGCONT);
            // Healed once no candidate drops its writes any more.
            while Instant::now() < dropping_until {
                candidates.next(dropping_until - Instant::now()).await;
            }
            log(FaultEvent::fault_or_heal(false, fault, &w, ""));
        }
        Ok(())
    }

    /// `recreate` and `maxage`: the bucket deleted and made again, or its
    /// max age shortened for two TTLs.
    async fn bucket(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            store,
            ..
        } = self;
        let log = logger(history);
        let urls = store.nats_urls().unwrap_or_default();
        if !urls.is_empty() {
            log(FaultEvent::fault_or_heal(true, fault, "bucket", ""));
            if fault == Fault::Recreate {
                faults::recreate_bucket(&urls)
                    .await
                    .map_err(backend_error("recreate the bucket"))?;
            } else {
                let config = faults::set_max_age(&urls, plan.ttl / 5)
                    .await
                    .map_err(backend_error("shorten the bucket's max age"))?;
                tokio::time::sleep(2 * plan.ttl).await;
                faults::restore_config(&urls, config)
                    .await
                    .map_err(backend_error("restore the bucket's max age"))?;
            }
            log(FaultEvent::fault_or_heal(false, fault, "bucket", ""));
        }
        Ok(())
    }

    /// `rollback`: a server's store rolled back to a copy taken a moment
    /// before.
    async fn rollback(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            out,
            history,
            store,
            candidates,
            rng,
            ..
        } = self;
        let log = logger(history);
        let node = rng.index(3);
        if let Some(server) = store.nats_node_mut(node) {
            let name = server.name().to_owned();
            log(FaultEvent::fault_or_heal(true, fault, &name, ""));
            let copy = out.join(format!("store-copy-{}", rng.below(u64::MAX)));
            let store = server.store_dir();
            blocking(|| faults::copy_dir(&store, &copy)).map_err(io("copy the NATS store"))?;
            // A new term in the window about to be lost.
            if let Some(leader) = candidates.leader() {
                candidates.send(leader, "resign").await;
            }
            let until = Instant::now() + Duration::from_millis(rng.range_ms(1000, 3000));
            while Instant::now() < until {
                candidates.next(until - Instant::now()).await;
            }
            blocking(|| server.kill()).map_err(backend_kit::Error::from)?;
            blocking(|| faults::replace_dir(&copy, &store))
                .map_err(io("restore the NATS store"))?;
            blocking(|| server.restart()).map_err(backend_kit::Error::from)?;
            let _ = std::fs::remove_dir_all(&copy);
            log(FaultEvent::fault_or_heal(false, fault, &name, ""));
        }
        Ok(())
    }

    /// `node` and `meta`: a node of the cluster (the meta leader for
    /// `meta`) killed, started again after a while.
    async fn node(&mut self, fault: Fault) -> Result<(), Error> {
        let Injector {
            plan,
            history,
            store,
            rng,
            ..
        } = self;
        let log = logger(history);
        if store.nodes() > 0 {
            let node = if fault == Fault::Meta {
                blocking(|| store.meta_leader())?
            } else {
                rng.index(3)
            };
            let name = store.node_name(node).unwrap_or_default();
            log(FaultEvent::fault_or_heal(true, fault, &name, ""));
            blocking(|| store.kill_node(node))?;
            tokio::time::sleep(Duration::from_millis(rng.range_ms(
                200,
                2 * u64::try_from(plan.ttl.as_millis()).unwrap_or(u64::MAX / 2),
            )))
            .await;
            blocking(|| store.restart_node(node))?;
            log(FaultEvent::fault_or_heal(false, fault, &name, ""));
        }
        Ok(())
    }
}

/// `revoke`'s operator: the store's backend opened as `elect revoke` opens
/// it (an operator: nothing created) with the run's lease settings, and
/// the run's resource, whose fence it raises.
async fn open_operator(
    plan: &Plan,
    store: &Store,
) -> Result<(election_url::Backend, crate::resource::Resource), Error> {
    let backend = open_operator_backend(plan, store).await?;
    let resource = crate::resource::Resource::open(&plan.resource(), crate::resource::Mode::Safe)
        .await
        .map_err(|e| Error::Backend {
            what: "open the resource".into(),
            reason: e.to_string(),
        })?;
    Ok((backend, resource))
}

/// An operator's revoke of `name` on `backend` (opened as an operator),
/// and `resource`'s fence raised to the revocation's epoch, as `elect
/// revoke --fence` does; the heal line's detail: `deposed <identity>
/// <epoch> revocation <epoch> fence <a>-><b>`, `nobody`, or why it
/// failed. The operator tries again while the store answers that nothing
/// was done (a server slow under load), for up to a TTL; a revoke whose
/// outcome is unknown is not tried again (it may have deposed the term: a
/// second one could depose its successor) and raises no fence.
async fn revoke_fenced(
    plan: &Plan,
    backend: &election_url::Backend,
    name: &str,
    resource: Option<&crate::resource::Resource>,
) -> String {
    let by = election_core::Identity::new("torture-operator").expect("a valid identity");
    let given_up = Instant::now() + plan.ttl;
    let revoked = loop {
        match election_core::Election::revoke(backend, name, &by).await {
            Err(election_core::Error::Unavailable { .. }) if Instant::now() < given_up => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => break other,
        }
    };
    let failed = |e: &dyn std::fmt::Display| e.to_string().replace(' ', "_");
    match revoked {
        Err(e) => format!("revoke-failed {}", failed(&e)),
        Ok(None) => "nobody".to_owned(),
        Ok(Some(r)) => {
            let epoch = r.revocation.epoch;
            let fence = match resource {
                Some(resource) => match resource.advance(fencing::Token::from_epoch(epoch)).await {
                    Ok(previous) => format!("fence {}->{}", previous, epoch.get()),
                    Err(e) => format!("fence-failed {}", failed(&e)),
                },
                None => "fence-failed no_resource".to_owned(),
            };
            format!(
                "deposed {} {} revocation {} {fence}",
                r.deposed.identity,
                r.deposed.epoch.get(),
                epoch.get()
            )
        }
    }
}

/// The run's backend opened as an operator (`elect revoke`'s way: nothing
/// created, the store written to).
async fn open_operator_backend(plan: &Plan, store: &Store) -> Result<election_url::Backend, Error> {
    let url: election_url::BackendUrl = store.url().parse().map_err(|e| Error::Backend {
        what: "parse the store's URL".into(),
        reason: format!("{e}"),
    })?;
    let (settings, _) = candidate_testkit::open::usable_settings(
        &url,
        election_url::Settings {
            ttl: Some(plan.ttl),
            renew: Some(plan.renew),
            grace: Some(plan.grace),
            operator: true,
            ..election_url::Settings::default()
        },
    );
    url.open(&settings).await.map_err(|e| Error::Backend {
        what: "open the store as an operator".into(),
        reason: e.to_string(),
    })
}

/// The end, once everything is healed: gives the group the promised time
/// to have a leader (and a few writes), then ends it and the backend.
async fn end(plan: &Plan, running: Running) -> Result<(), Error> {
    let Running {
        history,
        store,
        mut candidates,
        ..
    } = running;
    let log = |event: FaultEvent| {
        let _ = history.record(&event);
    };
    log(FaultEvent::End);
    restart_exited(&mut candidates, &log)?;
    let bound = plan.liveness_bound();
    let until = Instant::now() + bound.min(Duration::from_secs(2) + plan.ttl);
    while Instant::now() < until {
        candidates.next(until - Instant::now()).await;
        if candidates.has_live_leader() && Instant::now() + Duration::from_millis(500) >= until {
            break;
        }
    }
    let deadline = Instant::now() + bound;
    while !candidates.has_live_leader() && Instant::now() < deadline {
        candidates
            .next((deadline - Instant::now()).min(Duration::from_millis(500)))
            .await;
        restart_exited(&mut candidates, &log)?;
    }
    candidates.stop_all(Duration::from_secs(10)).await;
    drop(store);
    Ok(())
}

/// `hardlink` (`--elect` mode, a store that is a database file): a second
/// name for the election's database.
#[allow(clippy::too_many_arguments)]
async fn hard_link(
    plan: &Plan,
    store: &Store,
    candidates: &mut Candidates,
    log: &impl Fn(FaultEvent),
    rng: &mut Rng,
    target: usize,
    fault: Fault,
) -> Result<(), Error> {
    // A second name for the election's database: a candidate
    // (not the leader) started again on it for 3 TTLs.
    let Some(db) = store.local_path() else {
        return Ok(());
    };
    let link = db.with_file_name("election-second-name.db");
    let slot = (target + 1 + rng.index(candidates.len() - 1)) % candidates.len();
    let w = candidates.writer(slot);
    let linked = std::fs::hard_link(db, &link);
    log(FaultEvent::fault_or_heal(
        true,
        fault,
        &w,
        match &linked {
            Ok(()) => format!("{} -> {}", link.display(), db.display()),
            Err(e) => format!("link failed: {e}"),
        },
    ));
    if linked.is_ok() {
        candidates.kill(slot).await;
        candidates.set_launch(
            slot,
            candidates::SlotLaunch {
                reach: Some(candidates::Reach {
                    url: store.kind().url_at(&link).unwrap_or_default(),
                    wrapper: Vec::new(),
                }),
                ..Default::default()
            },
        );
        let (nw, pid) = candidates.spawn(slot).map_err(io("respawn elect"))?;
        log(FaultEvent::Spawn { writer: nw, pid });
        let until = Instant::now() + 3 * plan.ttl;
        while Instant::now() < until {
            candidates.next(until - Instant::now()).await;
        }
        candidates.kill(slot).await;
        candidates.set_launch(slot, candidates::SlotLaunch::default());
        for suffix in ["", "-wal", "-shm"] {
            let mut name = link.clone().into_os_string();
            name.push(suffix);
            let _ = std::fs::remove_file(name);
        }
        let (nw, pid) = candidates.spawn(slot).map_err(io("respawn elect"))?;
        log(FaultEvent::Spawn { writer: nw, pid });
    }
    log(FaultEvent::fault_or_heal(false, fault, &w, ""));
    Ok(())
}

/// `spellings` and `nested` (`--elect` mode): the others reach the
/// election another way.
#[allow(clippy::too_many_arguments)]
async fn other_ways(
    plan: &Plan,
    out: &std::path::Path,
    store: &Store,
    candidates: &mut Candidates,
    log: &impl Fn(FaultEvent),
    target: usize,
    writer: &str,
    fault: Fault,
) -> Result<(), Error> {
    // The others started again another way (a second path to
    // the election; an inner `elect run`), their commands
    // escaping; the leader's group SIGKILLed, so that one of
    // them takes over; then it is started again as usual and
    // every other group is SIGKILLed: it takes over from a
    // term whose escaped worker runs on, reached the other
    // way (or nested), and must end it before its command
    // starts.
    let other_way = if fault == Fault::Spellings {
        candidates::SlotLaunch {
            reach: Some(second_spelling(plan, out, store).map_err(io("make the mount point"))?),
            nested: false,
            escape: true,
        }
    } else {
        candidates::SlotLaunch {
            reach: None,
            nested: true,
            escape: true,
        }
    };
    let first = target;
    log(FaultEvent::fault_or_heal(
        true,
        fault,
        writer,
        match &other_way.reach {
            Some(reach) => format!("others-via {}", reach.url),
            None => format!("others-nested {ELECTION}-inner-c<slot>"),
        },
    ));
    let others: Vec<usize> = (0..candidates.len()).filter(|&s| s != first).collect();
    for &slot in &others {
        candidates.kill_group(slot).await;
        candidates.set_launch(slot, other_way.clone());
        let (w, pid) = candidates.spawn(slot).map_err(io("respawn elect"))?;
        log(FaultEvent::Spawn { writer: w, pid });
    }
    let bound = plan.liveness_bound();
    candidates.kill_group(first).await;
    let second = wait_for_leader(candidates, bound, |l| l != first).await;
    let (w, pid) = candidates.spawn(first).map_err(io("respawn elect"))?;
    log(FaultEvent::Spawn { writer: w, pid });
    for &slot in &others {
        candidates.kill_group(slot).await;
    }
    let third = wait_for_leader(candidates, bound, |l| l == first).await;
    // A few of the new term's writes, beside anything left.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        candidates.next(until - Instant::now()).await;
    }
    for &slot in &others {
        candidates.set_launch(slot, candidates::SlotLaunch::default());
        let (w, pid) = candidates.spawn(slot).map_err(io("respawn elect"))?;
        log(FaultEvent::Spawn { writer: w, pid });
    }
    let who = |l: Option<usize>| l.map_or_else(|| "none".to_owned(), |l| format!("c{l}"));
    log(FaultEvent::fault_or_heal(
        false,
        fault,
        writer,
        format!("then-led {} then {}", who(second), who(third)),
    ));
    Ok(())
}

/// `reboot` (`--elect` mode, file): every process of the candidates
/// ended, what a reboot empties wiped.
async fn reboot(
    out: &std::path::Path,
    candidates: &mut Candidates,
    log: &impl Fn(FaultEvent),
    rng: &mut Rng,
    fault: Fault,
) -> Result<(), Error> {
    // Every process of the candidates ended at once, what a
    // reboot empties wiped, everyone started again.
    log(FaultEvent::fault_or_heal(true, fault, "host", ""));
    for slot in 0..candidates.len() {
        candidates.kill_group(slot).await;
    }
    kill_every_candidate_process(out).await;
    let dirs = host_dirs(out);
    let wiped = [&dirs.runtime, &dirs.tmp]
        .map(|d| match empty_dir(d) {
            Ok(n) => format!("{}:{n}", d.file_name().unwrap_or_default().display()),
            Err(e) => format!("{}:{e}", d.display()).replace(' ', "_"),
        })
        .join(",");
    tokio::time::sleep(Duration::from_millis(rng.range_ms(50, 500))).await;
    for slot in 0..candidates.len() {
        let (w, pid) = candidates.spawn(slot).map_err(io("respawn elect"))?;
        log(FaultEvent::Spawn { writer: w, pid });
    }
    log(FaultEvent::fault_or_heal(
        false,
        fault,
        "host",
        format!("wiped {wiped}"),
    ));
    Ok(())
}

/// How `--elect` mode starts its candidates: `elect run` on the plan's
/// backend (the `store` started in the run directory) with its TTL and
/// renew interval where claims expire, else a kill grace; with the
/// `reboot` fault in the mix, on the file backend's default directory (no
/// `--backend`; [`host_dirs`] in the run directory).
fn elect_launch(
    plan: &Plan,
    out: &std::path::Path,
    bins: &ElectBins,
    store: &Store,
) -> candidates::ElectLaunch {
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    let backend = (!plan.uses_default_dir()).then(|| store.url());
    let timing = if plan.backend.expires() {
        vec![
            "--ttl".to_owned(),
            ms(plan.ttl),
            "--renew".to_owned(),
            ms(plan.renew),
        ]
    } else {
        // The file backend's default kill grace (10 s) would make every
        // handover after a command that ignores SIGTERM wait 10 s.
        vec!["--kill-grace".to_owned(), "500ms".to_owned()]
    };
    let dirs = host_dirs(out);
    candidates::ElectLaunch {
        elect_bin: bins.elect.clone(),
        command_bin: bins.command.clone(),
        backend,
        timing,
        env: vec![
            ("XDG_STATE_HOME".to_owned(), dirs.state),
            ("XDG_RUNTIME_DIR".to_owned(), dirs.runtime),
            ("TMPDIR".to_owned(), dirs.tmp),
        ],
        resource: plan.resource().to_string(),
        launch_of: vec![candidates::SlotLaunch::default(); plan.candidates],
        rng: Rng::new(plan.seed ^ 0x65_6c65_6374),
    }
}

/// The host directories of `--elect` mode's candidates, in the run
/// directory: what `elect run` is given as `XDG_STATE_HOME` (on a disk: it
/// outlives a reboot), `XDG_RUNTIME_DIR` and `TMPDIR` (what a reboot
/// empties, and the `reboot` fault wipes).
struct HostDirs {
    state: PathBuf,
    runtime: PathBuf,
    tmp: PathBuf,
}

fn host_dirs(out: &std::path::Path) -> HostDirs {
    HostDirs {
        state: out.join("host-state"),
        runtime: out.join("host-runtime"),
        tmp: out.join("host-tmp"),
    }
}

/// Creates [`host_dirs`] (the runtime directory with mode 0700, as
/// `XDG_RUNTIME_DIR` must be).
fn create_host_dirs(out: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let dirs = host_dirs(out);
    for dir in [&dirs.state, &dirs.runtime, &dirs.tmp] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    Ok(())
}

/// The directory that keeps the election in `--elect` mode: the file
/// backend's default directory (`XDG_STATE_HOME/elect`) when the
/// candidates use it, else the store's [`local_dir`](Store::local_dir)
/// (the file backend's directory, the database's).
fn election_dir(plan: &Plan, out: &std::path::Path, store: &Store) -> PathBuf {
    if plan.uses_default_dir() {
        host_dirs(out).state.join("elect")
    } else {
        store.local_dir().unwrap_or(out).to_path_buf()
    }
}

/// The `spellings` fault's second way to the election: its directory
/// ([`election_dir`]) bind-mounted on `<run>/second-spelling` in the
/// candidate's own mount namespace, and the backend URL through it.
fn second_spelling(
    plan: &Plan,
    out: &std::path::Path,
    store: &Store,
) -> std::io::Result<candidates::Reach> {
    let at = out.join("second-spelling");
    std::fs::create_dir_all(&at)?;
    let url = store
        .url_in(&at)
        .ok_or_else(|| std::io::Error::other("the store has no files on this host"))?;
    Ok(candidates::Reach::bind_mounted(
        url,
        &election_dir(plan, out, store),
        &at,
    ))
}

/// Waits (reading what the candidates say) until a slot that `pred`
/// accepts leads, at most `bound`; returns it.
async fn wait_for_leader(
    candidates: &mut Candidates,
    bound: Duration,
    pred: impl Fn(usize) -> bool,
) -> Option<usize> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(l) = candidates.leader().filter(|&l| pred(l)) {
            return Some(l);
        }
        if Instant::now() >= deadline {
            return None;
        }
        candidates.next(deadline - Instant::now()).await;
    }
}

/// SIGKILLs every process of the run's candidates (`--elect` mode: every
/// process whose command line names the run's end file, what escaped its
/// group too), as a host's reboot ends them; waits until they are gone
/// (at most 10 s).
async fn kill_every_candidate_process(out: &std::path::Path) {
    let end_file = out.join(candidates::END_FILE).display().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = candidates::processes_naming(&end_file);
        if left.is_empty() || Instant::now() >= deadline {
            return;
        }
        for pid in left {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Empties the directory `dir` (keeps it).
fn empty_dir(dir: &std::path::Path) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
        removed += 1;
    }
    Ok(removed)
}

/// The heal of `fencefiles`, an operator's repair: every candidate
/// process stopped, `FileFence::repair` with the highest token in the log,
/// the processes continued (woken and stopped again while a writer holds
/// the fence's lock).
async fn repair_file_fence(out: &std::path::Path) -> String {
    let end_file = out.join(candidates::END_FILE).display().to_string();
    let dir = out.join("resource");
    let mut what = String::new();
    for _ in 0..20 {
        let frozen = candidates::processes_naming(&end_file);
        let signal_all = |sig| {
            for &pid in &frozen {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
            }
        };
        signal_all(Signal::SIGSTOP);
        what = blocking(|| faults::repair_file_fence(&dir));
        signal_all(Signal::SIGCONT);
        if what != "busy" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    what
}

/// `torture-command` as the late writer `u<n>` of the `fencefiles` and
/// `fencerows` faults, on the plan's resource; the caller adds what it
/// writes (`--unguarded-once`, or `--late-token` and `--hold-ms`).
fn late_command(
    plan: &Plan,
    out: &std::path::Path,
    n: u32,
) -> std::io::Result<tokio::process::Command> {
    let bin = plan
        .elect
        .as_ref()
        .map(|b| b.command.clone())
        .ok_or_else(|| std::io::Error::other("a late writer needs --elect"))?;
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("--writer")
        .arg(format!("u{n}"))
        .arg("--history-dir")
        .arg(out)
        .arg("--resource")
        .arg(plan.resource().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(out.join("candidates.stderr"))?,
        ))
        .kill_on_drop(true);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every default mix is allowed on its backend, and every fault kind
    /// is in the default mix of every backend that allows it.
    #[test]
    fn default_mixes_hold_every_kind_that_applies() {
        for backend in Target::ALL {
            let mix = backend.faults();
            for kind in Fault::ALL {
                // The one exception: a single server's lost tail is not
                // covered by the library (it warns), so not in the mix.
                let default =
                    backend.allows(kind) && (kind != Fault::Rollback || backend.is_replicated());
                assert_eq!(mix.contains(&kind), default, "{kind} on {backend}");
            }
            // In the one order a seed's schedule draws from.
            let order: Vec<Fault> = MIX_ORDER.into_iter().filter(|f| mix.contains(f)).collect();
            assert_eq!(mix, order, "{backend}");
        }
        for kind in Fault::ALL {
            assert!(
                Target::ALL
                    .iter()
                    .any(|b| b.allows(kind) || b.allows_elect(kind) || b.allows_lease_sets(kind)),
                "{kind}"
            );
            assert_eq!(
                MIX_ORDER.contains(&kind),
                Target::ALL.iter().any(|b| b.allows(kind)),
                "{kind}"
            );
        }
    }

    /// `--elect` mode runs where the store is files on this host (a
    /// directory, a database file); its mixes hold the deployment's kinds
    /// and none of the library's own.
    #[test]
    fn elect_mixes_hold_the_deployment_s_kinds() {
        use Fault::*;
        for backend in Target::ALL {
            let want = if backend.is_database_file() {
                vec![
                    Kill, Stop, Resign, SupKill, SupStop, GroupStop, FenceRows, HardLink,
                    Spellings, Nested,
                ]
            } else if backend.is_directory() {
                vec![
                    Kill, Stop, Resign, SupKill, SupStop, GroupStop, FenceFiles, Spellings, Nested,
                    Reboot,
                ]
            } else {
                Vec::new()
            };
            assert_eq!(backend.elect_faults(), want, "{backend}");
        }
        assert!(Target::ALL.iter().any(|b| b.is_database_file()));
        assert!(Target::ALL.iter().any(|b| b.is_directory()));
        for kind in [
            SupKill, SupStop, GroupStop, FenceFiles, FenceRows, HardLink, Spellings, Nested, Reboot,
        ] {
            assert!(Target::ALL.iter().all(|b| !b.allows(kind)), "{kind}");
        }
    }

    /// `--lease-sets` mode: members join, leave, are killed and stopped,
    /// and an operator revokes keys, on every backend (every backend
    /// revokes a set's keys, ADR 0111); join and leave are no other mode's.
    #[test]
    fn lease_set_mixes_hold_join_leave_kill_stop_revoke() {
        use Fault::*;
        for backend in Target::ALL {
            let mix = backend.lease_set_faults();
            assert!(mix.contains(&Revoke), "{backend}: {mix:?}");
            mix.iter()
                .filter(|&&f| f != Revoke)
                .for_each(|f| assert!([Kill, Stop, Join, Leave].contains(f), "{backend}: {f}"));
            assert_eq!(mix.len(), 5, "{backend}: {mix:?}");
            assert!(!backend.allows(Join) && !backend.allows(Leave), "{backend}");
            assert!(!backend.allows_elect(Join) && !backend.allows_elect(Leave));
        }
    }

    /// The liveness bound is the protocol's takeover bound, a poll, the
    /// slack and the deployment's recovery: never below the takeover.
    #[test]
    fn liveness_bounds_cover_the_takeover() {
        let ms = Duration::from_millis;
        for backend in Target::ALL {
            let plan = Plan {
                backend,
                seed: 1,
                duration: ms(1000),
                candidates: 3,
                ttl: ms(3000),
                renew: ms(1000),
                grace: ms(1000),
                poll: ms(200),
                faults: backend.faults(),
                out: "/tmp/run".into(),
                unsafe_mode: false,
                candidate_bin: "torture-candidate".into(),
                elect: None,
                lease_sets: None,
            };
            let timing = backend_kit::Timing {
                ttl: plan.ttl,
                renew: plan.renew,
                grace: plan.grace,
                poll: plan.poll,
            };
            assert!(
                plan.liveness_bound() >= backend.takeover_bound(&timing) + Duration::from_secs(5),
                "{backend}"
            );
        }
    }
}
