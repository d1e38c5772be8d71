//! `cargo xtask ci`: the checks CI runs, in order, stopping at the first
//! failure; the test runs at the end go side by side (ADR 0056).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{
    Result, cargo_command, plugins, policy, postgres, repo_root, rust_files, target_dir, torture,
};

/// What a step runs.
enum Action {
    /// `cargo ARGS` with the environment it adds.
    Cargo {
        args: Vec<String>,
        env: Vec<(&'static str, &'static str)>,
    },
    /// A check of xtask's own, named.
    Xtask(&'static str, Check),
}

/// One check, and a check of xtask's own that runs after it succeeded.
struct Step {
    action: Action,
    then: Option<fn() -> Result<()>>,
}

impl Step {
    fn cargo(args: &[&str]) -> Self {
        Step {
            action: Action::Cargo {
                args: args.iter().map(|a| a.to_string()).collect(),
                env: Vec::new(),
            },
            then: None,
        }
    }

    fn xtask(name: &'static str, check: fn() -> Result<()>) -> Self {
        Step {
            action: Action::Xtask(name, check),
            then: None,
        }
    }

    fn display(&self) -> String {
        match &self.action {
            Action::Cargo { args, env } => {
                let env: String = env.iter().map(|(k, v)| format!("{k}=\"{v}\" ")).collect();
                format!("{env}cargo {}", args.join(" "))
            }
            Action::Xtask(name, _) => format!("xtask: {name}"),
        }
    }

