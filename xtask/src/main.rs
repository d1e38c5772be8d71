//! Developer tasks for this workspace, run as `cargo xtask <task>`.
//!
//! - `cargo xtask ci`: the checks CI runs (fmt, the workspace's shape,
//!   clippy of the workspace and of each crate alone, packaging, docs,
//!   tests, doc tests,
//!   torture).
//! - `cargo xtask check-packages`: the packaging check `ci` runs after
//!   `cargo package --no-verify` (ADR 0042).
//! - `cargo xtask check-shape`: `ci`'s checks that build nothing: lints,
//!   import cycles, drivers, the core's tokio features (ADR 0101), MSRV,
//!   licences and duplicates (ADR 0056).
//! - `cargo xtask bench [--quick] [--out FILE] [--only GROUPS]`: the
//!   benchmarks (testing/bench, `election-bench`): measures the election
//!   (file, SQLite and NATS backends) and fencing paths against floors
//!   measured in the same run and writes `docs/benchmarks.md`.
//! - `cargo xtask torture [--ci | ARGS]`: the torture suite (testing/torture).
//!
//! xtask is a task runner: it depends on `serde_json` only (to read `cargo
//! metadata`, ADR 0103) and runs cargo, so `cargo xtask ci` builds nothing
//! of the workspace before its first step (`cargo fmt --check`). Argument parsing is by hand: the tasks
//! take few flags.

mod bench;
mod ci;
mod plugins;
mod policy;
mod postgres;
mod torture;

use std::process::ExitCode;

/// The error type of every task: any error, with its message.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// The result type of every task.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  ci                      cargo fmt --check, check-shape; then build-checks at idle
                          CPU priority (target in /dev/shm) beside one build of
                          the tests and, side by side: nextest (+ the ten
                          slowest tests), doc tests, torture --ci (each backend,
                          fixed + random seed; elect run on sqlite and file)
  build-checks            ci's checks that build: clippy -D warnings of the
                          workspace and of each crate alone,
                          package --no-verify (+ check-packages), doc -D
                          warnings (+ an example on every public fn)
  check-shape             ci's checks that build nothing (ADR 0056): lints set in
                          [workspace.lints] only, import cycles, each published
                          crate's normal tree holds only its own backend's driver,
                          the core's tokio has no net/process/signal/fs,
                          the MSRV of every dependency, licences and duplicate
                          versions (cargo-deny, installed under target/tools)
  check-packages          ci's check after `cargo package`: every publishable
                          crate's package holds its README, CHANGELOG, licences,
                          sources and every file they include, from inside it
  bench [--quick] [--out FILE] [--only GROUPS]
                          build the release binaries (testing/bench and the
                          candidates), measure, print a markdown table
                          and write it to FILE (default docs/benchmarks.md,
                          relative to the repository root)
                          --quick: a tenth of the iterations
                          --only: comma-separated subset of
                                  campaign,handover,failover,fencing,sqlite,nats,
                                  leases,cli,postgres
                                  (the first three are the file backend's; nats
                                  starts nats-servers with nats-testkit; cli
                                  times `elect run` beside flock(1); postgres
                                  starts a server with postgres-testkit)
  torture [--ci | ARGS]    the torture suite: candidate processes, injected faults,
                          a fenced resource and a checker (testing/torture);
                          --ci: each backend for CI's fixed budget and seeds,
                          then `elect run` as the subject (--elect) on sqlite
                          and file
  help                    this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((task, rest)) => (task.as_str(), rest),
        None => {
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let outcome = match task {
        "ci" if rest.is_empty() => ci::run(),
        "check-packages" if rest.is_empty() => ci::check_packages(),
        "check-shape" if rest.is_empty() => ci::check_shape(),
        "build-checks" if rest.is_empty() => ci::build_checks(),
        "bench" => bench::run(rest),
        "torture" => torture::run(rest),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("xtask: unknown task or arguments: {}", args.join(" "));
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The root of the workspace (the parent of `xtask/`).
pub(crate) fn repo_root() -> std::path::PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// The `cargo` to run: the one that runs us, if any.
pub(crate) fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// A `cargo` command (the one [`cargo`] names) with incremental
/// compilation off: xtask's builds are one-shot (CI, a fresh clone), and an
/// incremental cache of every test binary costs gigabytes of disk and
/// buys nothing there (ADR 0057).
pub(crate) fn cargo_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(cargo());
    cmd.env("CARGO_INCREMENTAL", "0");
    cmd
}

/// The cargo target directory (`CARGO_TARGET_DIR`, relative to the root).
pub(crate) fn target_dir() -> std::path::PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => repo_root().join(dir),
        None => repo_root().join("target"),
    }
}

/// Runs `cargo ARGS` in the workspace root (stdin closed), failing if it
/// fails.
pub(crate) fn run_cargo(args: &[&str]) -> Result<()> {
    let shown = format!("cargo {}", args.join(" "));
    eprintln!("xtask: {shown}");
    let status = cargo_command()
        .args(args)
        .current_dir(repo_root())
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})").into());
    }
    Ok(())
}

/// Every `.rs` file under `dir`, recursively.
pub(crate) fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
