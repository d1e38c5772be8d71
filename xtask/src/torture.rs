//! `cargo xtask torture`: the torture suite (crates/torture).
//!
//! - `cargo xtask torture [ARGS]`: builds the torture binaries (release) and
//!   runs `torture run ARGS` (see `torture run --help` for the flags: backend,
//!   seed, duration, candidates, TTLs, fault mix).
//! - `cargo xtask torture --ci`: CI's budget: each backend (file, sqlite,
//!   nats, postgres) twice, 30 s with the fixed seed 1 and 30 s with a
//!   random seed, printed, from a debug build (about 75 s a backend; the
//!   four took 5-6 minutes on two shared cores).

use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{Result, repo_root, run_cargo, target_dir};

const CI_SEED: u64 = 1;
const CI_SECONDS: u64 = 30;
const CI_BACKENDS: [&str; 4] = ["file", "sqlite", "nats", "postgres"];

fn build(release: bool) -> Result<std::path::PathBuf> {
    let mut args = vec!["build", "-p", "torture", "--bins"];
    if release {
        args.push("--release");
    }
    run_cargo(&args)?;
    Ok(target_dir().join(if release { "release" } else { "debug" }))
}

fn torture(bin_dir: &std::path::Path, args: &[String]) -> Result<()> {
    let shown = format!("torture {}", args.join(" "));
    println!("xtask torture: {shown}");
    let status = Command::new(bin_dir.join("torture"))
        .args(args)
        .arg("--candidate-bin")
        .arg(bin_dir.join("torture-candidate"))
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})").into());
    }
    Ok(())
}

/// Runs the task.
pub(crate) fn run(args: &[String]) -> Result<()> {
    if args.first().map(String::as_str) == Some("--ci") {
        let bin = build(false)?;
        let random = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64)
            | 1;
        println!("xtask torture: fixed seed {CI_SEED}, random seed {random}");
        for backend in CI_BACKENDS {
            for seed in [CI_SEED, random] {
                torture(
                    &bin,
                    &[
                        "run".into(),
                        "--backend".into(),
                        backend.into(),
                        "--seed".into(),
                        seed.to_string(),
                        "--duration".into(),
                        format!("{CI_SECONDS}s"),
                    ],
                )?;
            }
        }
        return Ok(());
    }
    let bin = build(true)?;
    let mut all = vec!["run".to_owned()];
    all.extend(args.iter().cloned());
    torture(&bin, &all)
}