    fn run(&self) -> Result<()> {
        match &self.action {
            Action::Cargo { args, env } => {
                let status = cargo_command()
                    .args(args)
                    .envs(env.iter().copied())
                    .current_dir(repo_root())
                    .stdin(Stdio::null())
                    .status()
                    .map_err(|e| format!("could not start `{}`: {e}", self.display()))?;
                if !status.success() {
                    return Err(format!("{status}").into());
                }
            }
            Action::Xtask(_, check) => check()?,
        }
        self.then.map_or(Ok(()), |check| check())
    }
}

/// Runs the checks (ADR 0056, 0057, 0069, 0095). First, in order: fmt and
/// the workspace's shape (lints in one place, import cycles, each
/// published crate's drivers, the core's tokio features, the MSRV, licences and duplicate versions),
/// which build nothing. Then two lanes at once:
///
/// - the build checks ([`build_checks`]: clippy of the workspace, of every
///   crate alone and of every published library alone, the packaging of
///   every publishable crate, the docs), as a child process of their own
///   at the idle CPU priority (`SCHED_IDLE`) with their target directory
///   in memory ([`BuildChecks`]), so that they use only
///   the CPU the other lane leaves idle and write nothing to the disk the
///   tests' fsyncs wait on;
/// - the tests and binaries built once, then (PostgreSQL's binaries
///   installed if missing) the tests (nextest) beside the torture suite's
///   short budget and the doc tests.
///
/// Any failure fails CI; a failure of the second lane stops the first.
/// Prints the slowest tests at the end.
pub(crate) fn run() -> Result<()> {
    let started = Instant::now();
    let mut steps = vec![Step::cargo(&["fmt", "--all", "--check"])];
    steps.extend(SHAPE.iter().map(|&(name, check)| Step::xtask(name, check)));
    let nextest = nextest_available();
    if !nextest {
        println!(
            "xtask ci: `cargo nextest --version` failed (cargo-nextest is not installed?); \
             falling back to `cargo test --workspace`"
        );
    }
    // One build of the tests and of every binary they start, torture's and
    // elect's among them: the torture runs below use these (no second
    // build with other features).
    let build = if nextest {
        Step::cargo(&["nextest", "run", "--workspace", "--no-run"])
    } else {
        Step::cargo(&["test", "--workspace", "--no-run"])
    };
    // The shape steps, the build checks, the test build, the tests.
    let total = steps.len() + 3;
    run_steps(&steps, 1, total)?;
    let checks_step = steps.len() + 1;
    println!(
        "xtask ci: [{checks_step}/{total}] the build checks (clippy of the workspace and \
         of each crate alone, packages, docs), beside the next steps at idle priority"
    );
    let checks = BuildChecks::start()?;
    let tests = (|| -> Result<()> {
        run_steps(std::slice::from_ref(&build), checks_step + 1, total)?;
        // The tests start real PostgreSQL servers.
        postgres::ensure()?;
        println!(
            "xtask ci: [{total}/{total}] side by side: the tests, the doc tests, torture --ci"
        );
        let t = Instant::now();
        tests_side_by_side(nextest)
            .map_err(|e| format!("step {total}/{total} (the tests) failed: {e}"))?;
        println!(
            "xtask ci: [{total}/{total}] the tests, doc tests and torture runs: ok in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        Ok(())
    })();
    let checks = match &tests {
        Ok(()) => checks.finish(),
        Err(_) => checks.stop(),
    }
    .map_err(|e| format!("step {checks_step}/{total} (the build checks) failed: {e}"));
    match (tests, checks) {
        (Ok(()), Ok(())) => {}
        (Err(e), Ok(())) => return Err(e),
        (Ok(()), Err(e)) => return Err(e.into()),
        (Err(a), Err(b)) => return Err(format!("{a}; {b}").into()),
    }
    println!(
        "xtask ci: all {total} steps passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `steps` in order, numbered from `first` out of `total`, stopping at
/// the first failure.
fn run_steps(steps: &[Step], first: usize, total: usize) -> Result<()> {
    for (i, step) in steps.iter().enumerate() {
        let n = first + i;
        let shown = step.display();
        println!("xtask ci: [{n}/{total}] {shown}");
        let t = Instant::now();
        let outcome = step.run();
        let secs = t.elapsed().as_secs_f64();
        if let Err(e) = outcome {
            return Err(format!(
                "step {n}/{total} `{shown}` failed ({e}) after {secs:.1} s; \
                 later steps were not run"
            )
            .into());
        }
        println!("xtask ci: [{n}/{total}] {shown}: ok in {secs:.1} s");
    }
    Ok(())
}

/// `cargo xtask build-checks`: the checks that build, in order, stopping
/// at the first failure: clippy with -D warnings of the workspace, of
/// every crate alone and of every published library alone
/// ([`policy::crates_alone`]: each builds with only the features its own
/// manifest asks for, ADR 0085); the packaging of every publishable crate
/// (metadata, versions on internal dependencies, the files a package needs; without verifying
/// builds, which would rebuild every dependency per package:
/// [`check_packages`] catches what they would, ADR 0042); the docs
/// without warnings, and an example on every public function of the
/// library crates. CI runs it beside the test build and the tests (see
/// [`run`]).
pub(crate) fn build_checks() -> Result<()> {
    let mut steps = vec![Step::xtask(
        "clippy -D warnings: the workspace, each crate alone, each published library alone",
        policy::crates_alone,
    )];
    let mut package = Step::cargo(&["package", "--no-verify", "--allow-dirty"]);
    if let Action::Cargo { args, .. } = &mut package.action {
        for (name, _) in publishable_crates()? {
            args.extend(["-p".to_string(), name]);
        }
    }
    package.then = Some(check_packages);
    steps.push(package);
    let mut doc = Step::cargo(&["doc", "--workspace", "--no-deps"]);
    if let Action::Cargo { env, .. } = &mut doc.action {
        env.push(("RUSTDOCFLAGS", "-D warnings"));
    }
    doc.then = Some(check_doc_examples);
    steps.push(doc);
    run_steps(&steps, 1, steps.len())
}

/// The build checks ([`build_checks`]) as CI runs them beside the test
/// build and the tests: this program again (`build-checks`) in the same
/// process group (a Ctrl-C reaches it too), under `chrt --idle 0`
/// (`SCHED_IDLE`: it runs only on a CPU nothing else wants; `nice -n 19`
/// where `chrt` is missing), with
/// its own target directory, in `/dev/shm` where that exists (ADR 0069:
/// on disk, its writes slowed the SQLite tests' fsyncs until short leases
/// expired) and `<target>/checks` elsewhere or when `XTASK_CHECKS_TARGET`
/// names one. Its output goes to a file and is printed when it ends.
struct BuildChecks {
    child: std::process::Child,
    log: PathBuf,
    dir: PathBuf,
    in_memory: bool,
    started: Instant,
}

/// Kills `pid` and every process below it (children first found through
/// `/proc/PID/task/TID/children`), so that no cargo or rustc of a stopped
/// lane runs on.
fn kill_tree(pid: u32) {
    let mut stack = vec![pid];
    let mut all = Vec::new();
    while let Some(p) = stack.pop() {
        all.push(p);
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            stack.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    // Parents first, so that none of them starts another child meanwhile.
    for p in all {
        let _ = Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl BuildChecks {
    fn start() -> Result<Self> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this program to run the build checks: {e}"))?;
        let shm = Path::new("/dev/shm");
        let (dir, in_memory) = match std::env::var_os("XTASK_CHECKS_TARGET") {
            Some(dir) => (PathBuf::from(dir), false),
            None if shm.is_dir() => (
                shm.join(format!("election-ci-checks-{}", std::process::id())),
                true,
            ),
            None => (target_dir().join("checks"), false),
        };
        std::fs::create_dir_all(target_dir())
            .map_err(|e| format!("mkdir -p {}: {e}", target_dir().display()))?;
        let log = target_dir().join("ci-build-checks.log");
        let out = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot open {} twice: {e}", log.display()))?;
        let idle = Command::new("chrt")
            .args(["--idle", "0", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let mut cmd = if idle {
            let mut cmd = Command::new("chrt");
            cmd.args(["--idle", "0"]);
            cmd
        } else {
            let mut cmd = Command::new("nice");
            cmd.args(["-n", "19"]);
            cmd
        };
        cmd.arg(&exe)
            .arg("build-checks")
            .env("CARGO_TARGET_DIR", &dir)
            .env("XTASK_TOOLS_DIR", target_dir().join("tools"))
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = cmd.spawn().map_err(|e| {
            format!(
                "could not start the build checks ({} build-checks): {e}",
                exe.display()
            )
        })?;
        println!(
            "xtask ci: the build checks run as process {} ({}), target {}, output in {}",
            child.id(),
            if idle { "SCHED_IDLE" } else { "nice 19" },
            dir.display(),
            log.display()
        );
        Ok(BuildChecks {
            child,
            log,
            dir,
            in_memory,
            started: Instant::now(),
        })
    }

    /// Waits for the build checks to end, prints their output, and removes
    /// a target directory kept in memory.
    fn finish(mut self) -> Result<()> {
        let status = self.child.wait();
        self.report(status)
    }

    /// Stops the build checks (the other lane failed: CI fails anyway).
    fn stop(mut self) -> Result<()> {
        kill_tree(self.child.id());
        let _ = self.child.wait();
        self.cleanup();
        println!("xtask ci: the build checks were stopped");
        Ok(())
    }

    fn report(&mut self, status: std::io::Result<std::process::ExitStatus>) -> Result<()> {
        let secs = self.started.elapsed().as_secs_f64();
        {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(
                stdout,
                "xtask ci: the build checks ended after {secs:.1} s; their output:"
            );
            let _ = stdout.write_all(&std::fs::read(&self.log).unwrap_or_default());
        }
        self.cleanup();
        let status = status.map_err(|e| format!("waiting for the build checks: {e}"))?;
        if !status.success() {
            return Err(format!("the build checks failed ({status})").into());
        }
        println!("xtask ci: the build checks: ok in {secs:.1} s");
        Ok(())
    }

    fn cleanup(&self) {
        if self.in_memory {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A check of xtask's own.
type Check = fn() -> Result<()>;

/// The checks of the workspace's shape, which build nothing (ADR 0056).
/// The licences and duplicates check (cargo-deny, installed on first use:
/// about 8 s) runs here, in the foreground, not in the build checks' lane
/// at idle priority, where it took 40 s beside the test build and delayed
/// that lane, CI's longest (ADR 0095).
const SHAPE: [(&str, Check); 7] = [
    ("lints in one place", policy::lints_in_one_place),
    (
        "every backend named in two files",
        plugins::every_backend_named_twice_at_most,
    ),
    ("import cycles", policy::cycles),
    ("each backend's driver only", policy::boundaries),
    ("the core without tokio's I/O", policy::core_without_io),
    ("MSRV", policy::msrv),
    (
        "licences and duplicate versions",
        policy::licences_and_duplicates,
    ),
];

/// `cargo xtask check-shape`: the [`SHAPE`] checks, all of them, failing
/// if any failed.
pub(crate) fn check_shape() -> Result<()> {
    let failed: Vec<&str> = SHAPE
        .iter()
        .filter(|(name, check)| {
            println!("xtask check-shape: {name}");
            check()
                .map_err(|e| eprintln!("xtask check-shape: {name}: {e}"))
                .is_err()
        })
        .map(|(name, _)| *name)
        .collect();
    match failed.as_slice() {
        [] => Ok(()),
        _ => Err(format!("failed: {}", failed.join(", ")).into()),
    }
}

/// The test runs, which mostly wait (on timers, servers and child
/// processes), side by side: the tests (nextest, its output live); beside
/// them the torture suite's short budget (each run's output printed
/// whole), on the binaries the build step made, then the doc tests (their
/// output printed whole when they end). Both sides run to the end; any
/// failure fails the step. Then the ten slowest tests.
fn tests_side_by_side(nextest: bool) -> Result<()> {
    let bin_dir = target_dir().join("debug");
    let (tests, torture) = std::thread::scope(|scope| {
        let torture = scope.spawn(|| {
            let torture = torture::ci_prebuilt(&bin_dir);
            let doc = doc_tests();
            match (torture, doc) {
                (Ok(()), doc) => doc,
                (Err(e), Ok(())) => Err(e),
                (Err(a), Err(b)) => Err(format!("{a}; {b}").into()),
            }
        });
        let tests = (|| -> Result<()> {
            let mut cmd = cargo_command();
            if nextest {
                // As many test threads as cores (nextest's default): with
                // twice as many, two SQLite tests with a 900 ms lease lost
                // their term on a loaded machine (ADR 0056).
                cmd.args(["nextest", "run", "--workspace", "--profile", "ci"]);
                cmd.args(["--test-threads", &test_threads().to_string()]);
            } else {
                cmd.args(["test", "--workspace", "--no-fail-fast"]);
            }
            let status = cmd
                .current_dir(repo_root())
                .stdin(Stdio::null())
                .status()
                .map_err(|e| format!("could not start the tests: {e}"))?;
            if nextest {
                // nextest's store is `target/nextest` under the workspace
                // root, whatever CARGO_TARGET_DIR says.
                print_slowest(&repo_root().join("target/nextest/ci/junit.xml"), 10);
            }
            if !status.success() {
                return Err(format!("the tests failed ({status})").into());
            }
            Ok(())
        })();
        let torture = torture
            .join()
            .unwrap_or_else(|_| Err("the torture runs or doc tests panicked".into()));
        (tests, torture)
    });
    match (tests, torture) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(a), Err(b)) => Err(format!("{a}; torture: {b}").into()),
    }
}

/// `cargo test --workspace --doc`, its output printed whole when it ends
/// (it runs beside nextest's live output).
fn doc_tests() -> Result<()> {
    let out = cargo_command()
        .args(["test", "--workspace", "--doc"])
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not start `cargo test --doc`: {e}"))?;
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "xtask ci: cargo test --workspace --doc");
        let _ = stdout.write_all(&out.stderr);
        let _ = stdout.write_all(&out.stdout);
    }
    if !out.status.success() {
        return Err(format!("the doc tests failed ({})", out.status).into());
    }
    Ok(())
}

/// Prints the `n` slowest test cases of nextest's JUnit report, with their
/// times (nothing if the report cannot be read).
fn print_slowest(junit: &Path, n: usize) {
    let Ok(xml) = std::fs::read_to_string(junit) else {
        println!("xtask ci: no JUnit report at {}", junit.display());
        return;
    };
    let mut cases = slowest(&xml);
    cases.truncate(n);
    println!("xtask ci: the {} slowest tests:", cases.len());
    for (secs, name) in cases {
        println!("xtask ci: {secs:>8.1} s  {name}");
    }
}

/// The test cases of a JUnit report, slowest first: (seconds, `classname
/// name`).
fn slowest(xml: &str) -> Vec<(f64, String)> {
    let attr = |tag: &str, key: &str| -> Option<String> {
        let at = tag.find(&format!(" {key}=\""))? + key.len() + 3;
        let end = tag[at..].find('"')?;
        Some(
            tag[at..at + end]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&"),
        )
    };
    let mut cases: Vec<(f64, String)> = xml
        .split("<testcase")
        .skip(1)
        .filter_map(|rest| {
            let tag = &rest[..rest.find('>')?];
            let secs = attr(tag, "time")?.parse::<f64>().ok()?;
            let name = attr(tag, "name")?;
            let class = attr(tag, "classname").unwrap_or_default();
            Some((secs, format!("{class} {name}")))
        })
        .collect();
    cases.sort_by(|a, b| b.0.total_cmp(&a.0));
    cases
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
/// (package name, directory).
fn publishable_crates() -> Result<Vec<(String, PathBuf)>> {
    Ok(policy::members()?
        .into_iter()
        .filter(|m| m.published)
        .map(|m| (m.name, m.dir))
        .collect())
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
        let out = cargo_command()
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
    cargo_command()
        .args(["nextest", "--version"])
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// CI's test threads: one and a half per core (three on CI's two). The
/// tests mostly wait on leases, processes and servers, so one per core left
/// the cores idle (ADR 0077); twice that made tests with short leases lose
/// their terms on a loaded machine (ADR 0056).
fn test_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores * 3).div_ceil(2)
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
    fn the_slowest_tests_come_first() {
        let xml = r#"<testsuite><testcase name="a" classname="x::t" timestamp="z" time="0.095"/>
            <testcase name="b &amp; c" classname="y" time="12.5"><failure/></testcase>
            <testcase name="no time" classname="y"/></testsuite>"#;
        assert_eq!(
            slowest(xml),
            [(12.5, "y b & c".to_string()), (0.095, "x::t a".to_string())]
        );
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
