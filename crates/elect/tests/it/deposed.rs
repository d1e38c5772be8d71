//! Issue 23, items 6-9: nothing of a deposed term's command runs once the
//! next term's command starts, whichever of `elect`'s processes is killed
//! or stopped (ADR 0049).
//!
//! Every test runs real `elect run` processes whose command starts a
//! daemon that escapes its tree the way daemons do (fork, `setsid`, fork
//! again, close every descriptor, ignore SIGTERM, SIGINT and SIGHUP) and
//! appends `tick` lines to one shared log, as the next leader's command
//! does. Appends to one file are ordered: a `tick a` line after the
//! `start b` line is a write of the deposed term after the next one began.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Elect, LOST, PATIENCE, Setup};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The command: writes `start TAG EPOCH PID`, starts the escaping daemon
/// (`daemon TAG PID`, then `tick TAG N` every 10 ms until the stop file
/// exists), then waits; with mode `ignore` it ignores SIGTERM.
const ESCAPER: &str = r#"
use strict;
use POSIX ();
my ($log, $tag, $stop, $mode) = @ARGV;
sub put { my ($l) = @_; open(my $f, '>>', $log) or return; syswrite($f, "$l\n"); close($f); }
put("start $tag $ENV{ELECTION_EPOCH} $$");
my $pid = fork();
if (defined $pid && $pid == 0) {
    POSIX::setsid();
    my $again = fork();
    POSIX::_exit(0) if !defined $again || $again != 0;
    $SIG{$_} = 'IGNORE' for qw(TERM INT HUP);
    POSIX::close($_) for 0 .. 1023;
    put("daemon $tag $$");
    my $i = 0;
    until (-e $stop) { put("tick $tag $i"); $i++; select(undef, undef, undef, 0.01); }
    POSIX::_exit(0);
}
waitpid($pid, 0);
$SIG{TERM} = 'IGNORE' if $mode eq 'ignore';
sleep 1 until -e $stop;
"#;

/// One scenario's shared log and stop file; dropping it stops every
/// daemon that is left (also after a failed assertion).
struct Scene {
    log: PathBuf,
    stop: PathBuf,
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.stop, "");
    }
}

impl Scene {
    fn new(b: &Setup) -> Scene {
        Scene {
            log: b.dir.path().join("log"),
            stop: b.dir.path().join("stop"),
        }
    }

