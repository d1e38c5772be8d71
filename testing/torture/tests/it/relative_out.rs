//! `torture run` with a relative `--out` (as `cargo xtask torture` passes
//! it: `target/torture/...`): the candidates get a backend URL with an
//! absolute path and the run elects leaders.

use std::process::Command;

#[test]
fn a_relative_out_directory_still_elects_leaders() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_torture"))
        .current_dir(cwd.path())
        .args([
            "run",
            "--backend",
            "file",
            "--seed",
            "3",
            "--duration",
            "2s",
            "--faults",
            "resign",
            "--out",
            "runs/relative",
        ])
        .output()
        .expect("run torture");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let terms = stdout
        .lines()
        .chain(stderr.lines())
        .find_map(|l| l.trim().strip_prefix("terms")?.trim().parse::<u64>().ok());
    assert!(
        output.status.success() && terms.is_some_and(|t| t > 0),
        "torture with a relative --out: {:?}, terms {terms:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
}
