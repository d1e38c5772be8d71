//! `cargo xtask ci`: the checks CI runs, in order, stopping at the first
//! failure.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{Result, cargo, postgres, repo_root};

/// One check: the words after `cargo`, the environment it adds, and a
/// check of xtask's own that runs after the command succeeded.
struct Step {
    args: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
    then: Option<fn() -> Result<()>>,
    /// Needs PostgreSQL's binaries (installed first when missing).
    postgres: bool,
}

impl Step {
    fn new(args: &[&str]) -> Self {
        Step {
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            then: None,
            postgres: false,
        }
    }

    fn display(&self) -> String {
        let env: String = self
            .env
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\" "))
            .collect();
        format!("{env}cargo {}", self.args.join(" "))
    }
}

/// Runs the checks: fmt, clippy, the packaging of every publishable crate
/// (and the check that each package holds every file its sources include),
/// the docs without warnings (and an example on every public function of
/// the library crates), (PostgreSQL's binaries installed if
/// missing), the tests (nextest, or `cargo test` when cargo-nextest is
/// missing), the doc tests, and the torture suite's short budget (`cargo
/// xtask torture --ci`).
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
    // Every publishable crate packages: metadata, versions on internal
    // dependencies, the files a package needs. Without verifying builds
    // (minutes: each package rebuilds its dependencies with its own
    // features), so `check_packages` catches what they would: a file the
    // sources include from outside the package, or missing from it (ADR
    // 0042).
    let mut package = Step::new(&["package", "--no-verify", "--allow-dirty"]);
    for (name, _) in publishable_crates()? {
        package.args.extend(["-p".to_string(), name]);
    }
    package.then = Some(check_packages);
    steps.push(package);
    let mut doc = Step::new(&["doc", "--workspace", "--no-deps"]);
    doc.env.push(("RUSTDOCFLAGS", "-D warnings"));
    doc.then = Some(check_doc_examples);
    steps.push(doc);
    let mut tests = if nextest_available() {
        Step::new(&["nextest", "run", "--workspace", "--no-fail-fast"])
    } else {
        println!(
            "xtask ci: `cargo nextest --version` failed (cargo-nextest is not installed?); \
             falling back to `cargo test --workspace`"
        );
        Step::new(&["test", "--workspace"])
    };
    // The tests start real PostgreSQL servers.
    tests.postgres = true;
    steps.push(tests);
    steps.push(Step::new(&["test", "--workspace", "--doc"]));
    // The torture suite's short budget: each backend, a fixed and a random
    // seed (printed), about a minute per backend.
    steps.push(Step::new(&["xtask", "torture", "--ci"]));

    let total = steps.len();
    for (i, step) in steps.iter().enumerate() {
        if step.postgres {
            postgres::ensure()?;
        }
        let shown = step.display();
        println!("xtask ci: [{}/{total}] {shown}", i + 1);
        let t = Instant::now();
        let status = Command::new(cargo())
            .args(&step.args)
            .envs(step.env.iter().copied())
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("could not start `{shown}`: {e}"))?;
        let outcome = if status.success() {
            step.then.map_or(Ok(()), |check| check())
        } else {
            Err(format!("{status}").into())
        };
        let secs = t.elapsed().as_secs_f64();
        if let Err(e) = outcome {
            return Err(format!(
                "step {}/{total} `{shown}` failed ({e}) after {secs:.1} s; \
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

/// Every public function of the library crates has an example in its
/// docs: `xtask/scripts/doc_examples.py` lists those without one (after
/// checking itself on a fixture) and fails if there is any.
fn check_doc_examples() -> Result<()> {
    let script = repo_root().join("xtask/scripts/doc_examples.py");
    for args in [&["--self-test"][..], &["--summary"][..]] {
        let status = Command::new("python3")
            .arg(&script)
            .args(args)
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .status()
            .map_err(|e| {
                format!(
                    "could not start python3 {} (is python3 installed?): {e}",
                    script.display()
                )
            })?;
        if !status.success() {
            return Err(format!(
                "{} {}: {status}: public functions without a doc example (listed above)",
                script.display(),
                args.join(" ")
            )
            .into());
        }
    }
    Ok(())
}

/// The workspace members that may be published (no `publish = false`), as
/// (package name, directory). The manifests here are written one key per
/// line, which is all this reads.
fn publishable_crates() -> Result<Vec<(String, PathBuf)>> {
    let root = repo_root();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let members = workspace
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .ok_or("Cargo.toml: no `members = [...]` line")?;
    let mut crates = Vec::new();
    for member in members.split('"').skip(1).step_by(2) {
        let dir = root.join(member);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .map_err(|e| format!("{member}/Cargo.toml: {e}"))?;
        if manifest.lines().any(|l| l.trim() == "publish = false") {
            continue;
        }
        let name = manifest
            .lines()
            .find_map(|l| l.trim().strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .ok_or_else(|| format!("{member}/Cargo.toml: no `name = \"...\"` line"))?;
        crates.push((name.to_string(), dir));
    }
    Ok(crates)
}

/// The files every published package carries.
const REQUIRED: [&str; 5] = [
    "Cargo.toml",
    "README.md",
    "CHANGELOG.md",
    "LICENSE-MIT",
    "LICENSE-APACHE",
];

/// For every publishable crate: its package (`cargo package --list`) holds
/// the [`REQUIRED`] files, every source file under `src/`, and every file
/// those include (`include_str!`, `include_bytes!`, `#[path]`), which must
/// lie inside the crate's directory. What a verifying build would catch,
/// without the build.
pub(crate) fn check_packages() -> Result<()> {
    let mut problems = Vec::new();
    for (name, dir) in publishable_crates()? {
        let out = Command::new(cargo())
            .args(["package", "--list", "--allow-dirty", "-p", &name])
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("could not start `cargo package --list -p {name}`: {e}"))?;
        if !out.status.success() {
            return Err(format!("`cargo package --list -p {name}` failed ({})", out.status).into());
        }
        let listed: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        problems.extend(
            package_problems(&dir, &listed)?
                .into_iter()
                .map(|p| format!("{name}: {p}")),
        );
    }
    if problems.is_empty() {
        println!("xtask ci: every package holds the files its sources include");
        Ok(())
    } else {
        for p in &problems {
            eprintln!("xtask ci: {p}");
        }
        Err(format!("{} packaging problem(s), listed above", problems.len()).into())
    }
}

/// What is wrong with the package of the crate in `dir` whose files are
/// `listed` (paths relative to `dir`, `/`-separated).
fn package_problems(dir: &Path, listed: &BTreeSet<String>) -> Result<Vec<String>> {
    let mut problems: Vec<String> = REQUIRED
        .iter()
        .filter(|f| !listed.contains(**f))
        .map(|f| format!("{f} is not in the package"))
        .collect();
    let mut sources = Vec::new();
    rust_files(&dir.join("src"), &mut sources)?;
    sources.sort();
    for source in sources {
        let rel = relative(dir, &source).ok_or("a source outside its crate")?;
        if !listed.contains(&rel) {
            problems.push(format!("{rel} is not in the package"));
        }
        let text = std::fs::read_to_string(&source)?;
        for (line_no, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for target in included_paths(line) {
                let at = format!("{rel}:{}", line_no + 1);
                let resolved = normalize(&source.parent().unwrap_or(dir).join(&target));
                match relative(dir, &resolved) {
                    None => problems.push(format!(
                        "{at} includes {target:?}, outside the package (a published crate \
                         holds only the files under its own directory)"
                    )),
                    Some(inside) if !listed.contains(&inside) => problems.push(format!(
                        "{at} includes {target:?}, which is not in the package"
                    )),
                    Some(_) => {}
                }
            }
        }
    }
    Ok(problems)
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The string literals a line of Rust includes by path:
/// `include_str!("..")`, `include_bytes!("..")`, `#[path = ".."]`.
fn included_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for opener in ["include_str!(\"", "include_bytes!(\"", "#[path = \""] {
        let mut rest = line;
        while let Some(at) = rest.find(opener) {
            rest = &rest[at + opener.len()..];
            if let Some(end) = rest.find('"') {
                found.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    found
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// `path` relative to `dir`, `/`-separated, if it lies under `dir`.
fn relative(dir: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(normalize(dir)).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate directory of its own under the system's temp dir.
    fn scratch_crate(test: &str, lib: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src/sub")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), lib).unwrap();
        std::fs::write(dir.join("src/sub/mod.rs"), "").unwrap();
        dir
    }

    fn listed(extra: &[&str]) -> BTreeSet<String> {
        REQUIRED
            .iter()
            .chain(["src/lib.rs", "src/sub/mod.rs"].iter())
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn an_include_from_outside_the_package_is_refused() {
        // What election-url's lib.rs did before ADR 0042.
        let dir = scratch_crate(
            "outside",
            "#[doc = include_str!(\"../../../README.md\")]\npub struct Readme;\n",
        );
        let problems = package_problems(&dir, &listed(&[])).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .contains("src/lib.rs:1 includes \"../../../README.md\", outside the package"),
            "{problems:?}"
        );
    }

    #[test]
    fn an_include_inside_must_be_packaged_and_required_files_present() {
        let dir = scratch_crate(
            "inside",
            "// include_str!(\"../../nowhere\") in a comment is not read\n\
             #[doc = include_str!(\"../README.md\")] pub struct A;\n\
             const B: &[u8] = include_bytes!(\"sub/../data.bin\");\n",
        );
        let mut files = listed(&[]);
        files.remove("LICENSE-MIT");
        files.remove("src/sub/mod.rs");
        let problems = package_problems(&dir, &files).unwrap();
        assert_eq!(
            problems,
            [
                "LICENSE-MIT is not in the package",
                "src/lib.rs:3 includes \"sub/../data.bin\", which is not in the package",
                "src/sub/mod.rs is not in the package",
            ],
        );
        assert!(
            package_problems(&dir, &listed(&["src/data.bin"]))
                .unwrap()
                .is_empty()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
