//! Making sure PostgreSQL's binaries are there before the tests run: the
//! tests of `election-postgres` start real servers from Debian's
//! `postgresql` package (see `testing/postgres-testkit`).

use std::env;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::Result;

/// The install command, run when the binaries are missing.
const INSTALL: &[&str] = &[
    "apt-get",
    "install",
    "-y",
    "--no-install-recommends",
    "postgresql",
];

/// Finds `initdb`, `postgres` and `psql` (in `$POSTGRES_BIN_DIR`, else any
/// `/usr/lib/postgresql/<version>/bin`); installs Debian's package with
/// apt-get when they are missing (as root, or through `sudo -n`); fails
/// loudly with the command to run when it cannot.
pub(crate) fn ensure() -> Result<()> {
    if let Some(dir) = found() {
        println!("xtask ci: PostgreSQL binaries in {dir}");
        return Ok(());
    }
    println!(
        "xtask ci: PostgreSQL binaries not found; installing: {}",
        INSTALL.join(" ")
    );
    let root = is_root();
    let run = |args: &[&str]| -> bool {
        let mut cmd = if root {
            Command::new(args[0])
        } else {
            let mut c = Command::new("sudo");
            c.arg("-n").arg(args[0]);
            c
        };
        cmd.args(&args[1..])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // A fresh machine may have no package lists yet.
    if !run(INSTALL) {
        let _ = run(&["apt-get", "update"]);
        let _ = run(INSTALL);
    }
    match found() {
        Some(dir) => {
            println!("xtask ci: PostgreSQL binaries in {dir}");
            Ok(())
        }
        None => Err(String::from(
            "PostgreSQL is needed by the tests and could not be installed; run \
             `sudo apt-get install -y postgresql` (Debian/Ubuntu) or set POSTGRES_BIN_DIR \
             to a directory holding initdb, postgres and psql",
        )
        .into()),
    }
}

fn complete(dir: &Path) -> bool {
    ["initdb", "postgres", "psql"]
        .iter()
        .all(|t| dir.join(t).is_file())
}

fn found() -> Option<String> {
    if let Some(dir) = env::var_os("POSTGRES_BIN_DIR").filter(|d| !d.is_empty()) {
        let dir = Path::new(&dir);
        return complete(dir).then(|| dir.display().to_string());
    }
    fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .find(|bin| complete(bin))
        .map(|bin| bin.display().to_string())
}

/// Whether we run as root (`id -u` says 0), without a dependency.
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
