//! `cargo xtask ci`: the checks CI runs, in order, stopping at the first
//! failure.

use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{Result, cargo, postgres, repo_root};

/// One check: the words after `cargo`.
struct Step {
    args: Vec<&'static str>,
}

impl Step {
    fn new(args: &[&'static str]) -> Self {
        Step {
            args: args.to_vec(),
        }
    }

    fn display(&self) -> String {
        format!("cargo {}", self.args.join(" "))
    }
}

/// Runs the checks: fmt, clippy, (PostgreSQL's binaries installed if
/// missing), the tests (nextest, or `cargo test` when
/// cargo-nextest is missing), the doc tests, and the torture suite's short
/// budget (`cargo xtask torture --ci`).
pub(crate) fn run() -> Result<()> {
    let started = Instant::now();
    let mut steps = vec![
        Step::new(&["fmt", "--all", "--check"]),
        Step::new(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    ];
    if nextest_available() {
        steps.push(Step::new(&[
            "nextest",
            "run",
            "--workspace",
            "--no-fail-fast",
        ]));
    } else {
        println!(
            "xtask ci: `cargo nextest --version` failed (cargo-nextest is not installed?); \
             falling back to `cargo test --workspace`"
        );
        steps.push(Step::new(&["test", "--workspace"]));
    }
    steps.push(Step::new(&["test", "--workspace", "--doc"]));
    // The torture suite's short budget: each backend, a fixed and a random
    // seed (printed), about a minute per backend.
    steps.push(Step::new(&["xtask", "torture", "--ci"]));

    let total = steps.len();
    for (i, step) in steps.iter().enumerate() {
        if i == 2 {
            // Before the tests: they start real PostgreSQL servers.
            postgres::ensure()?;
        }
        let shown = step.display();
        println!("xtask ci: [{}/{total}] {shown}", i + 1);
        let t = Instant::now();
        let status = Command::new(cargo())
            .args(&step.args)
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("could not start `{shown}`: {e}"))?;
        let secs = t.elapsed().as_secs_f64();
        if !status.success() {
            return Err(format!(
                "step {}/{total} `{shown}` failed ({status}) after {secs:.1} s; \
                 later steps were not run",
                i + 1
            )
            .into());
        }
        println!("xtask ci: [{}/{total}] {shown}: ok in {secs:.1} s", i + 1);
    }
    println!(
        "xtask ci: all {total} steps passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// True if `cargo nextest --version` runs and succeeds.
fn nextest_available() -> bool {
    Command::new(cargo())
        .args(["nextest", "--version"])
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
