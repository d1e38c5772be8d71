//! One `initdb` per machine and version: a template data directory under
//! `<target dir>/tools/`, copied for every server.

use std::env;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::server::{as_server_user, run};
use crate::{Binaries, Error};

/// The template's WAL segment size in MB (`initdb --wal-segsize`), also in
/// its directory's name, so a template made with another size is not
/// reused.
const WAL_SEGMENT_MB: u32 = 1;

/// The template's data directory, made on first use (under an exclusive
/// lock on `<template>.lock`, so parallel test processes make it once).
pub(crate) fn template(bins: &Binaries) -> Result<PathBuf, Error> {
    static DONE: OnceLock<PathBuf> = OnceLock::new();
    if let Some(dir) = DONE.get() {
        return Ok(dir.clone());
    }
    let version = version_of(bins)?;
    let tools = target_dir().join("tools");
    fs::create_dir_all(&tools).map_err(Error::io(format!("mkdir -p {}", tools.display())))?;
    let dir = tools.join(format!("postgres-template-{version}-wal{WAL_SEGMENT_MB}"));
    let lock_path = tools.join(format!(
        "postgres-template-{version}-wal{WAL_SEGMENT_MB}.lock"
    ));
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(Error::io(format!("open {}", lock_path.display())))?;
    lock.lock()
        .map_err(Error::io(format!("lock {}", lock_path.display())))?;
    let data = dir.join("data");
    if !data.join("PG_VERSION").is_file() {
        make(bins, &dir)?;
    }
    Ok(DONE.get_or_init(|| data).clone())
}

/// `initdb` into a fresh temp directory (the server user must own it),
/// then moves the result to `dir`.
fn make(bins: &Binaries, dir: &Path) -> Result<(), Error> {
    let scratch = tempfile::Builder::new()
        .prefix("postgres-testkit-initdb-")
        .tempdir()
        .map_err(Error::io("making a temp dir for initdb"))?;
    as_server_user::hand_over(scratch.path())?;
    let data = scratch.path().join("data");
    let mut initdb = Command::new(bins.tool("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "--no-sync"])
        .args(["--encoding=UTF8", "--locale=C"])
        // 1 MB WAL segments, not 16: every server starts from a copy of
        // this directory, and the one preallocated segment was 16 of its
        // 39 MB. The copies took a third of the test run's CPU (`cp`,
        // process accounting of CI's test run; ADR 0085).
        .arg(format!("--wal-segsize={WAL_SEGMENT_MB}"));
    as_server_user::apply(&mut initdb);
    run(&mut initdb)?;
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(Error::io(format!("rm -r {}", dir.display())))?;
    }
    fs::create_dir_all(dir).map_err(Error::io(format!("mkdir -p {}", dir.display())))?;
    // `cp -a` keeps the owner (the server user) and the 0700 mode.
    run(Command::new("cp").arg("-a").arg(&data).arg(dir))
}

/// The major version (`PG_VERSION`-style, e.g. `15`) from `postgres --version`.
fn version_of(bins: &Binaries) -> Result<String, Error> {
    let out = run_output(Command::new(bins.tool("postgres")).arg("--version"))?;
    // "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    out.split_whitespace()
        .nth(2)
        .and_then(|v| v.split('.').next())
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .ok_or_else(|| Error::Command {
            command: format!("{} --version", bins.tool("postgres").display()),
            status: "exit status: 0".to_owned(),
            output: format!("unexpected version line {out:?}"),
        })
}

fn run_output(cmd: &mut Command) -> Result<String, Error> {
    let line = format!("{cmd:?}");
    let out = cmd.output().map_err(Error::io(format!("running {line}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(Error::Command {
            command: line,
            status: out.status.to_string(),
            output: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

fn target_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.join("../..");
    let workspace = fs::canonicalize(&workspace).unwrap_or(workspace);
    match env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}
