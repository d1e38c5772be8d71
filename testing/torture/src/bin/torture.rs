//! `torture`: the orchestrator and the checker of the torture suite.
//!
//! ```text
//! torture run --backend file|sqlite|nats|nats-cluster|postgres|etcd [--seed N] [--duration 60s]
//!     [--candidates 5] [--ttl-ms N] [--renew-ms N] [--grace-ms N] [--poll-ms N]
//!     [--faults kill,stop,...] [--out DIR] [--unsafe] [--candidate-bin PATH]
//!     [--elect [--elect-bin PATH] [--command-bin PATH]]
//!     [--lease-sets [--keys 16] [--every-ms 200] [--write-every-ms 50] [--member-bin PATH]]
//! torture check DIR --resource file:DIR|sqlite:PATH|sqlfence:DIR --bound-ms N
//! ```
//!
//! `run` starts the backend and the candidates, injects faults for the
//! duration, heals everything, stops the candidates and checks the run;
//! it prints the summary and exits 1 on any violation (2 on bad usage or a
//! run that could not be carried out). A failing run prints its seed and the
//! command that reproduces it.
//!
//! `--elect` (file, sqlite): the candidates are `elect run` processes whose
//! command (`torture-command`) writes through the fence; the default mix is
//! the deployment's faults (`supkill`, `supstop`, `groupstop`, `spellings`,
//! `nested`, `fencefiles` and `reboot` or `fencerows` and `hardlink`, with
//! `kill`, `stop`, `resign`). With `reboot` in the mix (file) the candidates
//! keep the election in the default directory (no `--backend`).
//!
//! `--lease-sets` (every backend): the candidates are balanced lease-set
//! members (`torture-member`, at most `--candidates`, one fewer at the
//! start) offering `--keys` keys, each key written through its own fence;
//! the faults are `join`, `leave` (clean), `kill` and `stop`; the checker
//! runs per key (`torture::check::check_keys`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use torture::check::{CheckOptions, check_dir, check_keys};
use torture::orchestrate::{self, Fault, Mix, Plan, Target};
use torture::resource::{ResourceSpec, read_records};

const USAGE: &str = "\
usage:
  torture run --backend file|sqlite|nats|nats-cluster|postgres|etcd [--seed N] [--duration 60s]
      [--candidates 5] [--ttl-ms N] [--renew-ms N] [--grace-ms N] [--poll-ms N]
      [--faults kill,stop,resign,cancel,unguarded,clock,rowdel,fdrop,server,blackhole,drop,deafen,
                recreate,maxage,rollback,node,meta]
      [--out DIR] [--unsafe] [--candidate-bin PATH]
      [--elect [--elect-bin PATH] [--command-bin PATH]]
      [--lease-sets [--keys 16] [--every-ms 200] [--write-every-ms 50] [--member-bin PATH]]
  torture check DIR --resource file:DIR|sqlite:PATH|sqlfence:DIR --bound-ms N

--elect (file, sqlite): candidates are `elect run` processes whose command
writes through the fence; faults supkill, supstop, groupstop, spellings,
nested, fencefiles and reboot (file), fencerows and hardlink (sqlite), with
kill, stop and resign. With reboot in the mix the candidates use the default
directory (no --backend).

--lease-sets (every backend): candidates are balanced lease-set members
(torture-member) that join, leave, are killed and stopped (faults join,
leave, kill, stop), and whose keys an operator revokes (revoke), while every
key is written through its own fence; the checker runs per key.

Faults default to every kind that applies to the backend (and mode). The seed defaults
to a random one (printed). --out defaults to a new directory under
target/torture/ (<backend>-<seed>-<unix time>).";

fn duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n.parse().map_err(|_| format!("bad duration {s:?}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(60 * n)),
        _ => Err(format!("bad duration {s:?} (e.g. 500ms, 60s, 10m)")),
    }
}

fn sibling(name: &str) -> PathBuf {
    let me = std::env::current_exe().unwrap_or_default();
    me.with_file_name(name)
}

fn candidate_bin() -> PathBuf {
    sibling("torture-candidate")
}

