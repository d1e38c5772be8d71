//! `--lease-sets` mode: balanced lease-set members (`torture-member`)
//! join, leave cleanly, are killed (SIGKILL) and stopped past the TTL
//! (SIGSTOP) while every key they hold is written through its own fence.
//!
//! The run directory holds `faults.history` and, per key `k`,
//! `keys/<k>/candidate-<writer>.history` (one per member incarnation) and
//! `keys/<k>/resource` (a `FileLog` fenced by its own `FileFence`): each
//! key is one election with its own histories and resource, checked by
//! the single-election checker ([`crate::check::check_keys`]).
//!
//! A member's writer id is `m<slot>.<incarnation>`, its identity in the
//! group the same. The run starts `candidates - 1` members; a `join`
//! starts one in a free slot (when every slot is taken it is a `leave`
//! instead); `leave`, `kill` and `stop` (SIGSTOP for three TTLs and more:
//! long enough for the others to take its keys) pick a live member at random and
//! keep at least two alive (else they are a `join`); `revoke` has an
//! operator revoke a random key and raise its fence to the revocation's
//! epoch (`revoke_key`). After the last fault, the members are given
//! the liveness bound to settle, then each leaves cleanly.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

use super::{Error, Fault, LeaseSets, Plan, Ran, Target, blocking, io};
use crate::history::{FaultEvent, HistoryWriter};
use crate::rng::Rng;

/// The directory of every key's histories and resource.
pub const KEYS_DIR: &str = "keys";

/// The names of the run's keys (`key-0000`, ...), as the members name them.
pub fn key_names(keys: usize) -> Vec<String> {
    (0..keys)
        .map(candidate_testkit::lease_set::key_name)
        .collect()
}

/// One member process.
struct Member {
    writer: String,
    child: Child,
}

/// The members: one slot each, `None` while free.
struct Members {
    bin: PathBuf,
    common: Vec<String>,
    out: PathBuf,
    slots: Vec<Option<Member>>,
    incarnations: Vec<u32>,
}

impl Members {
    fn spawn(&mut self, slot: usize) -> Result<(String, u32), Error> {
        self.incarnations[slot] += 1;
        let writer = format!("m{slot}.{}", self.incarnations[slot]);
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out.join("members.stderr"))
            .map_err(io("open members.stderr"))?;
        let child = Command::new(&self.bin)
            .args(&self.common)
            .arg("--writer")
            .arg(&writer)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(io(format!("spawn {}", self.bin.display())))?;
        let pid = child.id().unwrap_or(0);
        self.slots[slot] = Some(Member {
            writer: writer.clone(),
            child,
        });
        Ok((writer, pid))
    }

    fn live(&mut self) -> Vec<usize> {
        let mut live = Vec::new();
        for (slot, member) in self.slots.iter_mut().enumerate() {
            if let Some(m) = member {
                if matches!(m.child.try_wait(), Ok(Some(_))) {
                    *member = None; // exited by itself (its stderr says why)
                } else {
                    live.push(slot);
                }
            }
        }
        live
    }

    fn free(&mut self) -> Vec<usize> {
        let live = self.live();
        (0..self.slots.len())
            .filter(|s| !live.contains(s))
            .collect()
    }

    fn signal(&self, slot: usize, signal: Signal) {
        if let Some(Some(m)) = self.slots.get(slot)
            && let Some(pid) = m.child.id()
        {
            let _ =
                nix::sys::signal::kill(Pid::from_raw(i32::try_from(pid).expect("a pid_t")), signal);
        }
    }

    async fn kill(&mut self, slot: usize) {
        if let Some(mut m) = self.slots[slot].take() {
            let _ = m.child.kill().await;
        }
    }

    /// Asks the member to leave cleanly and waits for it to exit (killed
    /// after `bound`); returns how it ended.
    async fn leave(&mut self, slot: usize, bound: Duration) -> String {
        let Some(mut m) = self.slots[slot].take() else {
            return "gone".into();
        };
        if let Some(mut stdin) = m.child.stdin.take() {
            let _ = stdin.write_all(b"leave\n").await;
            let _ = stdin.flush().await;
            drop(stdin);
        }
        match tokio::time::timeout(bound, m.child.wait()).await {
            Ok(Ok(status)) => status.to_string().replace(' ', "_"),
            Ok(Err(e)) => format!("error={}", e.to_string().replace(' ', "_")),
            Err(_) => {
                let _ = m.child.kill().await;
                "killed_after_bound".into()
            }
        }
    }
}

