//! Finding PostgreSQL's binaries.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::Error;

/// The environment variable that names a directory holding `initdb`,
/// `postgres` and `psql`, used instead of Debian's layout.
pub const POSTGRES_BIN_DIR_ENV: &str = "POSTGRES_BIN_DIR";

/// Where the PostgreSQL binaries the kit runs are.
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// The directory holding them.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the tool `name` (`initdb`, `postgres`, `psql`, ...).
    pub fn tool(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Finds the binaries once per process: `$POSTGRES_BIN_DIR`, else the
/// newest `/usr/lib/postgresql/<version>/bin` that has `initdb`, `postgres`
/// and `psql`.
///
/// # Errors
///
/// [`Error::Missing`] naming where it looked and how to install them.
pub fn binaries() -> Result<Binaries, Error> {
    static FOUND: OnceLock<Binaries> = OnceLock::new();
    if let Some(found) = FOUND.get() {
        return Ok(found.clone());
    }
    let found = find()?;
    Ok(FOUND.get_or_init(|| found).clone())
}

fn complete(dir: &Path) -> bool {
    ["initdb", "postgres", "psql"]
        .iter()
        .all(|t| dir.join(t).is_file())
}

fn find() -> Result<Binaries, Error> {
    if let Some(dir) = env::var_os(POSTGRES_BIN_DIR_ENV).filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return if complete(&dir) {
            Ok(Binaries { dir })
        } else {
            Err(Error::Missing {
                looked: format!("{POSTGRES_BIN_DIR_ENV}={}", dir.display()),
            })
        };
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            complete(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, dir)| Binaries { dir })
        .ok_or_else(|| Error::Missing {
            looked: format!("{}/<version>/bin", root.display()),
        })
}