fn parse_run(args: &[String]) -> Result<Plan, String> {
    let mut backend = None;
    let mut seed = None;
    let mut plan_duration = Duration::from_secs(60);
    let mut candidates = 5;
    let (mut ttl, mut renew, mut grace, mut poll) = (None, None, None, None);
    let mut faults = None;
    let mut out = None;
    let mut unsafe_mode = false;
    let mut bin = candidate_bin();
    let mut elect = false;
    let mut elect_bin = sibling("elect");
    let mut command_bin = sibling("torture-command");
    let mut lease_sets = false;
    let mut keys = 16;
    let mut every = Duration::from_millis(200);
    let mut write_every = Duration::from_millis(50);
    let mut member_bin = sibling("torture-member");
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--unsafe" {
            unsafe_mode = true;
            continue;
        }
        if flag == "--elect" {
            elect = true;
            continue;
        }
        if flag == "--lease-sets" {
            lease_sets = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let ms = |v: &str| {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("{flag}: {v:?} is not a number of milliseconds"))
        };
        match flag.as_str() {
            "--backend" => backend = Some(Target::parse(value).map_err(|e| e.to_string())?),
            "--seed" => {
                seed = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("bad seed {value:?}"))?,
                )
            }
            "--duration" => plan_duration = duration(value)?,
            "--candidates" => {
                candidates = value.parse().map_err(|_| format!("bad count {value:?}"))?;
                if !(2..=32).contains(&candidates) {
                    return Err("--candidates must be 2 to 32".into());
                }
            }
            "--ttl-ms" => ttl = Some(ms(value)?),
            "--renew-ms" => renew = Some(ms(value)?),
            "--grace-ms" => grace = Some(ms(value)?),
            "--poll-ms" => poll = Some(ms(value)?),
            "--faults" => {
                faults = Some(
                    value
                        .split(',')
                        .map(|f| f.trim().parse::<Fault>().map_err(|e| e.to_string()))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            "--out" => out = Some(PathBuf::from(value)),
            "--candidate-bin" => bin = PathBuf::from(value),
            "--elect-bin" => elect_bin = PathBuf::from(value),
            "--command-bin" => command_bin = PathBuf::from(value),
            "--member-bin" => member_bin = PathBuf::from(value),
            "--keys" => {
                keys = value.parse().map_err(|_| format!("bad count {value:?}"))?;
                if !(1..=1000).contains(&keys) {
                    return Err("--keys must be 1 to 1000".into());
                }
            }
            "--every-ms" => every = ms(value)?,
            "--write-every-ms" => write_every = ms(value)?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let backend = backend.ok_or("--backend is required")?;
    // 1.5 s, or the next whole step up where leases come in steps (2 s on
    // etcd, whose leases are in seconds).
    let ttl = ttl.unwrap_or_else(|| {
        let step = backend.ttl_step();
        let want = Duration::from_millis(1500);
        let steps = want.as_nanos().div_ceil(step.as_nanos().max(1));
        step * u32::try_from(steps).unwrap_or(1)
    });
    let renew = renew.unwrap_or(ttl / 3);
    let grace = grace.unwrap_or(ttl / 3);
    let poll = poll.unwrap_or(Duration::from_millis(100));
    if elect && !backend.has_elect_mode() {
        return Err(format!("--elect runs on file and sqlite, not {backend}"));
    }
    if elect && lease_sets {
        return Err("--elect and --lease-sets do not go together".into());
    }
    if lease_sets && candidates < 3 {
        return Err("--lease-sets needs --candidates 3 or more (two stay alive, one joins)".into());
    }
    if elect && unsafe_mode {
        return Err("--elect and --unsafe do not go together".into());
    }
    let faults = faults.unwrap_or_else(|| {
        if lease_sets {
            backend.lease_set_faults()
        } else if elect {
            backend.elect_faults()
        } else {
            backend.faults()
        }
    });
    if faults.is_empty() {
        return Err("--faults is empty".into());
    }
    let allows = |f: Fault| {
        if lease_sets {
            backend.allows_lease_sets(f)
        } else if elect {
            backend.allows_elect(f)
        } else {
            backend.allows(f)
        }
    };
    if let Some(f) = faults.iter().find(|f| !allows(**f)) {
        let mode = if lease_sets {
            " with --lease-sets"
        } else if elect {
            " with --elect"
        } else {
            ""
        };
        return Err(format!(
            "fault {f} does not apply to the {backend} backend{mode}"
        ));
    }
    let seed = seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(7, |d| d.as_secs() ^ u64::from(d.subsec_nanos()) << 32)
    });
    let out = out.unwrap_or_else(|| {
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mode = if lease_sets {
            "sets-"
        } else if elect {
            "elect-"
        } else {
            ""
        };
        PathBuf::from("target/torture").join(format!("{mode}{backend}-{seed}-{at}"))
    });
    if out.exists() {
        return Err(format!("{} exists: pick another --out", out.display()));
    }
    Ok(Plan {
        backend,
        seed,
        duration: plan_duration,
        candidates,
        ttl,
        renew,
        grace,
        poll,
        faults,
        out,
        unsafe_mode,
        candidate_bin: bin,
        elect: elect.then_some(orchestrate::ElectBins {
            elect: elect_bin,
            command: command_bin,
        }),
        lease_sets: lease_sets.then_some(orchestrate::LeaseSets {
            keys,
            every,
            write_every,
            member_bin,
        }),
    })
}