    /// The escaping command for candidate `tag`.
    fn command(&self, tag: &str, mode: &str) -> Vec<String> {
        vec![
            "perl".into(),
            "-e".into(),
            ESCAPER.into(),
            self.log.display().to_string(),
            tag.into(),
            self.stop.display().to_string(),
            mode.into(),
        ]
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits until a line starting with `prefix` is in the log; the line.
    async fn wait_for(&self, prefix: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(l) = self.lines().into_iter().find(|l| l.starts_with(prefix)) {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no {prefix:?} in the log within {PATIENCE:?}: {:?}",
                self.lines().iter().rev().take(5).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The pid of `tag`'s daemon.
    async fn daemon(&self, tag: &str) -> i32 {
        let line = self.wait_for(&format!("daemon {tag} ")).await;
        line.rsplit(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("pid")
    }

    /// Once B's command started and its daemon wrote 30 ticks after that:
    /// the lines A wrote after B's start.
    async fn a_after_b_started(&self) -> Vec<String> {
        self.wait_for("start b ").await;
        let deadline = Instant::now() + PATIENCE;
        loop {
            let lines = self.lines();
            let from = lines
                .iter()
                .position(|l| l.starts_with("start b "))
                .expect("start b");
            let after = &lines[from..];
            if after.iter().filter(|l| l.starts_with("tick b ")).count() >= 30 {
                return after
                    .iter()
                    .filter(|l| l.ends_with(" a") || l.contains(" a "))
                    .cloned()
                    .collect();
            }
            assert!(Instant::now() < deadline, "B's daemon did not tick");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// `elect run` of candidate `identity` with `extra` flags and `env`; in a
/// process group of its own if `own_group` (so that the group can be
/// stopped or killed without the test).
fn run(
    b: &Setup,
    name: &str,
    identity: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    own_group: bool,
    command: &[String],
) -> Elect {
    run_via(
        &Reach::of(b),
        b,
        name,
        identity,
        extra,
        env,
        own_group,
        command,
    )
}

/// How a candidate reaches the backend: the URL it is given, and a
/// command `elect` runs under (e.g. a mount namespace with a bind mount).
struct Reach {
    url: String,
    wrapper: Vec<String>,
}

impl Reach {
    /// As `b` says, directly.
    fn of(b: &Setup) -> Reach {
        Reach {
            url: b.url.clone(),
            wrapper: Vec::new(),
        }
    }

    /// With `url`, in a mount namespace of its own where `dir` is bind
    /// mounted on `at` (made first): one directory under two paths, as a
    /// container's volume is.
    fn bind_mounted(url: String, dir: &Path, at: &Path) -> Reach {
        std::fs::create_dir_all(at).expect("the mount point");
        let script = format!(
            "mount --bind '{}' '{}' && exec \"$0\" \"$@\"",
            dir.display(),
            at.display()
        );
        Reach {
            url,
            wrapper: [
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ]
            .map(str::to_owned)
            .to_vec(),
        }
    }
}

/// [`run`], reaching the backend as `reach` says.
#[allow(clippy::too_many_arguments)]
fn run_via(
    reach: &Reach,
    b: &Setup,
    name: &str,
    identity: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    own_group: bool,
    command: &[String],
) -> Elect {
    let mut args: Vec<String> = ["run", "--backend", &reach.url, "--name", name]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.extend(["--identity".to_owned(), identity.to_owned()]);
    args.extend(b.timing.iter().cloned());
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push("--".into());
    args.extend(command.iter().cloned());
    let mut cmd = match reach.wrapper.split_first() {
        None => tokio::process::Command::new(common::BIN),
        Some((program, rest)) => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(rest).arg(common::BIN);
            cmd
        }
    };
    cmd.args(&args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    if own_group {
        cmd.process_group(0);
    }
    Elect::start(cmd, &format!("run {identity}"))
}

/// The only child of `elect` (its supervisor).
fn supervisor_of(elect: &Elect) -> Pid {
    let pid = elect.pid().as_raw();
    let children: Vec<i32> = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    assert_eq!(children.len(), 1, "elect's children: {children:?}");
    Pid::from_raw(children[0])
}

fn no_cgroup() -> [(&'static str, &'static str); 1] {
    [("ELECT_CGROUP_PARENT", "none")]
}

/// Asserts that nothing of A ran after B's command started, and that A's
/// daemon is gone.
async fn assert_nothing_of_a_beside_b(scene: &Scene, daemon_a: i32, what: &str) {
    let late = scene.a_after_b_started().await;
    assert!(
        late.is_empty(),
        "{what}: A's processes wrote {} lines after B's command started: {:?}",
        late.len(),
        late.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        !common::alive(daemon_a),
        "{what}: A's escaped daemon {daemon_a} still runs"
    );
}

/// Ends B: SIGTERM, forwarded to its command (which dies of it: 143);
/// its daemon ignores it and gets SIGKILL a kill grace later.
async fn end_b(bb: Elect) {
    bb.signal(Signal::SIGTERM);
    let done = bb.finish().await;
    assert_eq!(done.code, 128 + Signal::SIGTERM as i32, "{done:?}");
}

/// Item 6: the supervisor alone is SIGKILLed. `elect` must stop the
/// tree itself (it is a child subreaper: the tree re-parents to it) before
/// it gives the term up; with `cgroups` false neither A nor B has a cgroup,
/// so nothing but A's own `elect` can stop A's daemon.
async fn supervisor_killed_alone(b: &Setup, cgroups: bool) {
    let name = "sup-killed";
    let scene = Scene::new(b);
    let env: &[(&str, &str)] = if cgroups { &[] } else { &no_cgroup() };
    // The file backend's default kill grace is 10 s; the lease backends'
    // follows the TTL.
    let grace: &[&str] = if b.timing.is_empty() {
        &["--kill-grace", "1s"]
    } else {
        &[]
    };
    let mut a = run(b, name, "a", grace, env, false, &scene.command("a", "stay"));
    a.err_with("elect: started ").await;
    let daemon_a = scene.daemon("a").await;
    let mut bb = run(b, name, "b", grace, env, false, &scene.command("b", "stay"));
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    kill(supervisor_of(&a), Signal::SIGKILL).expect("kill the supervisor");
    let done = a.finish().await;
    assert_nothing_of_a_beside_b(&scene, daemon_a, "supervisor SIGKILLed").await;
    assert_eq!(done.code, 70, "{done:?}");
    if !cgroups {
        done.err_line("warning: the command's processes get no cgroup (ELECT_CGROUP_PARENT=none)");
    }
    end_b(bb).await;
}

#[tokio::test]
async fn file_a_killed_supervisor_gives_the_term_up_only_after_the_tree_is_gone() {
    supervisor_killed_alone(&Setup::file(), true).await;
}

#[tokio::test]
async fn file_a_killed_supervisor_without_cgroups_elect_stops_the_tree_itself() {
    supervisor_killed_alone(&Setup::file(), false).await;
}

#[tokio::test]
async fn sqlite_a_killed_supervisor_gives_the_term_up_only_after_the_tree_is_gone() {
    supervisor_killed_alone(&Setup::sqlite(), true).await;
}

#[tokio::test]
async fn sqlite_a_killed_supervisor_without_cgroups_elect_stops_the_tree_itself() {
    supervisor_killed_alone(&Setup::sqlite(), false).await;
}

/// The claim file of election `name` on the file backend.
fn claim_file(b: &Setup, name: &str) -> PathBuf {
    let dir = b.url.strip_prefix("file://").expect("a file URL");
    Path::new(dir).join(format!("{name}.lock"))
}

/// Item 7: the supervisor alone is stopped, then the term is lost (the
/// claim file deleted: the file backend reports the loss within its
/// tamper check). `elect` must not wait forever for the stopped
/// supervisor: it stops the tree itself and exits 79; B's command, which
/// may begin as soon as the file is gone, starts only after A's tree is
/// killed (B ends A's cgroup first).
#[tokio::test]
async fn file_a_stopped_supervisor_does_not_keep_the_tree_running_after_a_loss() {
    let b = Setup::file();
    let name = "sup-stopped";
    let scene = Scene::new(&b);
    let mut a = run(
        &b,
        name,
        "a",
        &["--kill-grace", "1s"],
        &[],
        false,
        &scene.command("a", "stay"),
    );
    a.err_with("elect: started ").await;
    let daemon_a = scene.daemon("a").await;
    let mut bb = run(
        &b,
        name,
        "b",
        &["--kill-grace", "1s"],
        &[],
        false,
        &scene.command("b", "stay"),
    );
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    let sup = supervisor_of(&a);
    kill(sup, Signal::SIGSTOP).expect("stop the supervisor");
    std::fs::remove_file(claim_file(&b, name)).expect("delete the claim file");
    let done = a.finish().await;
    assert_eq!(done.code, LOST, "{done:?}");
    done.err_line("the supervisor of the command did not stop it by its deadline");
    assert_nothing_of_a_beside_b(&scene, daemon_a, "supervisor stopped, then a loss").await;
    end_b(bb).await;
}

/// Item 8: `elect`, its supervisor and the command stopped together (a
/// stopped process group: Ctrl-Z, SIGSTOP of the group); the lease lapses
/// and B wins after the TTL. A's daemon, outside the group, must not run
/// once B's command starts: B kills A's cgroup first. Continued, A says
/// the term was lost (79).
#[tokio::test]
async fn sqlite_a_stopped_group_leaves_no_escaped_daemon_beside_the_next_term() {
    let b = Setup::sqlite();
    let name = "group-stopped";
    let scene = Scene::new(&b);
    let mut a = run(&b, name, "a", &[], &[], true, &scene.command("a", "stay"));
    a.err_with("elect: started ").await;
    let daemon_a = scene.daemon("a").await;
    let mut bb = run(&b, name, "b", &[], &[], false, &scene.command("b", "stay"));
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    let group = a.pid();
    killpg(group, Signal::SIGSTOP).expect("stop A's group");
    assert_nothing_of_a_beside_b(&scene, daemon_a, "group stopped").await;
    bb.err_with("processes of the earlier term").await;
    killpg(group, Signal::SIGCONT).expect("continue A's group");
    let done = a.finish().await;
    assert_eq!(done.code, LOST, "{done:?}");
    end_b(bb).await;
}

/// Item 8, the second half: `elect`, its supervisor and the command
/// SIGKILLed together. The daemon closed its copy of the lock (file
/// backend) and of the same-host lock (SQLite), so B wins at once; it
/// kills A's cgroup before its command starts.
async fn group_killed(b: &Setup) {
    group_killed_reached(b, &Reach::of(b), &Reach::of(b)).await;
}

/// [`group_killed`] with A and B reaching the one election as `reach_a`
/// and `reach_b` say (issue 40, item 1): B must find A's group however
/// the backend was written.
async fn group_killed_reached(b: &Setup, reach_a: &Reach, reach_b: &Reach) {
    let name = "group-killed";
    let scene = Scene::new(b);
    let grace: &[&str] = if b.timing.is_empty() {
        &["--kill-grace", "1s"]
    } else {
        &[]
    };
    let a_cmd = scene.command("a", "stay");
    let mut a = run_via(reach_a, b, name, "a", grace, &[], true, &a_cmd);
    a.err_with("elect: started ").await;
    let daemon_a = scene.daemon("a").await;
    let b_cmd = scene.command("b", "stay");
    let mut bb = run_via(reach_b, b, name, "b", grace, &[], false, &b_cmd);
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    killpg(a.pid(), Signal::SIGKILL).expect("kill A's group");
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    assert_nothing_of_a_beside_b(&scene, daemon_a, "group SIGKILLed").await;
    bb.err_with("processes of the earlier term").await;
    end_b(bb).await;
}

/// Issue 40, item 3: A's command guards a sub-job with an `elect run` of
/// its own (a nested run), whose command starts the escaping daemon. When
/// A's whole group is SIGKILLed (the outer and the inner `elect`, their
/// supervisors, the commands), the next outer winner's start must end the
/// inner job too: it runs inside A's term, not beside it.
#[tokio::test]
async fn file_a_killed_group_ends_the_job_of_a_nested_run_too() {
    let b = Setup::file();
    let name = "nested-outer";
    let scene = Scene::new(&b);
    let grace = ["--kill-grace", "1s"];
    let mut inner: Vec<String> = [
        common::BIN,
        "run",
        "--backend",
        &b.url,
        "--name",
        "nested-inner",
    ]
    .map(str::to_owned)
    .to_vec();
    inner.extend(["--identity", "a-inner", "--kill-grace", "1s", "--"].map(str::to_owned));
    inner.extend(scene.command("a", "stay"));
    let mut a = run(&b, name, "a", &grace, &[], true, &inner);
    a.err_with("elect: started ").await;
    let daemon_a = scene.daemon("a").await;
    let mut bb = run(
        &b,
        name,
        "b",
        &grace,
        &[],
        false,
        &scene.command("b", "stay"),
    );
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    killpg(a.pid(), Signal::SIGKILL).expect("kill A's group");
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    assert_nothing_of_a_beside_b(&scene, daemon_a, "outer group SIGKILLed").await;
    end_b(bb).await;
}

/// Issue 40, item 4: a successor that cannot end the predecessor's group
/// (it has no cgroup of its own: `ELECT_CGROUP_PARENT=none` here, not
/// root elsewhere) says so and starts its command only once that group is
/// empty, never beside it.
async fn successor_without_a_cgroup_waits_for_the_leftovers(b: &Setup) {
    let name = "no-cgroup-successor";
    let scene = Scene::new(b);
    let grace: &[&str] = if b.timing.is_empty() {
        &["--kill-grace", "1s"]
    } else {
        &[]
    };
    let mut a = run(b, name, "a", grace, &[], true, &scene.command("a", "stay"));
    a.err_with("elect: started ").await;
    let daemon_a = scene.daemon("a").await;
    let b_cmd = scene.command("b", "stay");
    let mut bb = run(b, name, "b", grace, &no_cgroup(), false, &b_cmd);
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    killpg(a.pid(), Signal::SIGKILL).expect("kill A's group");
    assert_eq!(a.killed().await, Signal::SIGKILL as i32);
    bb.err_with("which this elect cannot end").await;
    assert!(
        !scene.lines().iter().any(|l| l.starts_with("start b ")),
        "B started beside A's daemon: {:?}",
        scene.lines().iter().rev().take(3).collect::<Vec<_>>()
    );
    assert!(common::alive(daemon_a), "A's daemon ended by itself");
    kill(Pid::from_raw(daemon_a), Signal::SIGKILL).expect("end A's daemon");
    assert_nothing_of_a_beside_b(&scene, daemon_a, "successor without a cgroup").await;
    bb.err_with("are gone: starting the command").await;
    end_b(bb).await;
    // A's emptied group is still there (B has no cgroup to end it with):
    // a later candidate with one ends it and removes the directory.
    common::after_a_dead_holder(b, name, 0).await;
}

#[tokio::test]
async fn file_a_successor_without_a_cgroup_waits_for_the_leftovers() {
    successor_without_a_cgroup_waits_for_the_leftovers(&Setup::file()).await;
}

#[tokio::test]
async fn sqlite_a_successor_without_a_cgroup_waits_for_the_leftovers() {
    successor_without_a_cgroup_waits_for_the_leftovers(&Setup::sqlite()).await;
}

/// The file backend's directory under a second path (a bind mount, in
/// B's own mount namespace): one election, so B ends A's term's group.
#[tokio::test]
async fn file_a_killed_group_is_ended_by_a_successor_through_a_bind_mount() {
    let b = Setup::file();
    let dir = b.dir.path().join("elections");
    std::fs::create_dir_all(&dir).expect("the election directory");
    let at = b.dir.path().join("mnt");
    let url = election_url::BackendUrl::file(at.clone()).to_string();
    let reach_b = Reach::bind_mounted(url, &dir, &at);
    group_killed_reached(&b, &Reach::of(&b), &reach_b).await;
}

/// The SQLite database's directory under a second path (a bind mount).
#[tokio::test]
async fn sqlite_a_killed_group_is_ended_by_a_successor_through_a_bind_mount() {
    let b = Setup::sqlite();
    let db = PathBuf::from(b.url.strip_prefix("sqlite://").expect("a sqlite URL"));
    let dir = db.parent().expect("the database's directory").to_path_buf();
    let at = dir.with_extension("mnt");
    let url = election_url::BackendUrl::new(election_sqlite::SqliteUrl::new(
        at.join(db.file_name().expect("a file")),
    ))
    .to_string();
    let reach_b = Reach::bind_mounted(url, &dir, &at);
    group_killed_reached(&b, &Reach::of(&b), &reach_b).await;
    let _ = std::fs::remove_dir(&at);
}

/// PostgreSQL as `localhost` for A and `127.0.0.1` for B.
#[tokio::test]
async fn postgres_a_killed_group_is_ended_by_a_successor_under_another_host_name() {
    let server = postgres_testkit::Server::start().expect("a PostgreSQL server");
    let b = Setup {
        url: format!("{}?schema=elect_spellings", server.url()),
        timing: vec!["--ttl".into(), "3s".into()],
        hold_window: Duration::from_secs(4),
        dir: common::temp_dir(),
    };
    assert!(b.url.contains("@127.0.0.1:"), "{}", b.url);
    let reach_a = Reach {
        url: b.url.replace("@127.0.0.1:", "@localhost:"),
        wrapper: Vec::new(),
    };
    group_killed_reached(&b, &reach_a, &Reach::of(&b)).await;
}

/// NATS as `localhost` for A and `127.0.0.1` for B.
#[tokio::test]
async fn nats_a_killed_group_is_ended_by_a_successor_under_another_host_name() {
    let server = nats_testkit::Server::start().expect("nats-server");
    let b = Setup::nats(&server.url(), &["--ttl", "3s", "--grace", "1s"]);
    assert!(b.url.contains("127.0.0.1:"), "{}", b.url);
    let reach_a = Reach {
        url: b.url.replace("127.0.0.1:", "localhost:"),
        wrapper: Vec::new(),
    };
    group_killed_reached(&b, &reach_a, &Reach::of(&b)).await;
}

#[tokio::test]
async fn file_a_killed_group_leaves_no_escaped_daemon_beside_the_next_term() {
    group_killed(&Setup::file()).await;
}

#[tokio::test]
async fn sqlite_a_killed_group_leaves_no_escaped_daemon_beside_the_next_term() {
    group_killed(&Setup::sqlite()).await;
}

/// Item 9: a command that ignores the forwarded SIGTERM gets SIGKILL
/// (with every process it started) a kill grace later, and `elect` gives
/// the term up: it does not lead forever.
async fn sigterm_escalates(b: &Setup) {
    let name = "term-ignored";
    let scene = Scene::new(b);
    let grace: &[&str] = if b.timing.is_empty() {
        &["--kill-grace", "1s"]
    } else {
        &[]
    };
    let mut a = run(
        b,
        name,
        "a",
        grace,
        &[],
        false,
        &scene.command("a", "ignore"),
    );
    a.err_with("elect: started ").await;
    let daemon_a = scene.daemon("a").await;
    let mut bb = run(b, name, "b", grace, &[], false, &scene.command("b", "stay"));
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    a.signal(Signal::SIGTERM);
    let done = a.finish().await;
    assert_eq!(done.code, 128 + Signal::SIGKILL as i32, "{done:?}");
    done.err_line("the command did not exit within --kill-grace (");
    done.err_line(&format!("elect: resigned {name}, term "));
    assert_nothing_of_a_beside_b(&scene, daemon_a, "SIGTERM ignored").await;
    end_b(bb).await;
}

#[tokio::test]
async fn file_sigterm_to_elect_escalates_to_sigkill_after_the_kill_grace() {
    sigterm_escalates(&Setup::file()).await;
}

#[tokio::test]
async fn sqlite_sigterm_to_elect_escalates_to_sigkill_after_the_kill_grace() {
    sigterm_escalates(&Setup::sqlite()).await;
}

/// Where no cgroup can be used, `elect run` says so (and why) at the start
/// of its campaign, and runs the command as before.
#[tokio::test]
async fn without_a_cgroup_elect_run_warns_at_start() {
    let b = Setup::file();
    let r = b.report("a");
    let parent = b.dir.path().join("not-a-cgroup");
    let parent = parent.display().to_string();
    let mut args: Vec<String> = ["run", "--backend", &b.url, "--name", "plain", "--"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.extend(r.once());
    let done = Elect::spawn_with_env(&args, &[("ELECT_CGROUP_PARENT", &parent)], "run")
        .finish()
        .await;
    assert_eq!(done.code, 0, "{done:?}");
    let warning = done.err_line("elect: warning: the command's processes get no cgroup (");
    assert!(
        warning.contains(&format!("{parent} is not on a cgroup2 file system")),
        "{warning}"
    );
    assert!(warning.contains("ELECTION_TOKEN"), "{warning}");
    assert!(
        !std::path::Path::new(&parent).exists(),
        "elect created a directory outside cgroup2"
    );
    assert_eq!(r.lines().len(), 1, "the command did not run: {done:?}");
}
