//! `torture run --backend postgres`: the orchestrator starts a real
//! PostgreSQL server (postgres-testkit) and injects its faults (server
//! killed and restarted, `pg_terminate_backend` of the holder's
//! connections, the server SIGSTOPped past the TTL, a holder SIGSTOPped,
//! wall-clock jumps, the lease row deleted by hand);
//! the checker finds no violation and leaders are elected.

use std::process::Command;

#[test]
fn the_postgres_faults_break_no_promise() {
    let out = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_torture"))
        .args([
            "run",
            "--backend",
            "postgres",
            "--seed",
            "7",
            "--duration",
            "12s",
            "--candidates",
            "3",
            "--faults",
            "server,pgterm,pgstop,stop,clock,rowdel",
            "--candidate-bin",
            env!("CARGO_BIN_EXE_torture-candidate"),
            "--out",
        ])
        .arg(out.path().join("run"))
        .output()
        .expect("run torture");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let all: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
    let terms = all
        .iter()
        .find_map(|l| l.trim().strip_prefix("terms")?.trim().parse::<u64>().ok());
    assert!(
        output.status.success()
            && terms.is_some_and(|t| t > 0)
            && all.iter().any(|l| l.contains("no violations")),
        "torture on postgres: {:?}, terms {terms:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
}