async fn run(args: &[String]) -> Result<bool, String> {
    let plan = parse_run(args)?;
    if let Some(sets) = &plan.lease_sets {
        return run_lease_sets(&plan, sets).await;
    }
    println!(
        "torture: {}{} for {:?}, seed {}, {} candidates, TTL {:?}, faults {}; in {}",
        plan.backend,
        if plan.elect.is_some() {
            " (elect run)"
        } else {
            ""
        },
        plan.duration,
        plan.seed,
        plan.candidates,
        plan.ttl,
        plan.fault_names(),
        plan.out.display()
    );
    let ran = orchestrate::run(&plan)
        .await
        .map_err(|e| format!("the run failed: {e}"))?;
    let records = read_records(&plan.resource())
        .await
        .map_err(|e| format!("reading the resource: {e}"))?;
    let options = check_options(&plan);
    let report = check_dir(&plan.out, &records, &options)
        .map_err(|e| format!("reading the histories: {e}"))?;
    Ok(finish(&plan, &report, report.is_safe(), &ran.faults))
}

/// `--lease-sets`: the run, then the checker per key.
async fn run_lease_sets(plan: &Plan, sets: &orchestrate::LeaseSets) -> Result<bool, String> {
    println!(
        "torture: lease sets on {} for {:?}, seed {}, up to {} members, {} keys, TTL {:?}, every {:?}, faults {}; in {}",
        plan.backend,
        plan.duration,
        plan.seed,
        plan.candidates,
        sets.keys,
        plan.ttl,
        sets.every,
        plan.fault_names(),
        plan.out.display()
    );
    let ran = orchestrate::lease_sets::run(plan, sets)
        .await
        .map_err(|e| format!("the run failed: {e}"))?;
    let out = std::path::absolute(&plan.out).map_err(|e| e.to_string())?;
    let mut records = std::collections::BTreeMap::new();
    for key in orchestrate::lease_sets::key_names(sets.keys) {
        let spec = orchestrate::lease_sets::key_resource(&out, &key);
        let read = read_records(&spec)
            .await
            .map_err(|e| format!("reading the resource of {key}: {e}"))?;
        records.insert(key, read);
    }
    let options = check_options(plan);
    let report =
        check_keys(&out, &records, &options).map_err(|e| format!("reading the histories: {e}"))?;
    Ok(finish(plan, &report, report.is_safe(), &ran.faults))
}

/// The checker's options for `plan`: its liveness bound, and its seed and
/// command for the report's "reproduce with" line.
fn check_options(plan: &Plan) -> CheckOptions {
    let mut options = CheckOptions::new(plan.liveness_bound());
    options.seed = Some(plan.seed);
    options.command = Some(plan.command());
    options
}

/// Prints the checker's `report` and the faults a run injected, and how
/// to reproduce the run if it broke a promise (`safe` false); returns
/// `safe`.
fn finish(
    plan: &Plan,
    report: &impl std::fmt::Display,
    safe: bool,
    faults: &std::collections::BTreeMap<&'static str, usize>,
) -> bool {
    println!("{report}");
    println!(
        "torture: faults injected: {}",
        faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !safe {
        println!("torture: FAILED; reproduce with: {}", plan.command());
    }
    safe
}

async fn check(args: &[String]) -> Result<bool, String> {
    let (dir, rest) = args.split_first().ok_or("check needs a run directory")?;
    let mut resource = None;
    let mut bound = None;
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--resource" => {
                resource = Some(value.parse::<ResourceSpec>().map_err(|e| e.to_string())?)
            }
            "--bound-ms" => {
                bound = Some(Duration::from_millis(
                    value
                        .parse()
                        .map_err(|_| format!("bad --bound-ms {value:?}"))?,
                ))
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let resource = resource.ok_or("--resource is required")?;
    let bound = bound.ok_or("--bound-ms is required")?;
    let records = read_records(&resource).await.map_err(|e| e.to_string())?;
    let report =
        check_dir(dir.as_ref(), &records, &CheckOptions::new(bound)).map_err(|e| e.to_string())?;
    println!("{report}");
    Ok(report.is_safe())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("torture: cannot start a runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = match args.split_first() {
        Some((cmd, rest)) if cmd == "run" => runtime.block_on(run(rest)),
        Some((cmd, rest)) if cmd == "check" => runtime.block_on(check(rest)),
        Some((cmd, _)) if cmd == "--help" || cmd == "help" || cmd == "-h" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(format!("no command\n{USAGE}")),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("torture: error: {e}");
            ExitCode::from(2)
        }
    }
}