/// Runs `plan` in `--lease-sets` mode: returns what it injected; the
/// histories and resources are under `plan.out` for
/// [`crate::check::check_keys`].
///
/// Cancel safety: dropping the future kills every member (their
/// processes are killed on drop) and stops the server; the run directory
/// keeps what was recorded.
///
/// Failure model: [`Error::Io`] if the run directory, a member or its log
/// cannot be made; [`Error::Store`] if the backend (its server) does not
/// start. A member that exits by itself is dropped from the group (its
/// slot is free for a `join`); its stderr is in `members.stderr`.
pub async fn run(plan: &Plan, sets: &LeaseSets) -> Result<Ran, Error> {
    std::fs::create_dir_all(&plan.out).map_err(io(format!("create {}", plan.out.display())))?;
    let out =
        &std::path::absolute(&plan.out).map_err(io(format!("resolve {}", plan.out.display())))?;
    for key in key_names(sets.keys) {
        let dir = out.join(KEYS_DIR).join(key);
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    }
    let path = out.join(crate::history::FAULTS_FILE);
    let log = HistoryWriter::create(&path).map_err(io(format!("create {}", path.display())))?;
    let log = |event: FaultEvent| {
        let _ = log.record(&event);
    };
    let mut rng = Rng::new(plan.seed);
    let mut ran = Ran::default();

    // On `nats-cluster` one server, as this mode always ran (its
    // replication is the single-election mode's to torture).
    let kind = match plan.backend {
        Target::NatsCluster => Target::Nats,
        kind => kind,
    };
    let store = blocking(|| kind.start_in(out))?;
    let url = store.url();
    let ms = |d: Duration| d.as_millis().to_string();
    let mut common: Vec<String> = vec![
        "--backend".into(),
        url,
        "--out".into(),
        out.display().to_string(),
        "--keys".into(),
        sets.keys.to_string(),
        "--every-ms".into(),
        ms(sets.every),
        "--write-every-ms".into(),
        ms(sets.write_every),
    ];
    if plan.backend.expires() {
        common.extend([
            "--ttl-ms".into(),
            ms(plan.ttl),
            "--renew-ms".into(),
            ms(plan.renew),
            "--poll-ms".into(),
            ms(plan.poll),
        ]);
    }
    if matches!(plan.backend, Target::Nats | Target::NatsCluster) {
        common.extend(["--grace-ms".into(), ms(plan.grace)]);
    }
    if plan.unsafe_mode {
        common.push("--unsafe".into());
    }
    let mut members = Members {
        bin: sets.member_bin.clone(),
        common,
        out: out.clone(),
        slots: (0..plan.candidates).map(|_| None).collect(),
        incarnations: vec![0; plan.candidates],
    };
    for slot in 0..plan.candidates - 1 {
        let (writer, pid) = members.spawn(slot)?;
        log(FaultEvent::Spawn { writer, pid });
    }
    let leave_bound = Duration::from_secs(20);
    // Past the point where the others take the stopped member's keys: its
    // membership slot's lease runs out and is judged so (up to two TTLs),
    // the others see it (`every`), claim and write; then it wakes with
    // writes under way in terms that ended.
    let stop_for = 3 * plan.ttl + sets.every + Duration::from_millis(500);
    let keys = key_names(sets.keys);
    let mut operator: Option<election_url::Backend> = None;
    let started = Instant::now();
    while started.elapsed() < plan.duration {
        tokio::time::sleep(Duration::from_millis(rng.range_ms(300, 2000))).await;
        let mut fault = plan.faults[rng.index(plan.faults.len())];
        if fault == Fault::Revoke {
            *ran.faults.entry(fault.name()).or_default() += 1;
            let key = &keys[rng.index(keys.len())];
            let backend = match operator.take() {
                Some(b) => b,
                None => super::open_operator_backend(plan, &store).await?,
            };
            log(FaultEvent::fault_or_heal(true, fault, OPERATOR, ""));
            let detail = revoke_key(plan, &backend, out, key).await;
            operator = Some(backend);
            log(FaultEvent::fault_or_heal(false, fault, OPERATOR, detail));
            continue;
        }
        let live = members.live();
        let free = members.free();
        if fault == Fault::Join && free.is_empty() {
            fault = Fault::Leave;
        } else if fault != Fault::Join && live.len() <= 2 {
            if free.is_empty() {
                continue;
            }
            fault = Fault::Join;
        }
        *ran.faults.entry(fault.name()).or_default() += 1;
        if fault == Fault::Join {
            let slot = free[rng.index(free.len())];
            let (writer, pid) = members.spawn(slot)?;
            log(FaultEvent::fault_or_heal(true, fault, &writer, ""));
            log(FaultEvent::Spawn {
                writer: writer.clone(),
                pid,
            });
            log(FaultEvent::fault_or_heal(false, fault, &writer, ""));
            continue;
        }
        let slot = live[rng.index(live.len())];
        let writer = members.slots[slot]
            .as_ref()
            .map(|m| m.writer.clone())
            .unwrap_or_default();
        log(FaultEvent::fault_or_heal(true, fault, &writer, ""));
        let detail = match fault {
            Fault::Kill => {
                members.kill(slot).await;
                String::new()
            }
            Fault::Stop => {
                members.signal(slot, Signal::SIGSTOP);
                tokio::time::sleep(stop_for).await;
                members.signal(slot, Signal::SIGCONT);
                String::new()
            }
            _ => members.leave(slot, leave_bound).await,
        };
        log(FaultEvent::fault_or_heal(false, fault, &writer, detail));
    }
    // Everything healed: the members get the bound to settle and write,
    // then each leaves cleanly.
    log(FaultEvent::End);
    tokio::time::sleep(
        plan.liveness_bound()
            .min(Duration::from_secs(3) + 2 * plan.ttl),
    )
    .await;
    for slot in members.live() {
        members.leave(slot, leave_bound).await;
    }
    drop(store);
    Ok(ran)
}

