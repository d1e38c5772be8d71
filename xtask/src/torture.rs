//! `cargo xtask torture`: the torture suite (crates/torture).
//!
//! - `cargo xtask torture [ARGS]`: builds the torture binaries (release) and
//!   runs `torture run ARGS` (see `torture run --help` for the flags: backend,
//!   seed, duration, candidates, TTLs, fault mix).
//! - `cargo xtask torture --ci`: CI's budget: each backend (file, sqlite,
//!   nats, postgres) twice, 30 s with the fixed seed 1 and 30 s with a
//!   random seed, printed, from a debug build (about 75 s a backend). Two
//!   backends run at a time (their runs mostly wait on timers and
//!   servers), each backend's two runs one after the other; each run's
//!   output is printed whole when it ends.

use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{Result, repo_root, run_cargo, target_dir};

const CI_SEED: u64 = 1;
const CI_SECONDS: u64 = 30;
const CI_BACKENDS: [&str; 4] = ["file", "nats", "sqlite", "postgres"];
/// How many backends CI's runs test at a time.
const CI_PARALLEL: usize = 2;

fn build(release: bool) -> Result<std::path::PathBuf> {
    let mut args = vec!["build", "-p", "torture", "--bins"];
    if release {
        args.push("--release");
    }
    run_cargo(&args)?;
    Ok(target_dir().join(if release { "release" } else { "debug" }))
}

fn command(bin_dir: &std::path::Path, args: &[String]) -> (String, Command) {
    let shown = format!("torture {}", args.join(" "));
    let mut cmd = Command::new(bin_dir.join("torture"));
    cmd.args(args)
        .arg("--candidate-bin")
        .arg(bin_dir.join("torture-candidate"))
        .current_dir(repo_root())
        .stdin(Stdio::null());
    (shown, cmd)
}

fn torture(bin_dir: &std::path::Path, args: &[String]) -> Result<()> {
    let (shown, mut cmd) = command(bin_dir, args);
    println!("xtask torture: {shown}");
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})").into());
    }
    Ok(())
}

/// Runs `torture ARGS` with its output captured, then prints it whole
/// (runs in parallel do not interleave their lines).
fn torture_captured(bin_dir: &std::path::Path, args: &[String]) -> Result<()> {
    let (shown, mut cmd) = command(bin_dir, args);
    let out = cmd
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "xtask torture: {shown}");
        let _ = stdout.write_all(&out.stdout);
        let _ = stdout.write_all(&out.stderr);
        let _ = stdout.flush();
    }
    if !out.status.success() {
        return Err(format!("`{shown}` failed ({})", out.status).into());
    }
    Ok(())
}

/// CI's runs: every backend with each seed, two backends at a time.
fn ci(bin: &std::path::Path, seeds: [u64; 2]) -> Result<()> {
    let run_backend = |backend: &str| -> Result<()> {
        for seed in seeds {
            torture_captured(
                bin,
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
        Ok(())
    };
    let mut failures = Vec::new();
    for pair in CI_BACKENDS.chunks(CI_PARALLEL) {
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = pair
                .iter()
                .map(|backend| scope.spawn(|| run_backend(backend)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a torture thread panicked".into()))
                })
                .collect()
        });
        failures.extend(results.into_iter().filter_map(|r| r.err()));
    }
    match failures.as_slice() {
        [] => Ok(()),
        _ => Err(failures
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
            .into()),
    }
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
        ci(&bin, [CI_SEED, random])?;
        return Ok(());
    }
    let bin = build(true)?;
    let mut all = vec!["run".to_owned()];
    all.extend(args.iter().cloned());
    torture(&bin, &all)
}
