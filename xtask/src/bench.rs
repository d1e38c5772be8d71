//! `cargo xtask bench [ARGS]`: builds the release binaries (the benchmarks,
//! crate `election-bench`, the candidate binary it starts and `elect`) and runs
//! `election-bench ARGS`, which measures, prints the report and writes it
//! (`docs/benchmarks.md` unless `--out`). The flags are checked and
//! documented there; `cargo xtask help` lists them.
//!
//! `cargo xtask` itself runs a debug build, which would measure unoptimised
//! library code: hence the release build and the hand-over.

use crate::{Result, repo_root, run_cargo, target_dir};

/// The release build the bench runs from (`election-bench` names it in the
/// report: keep the two in step).
const BUILD: [&str; 9] = [
    "build",
    "--release",
    "-p",
    "candidate-testkit",
    "-p",
    "election-bench",
    "-p",
    "elect",
    "--bins",
];

/// The command the report's header names.
const VIA: &str = "cargo xtask bench";

/// Runs the task.
pub(crate) fn run(args: &[String]) -> Result<()> {
    run_cargo(&BUILD)?;
    let exe = target_dir().join("release").join("election-bench");
    let shown = format!("{} --via {VIA:?} {}", exe.display(), args.join(" "));
    eprintln!("xtask bench: {shown}");
    let status = std::process::Command::new(&exe)
        .arg("--via")
        .arg(VIA)
        .args(args)
        .current_dir(repo_root())
        .status()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})").into());
    }
    Ok(())
}