/// The target a `revoke` fault line names: no member.
const OPERATOR: &str = "operator";

/// `revoke` in this mode: an operator revokes `key` (`Election::revoke`,
/// the backend opened as an operator, tried again while the store answers
/// that nothing was done, for up to a TTL) and raises the key's fence to
/// the revocation's epoch, as `elect revoke --fence` does; returns a TTL
/// and the grace later (the key's next term cannot begin sooner). The
/// detail is the single mode's (`deposed <id> <epoch> revocation <epoch>
/// fence <a>-><b>`, `nobody`, or why it failed), then `key <key>`: the
/// checker holds that key's later terms above the revocation, and only
/// that key's ([`crate::check::check_keys`]).
async fn revoke_key(plan: &Plan, backend: &election_url::Backend, out: &Path, key: &str) -> String {
    let spec = key_resource(out, key);
    let resource = crate::resource::Resource::open(&spec, crate::resource::Mode::Safe)
        .await
        .ok();
    let detail = super::revoke_fenced(plan, backend, key, resource.as_ref()).await;
    tokio::time::sleep(plan.ttl + plan.grace).await;
    format!("{detail} key {key}")
}

/// The resource of `key` in run directory `out`.
pub fn key_resource(out: &Path, key: &str) -> crate::resource::ResourceSpec {
    crate::resource::ResourceSpec::File(out.join(KEYS_DIR).join(key).join("resource"))
}
