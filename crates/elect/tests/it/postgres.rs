//! `elect` end to end on a real PostgreSQL server (postgres-testkit, TTL
//! 3 s): takeover after a SIGKILL, a handover after SIGINT, `leader` and
//! `observe`, and a password from `PGPASSWORD` or a passfile that never
//! shows in argv or in elect's output.

use crate::common;

use std::time::Duration;

use common::{Elect, Setup, proc_strings};
use nix::sys::signal::Signal;
use postgres_testkit::Server;

/// A server and the `Setup` the shared scenarios use on it.
struct Pg {
    setup: Setup,
    _server: Server,
}

fn pg() -> Pg {
    let server = Server::start().expect("a PostgreSQL server (apt-get install -y postgresql)");
    let setup = Setup {
        url: format!("{}?schema=elect_test", server.url()),
        timing: vec!["--ttl".into(), "3s".into()],
        hold_window: Duration::from_secs(4),
        dir: common::temp_dir(),
    };
    Pg {
        setup,
        _server: server,
    }
}

#[tokio::test]
async fn a_killed_leader_is_replaced_with_a_higher_epoch() {
    common::takeover(&pg().setup).await;
}

#[tokio::test]
async fn leader_prints_text_and_json() {
    common::leader_output(&pg().setup).await;
}

#[tokio::test]
async fn a_killed_holder_reads_presumed_dead_and_observe_shows_the_vacancy() {
    common::a_killed_holder_reads_presumed_dead(&pg().setup).await;
}

#[tokio::test]
async fn observe_prints_each_change_in_order() {
    common::observe_output(&pg().setup, true).await;
}

#[tokio::test]
async fn no_wait_and_timeout_give_the_conflict_exit_code() {
    common::no_wait(&pg().setup).await;
}

#[tokio::test]
async fn the_command_exit_code_is_elects_and_the_term_is_resigned() {
    common::exit_code(&pg().setup).await;
}

/// A command that records its start (as `Report::once`) and then sleeps
/// until a signal ends it.
fn sleeper(report: &common::Report) -> Vec<String> {
    let mut cmd = report.once();
    cmd[2] = format!("{}; exec sleep 1000", cmd[2]);
    cmd
}

/// Two `elect run`: B waits while A leads; SIGINT to A (forwarded, its
/// command dies of it) ends A's term, and B runs with a higher epoch;
/// `elect leader` names each holder in turn.
#[tokio::test]
async fn sigint_hands_the_election_to_the_next_run() {
    let pg = pg();
    let b = &pg.setup;
    let name = "handover";
    let (ra, rb) = (b.report("a"), b.report("b"));
    let mut a = b.run(name, "a", &[], &sleeper(&ra));
    let sa = ra.started().await;
    a.err_with(&format!("elect: elected: {name}, term {} as a", sa.epoch))
        .await;
    common::assert_led_by(&b.leader_text(name).await, name, "a", sa.epoch);
    let mut bb = b.run(name, "b", &[], &sleeper(&rb));
    bb.err_with(&format!("elect: campaigning for {name} as b on "))
        .await;
    assert!(rb.lines().is_empty(), "B ran while A leads");
    a.signal(Signal::SIGINT);
    let done = a.finish().await;
    assert_eq!(done.code, 128 + Signal::SIGINT as i32, "{done:?}");
    let sb = rb.started().await;
    assert!(
        sb.epoch > sa.epoch,
        "B's epoch {} after A's {}",
        sb.epoch,
        sa.epoch
    );
    bb.err_with(&format!("elect: elected: {name}, term {} as b", sb.epoch))
        .await;
    common::assert_led_by(&b.leader_text(name).await, name, "b", sb.epoch);
    bb.signal(Signal::SIGTERM);
    let done = bb.finish().await;
    assert_eq!(done.code, 128 + Signal::SIGTERM as i32, "{done:?}");
}

const PASSWORD: &str = "pg-s3cr3t-4711";

/// A server that wants a password: `elect` gets it from PGPASSWORD or
/// from a passfile; the password is never in elect's argv
/// (/proc/PID/cmdline) nor in its output; without it, a clear
/// configuration error (78).
#[tokio::test]
async fn the_password_comes_from_pgpassword_or_a_passfile_never_argv() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start_with_password(PASSWORD).expect("a PostgreSQL server");
    let url = server.url_without_password();
    let dir = common::temp_dir();
    let report = dir.path().join("a.out");
    let cmd = format!(
        r#"echo "start $$ $ELECTION_NAME $ELECTION_EPOCH $ELECTION_IDENTITY $ELECTION_TOKEN" >> {}; exec sleep 1000"#,
        report.display()
    );
    let passfile = dir.path().join("pgpass");
    std::fs::write(
        &passfile,
        format!("127.0.0.1:{}:*:postgres:{PASSWORD}\n", server.port()),
    )
    .unwrap();
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let with_passfile = format!("{url}?passfile={}", passfile.display());

    // Without a password: refused by the server, exit 78, a hint.
    let done = common::once(&["leader", "--backend", &url, "--name", "pw"]).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("PGPASSWORD");

    // In the URL it works, with a warning, and is never printed.
    let whole = server.url();
    let done = common::once(&["leader", "--backend", &whole, "--name", "pw"]).await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line("warning: the PostgreSQL password is in the URL");
    for line in done.stdout.iter().chain(&done.stderr) {
        assert!(!line.contains(PASSWORD), "password printed: {line:?}");
    }

    for (i, (backend, env)) in [
        (url.as_str(), vec![("PGPASSWORD", PASSWORD)]),
        (with_passfile.as_str(), vec![]),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("pw{i}");
        let _ = std::fs::remove_file(&report);
        let args = [
            "run",
            "--backend",
            backend,
            "--name",
            &name,
            "--identity",
            "a",
            "--ttl",
            "3s",
            "--",
            "sh",
            "-c",
            &cmd,
        ];
        let mut run = Elect::spawn_with_env(&args, &env, "run");
        run.err_with(&format!("elect: elected: {name}, term "))
            .await;
        let argv = proc_strings(run.pid().as_raw(), "cmdline");
        assert!(argv.iter().any(|a| a == "run"), "{argv:?}");
        assert!(!argv.iter().any(|a| a.contains(PASSWORD)), "{argv:?}");
        let leader = common::once(&["leader", "--backend", &with_passfile, "--name", &name]).await;
        assert_eq!(leader.code, 0, "{leader:?}");
        assert!(leader.stdout[0].contains(" a "), "{leader:?}");
        run.signal(Signal::SIGTERM);
        let done = run.finish().await;
        for line in done.stdout.iter().chain(&done.stderr) {
            assert!(!line.contains(PASSWORD), "password printed: {line:?}");
        }
    }
}

/// An unreachable server: exit 69 (try again later) with a hint, fast.
#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    for sub in [&["leader"][..], &["run", "--no-wait"][..]] {
        let mut args: Vec<&str> = sub.to_vec();
        args.extend(["--backend", &url, "--name", "x"]);
        if sub[0] == "run" {
            args.extend(["--", "true"]);
        }
        let done = common::once(&args).await;
        assert_eq!(done.code, common::UNAVAILABLE, "{done:?}");
        done.err_line("PostgreSQL");
    }
}

/// The `sql` blocks of the README's section on setting PostgreSQL up.
fn setup_sql() -> Vec<String> {
    const README: &str = include_str!("../../../../README.md");
    let start = README
        .find("### Setting PostgreSQL up")
        .expect("the README's PostgreSQL setup section");
    let section = &README[start..];
    let end = section[4..].find("\n## ").map_or(section.len(), |i| i + 4);
    let mut blocks = Vec::new();
    let mut lines = section[..end].lines();
    while let Some(line) = lines.next() {
        if line == "```sql" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            blocks.push(body.join("\n"));
        }
    }
    blocks
}

/// Runs `sql` with psql as `user` in `database` of `server`, stopping at
/// the first error.
fn psql(server: &Server, user: &str, database: &str, sql: &str) {
    use std::io::Write;
    let bin = postgres_testkit::binaries().expect("PostgreSQL's binaries");
    let mut child = std::process::Command::new(bin.tool("psql"))
        .args([
            "-v",
            "ON_ERROR_STOP=1",
            "-X",
            "-q",
            "-h",
            "127.0.0.1",
            "-p",
            &server.port().to_string(),
            "-U",
            user,
            "-d",
            database,
        ])
        .stdin(std::process::Stdio::piped())
        .output_piped()
        .expect("psql starts");
    child
        .stdin
        .take()
        .expect("psql's stdin")
        .write_all(sql.as_bytes())
        .expect("the SQL written");
    let out = child.wait_with_output().expect("psql ends");
    assert!(
        out.status.success(),
        "psql as {user}: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Spawning with stdout and stderr captured.
trait OutputPiped {
    fn output_piped(&mut self) -> std::io::Result<std::process::Child>;
}

impl OutputPiped for std::process::Command {
    fn output_piped(&mut self) -> std::io::Result<std::process::Child> {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
    }
}

/// Issue 43, item 5: the README's roles and grants work as written: the
/// owner's first run creates the schema, a worker role with the grants
/// runs a candidate, a reader role reads the leader, and a role without
/// them is refused at once (78) with a hint naming the grants.
#[tokio::test]
async fn the_readmes_roles_and_grants_work_as_written() {
    let server = Server::start().expect("a PostgreSQL server (apt-get install -y postgresql)");
    let blocks = setup_sql();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    psql(&server, "postgres", "postgres", &blocks[0]);
    psql(
        &server,
        "postgres",
        "postgres",
        "CREATE ROLE app_none LOGIN;",
    );
    let url = |user: &str| format!("postgres://{user}@127.0.0.1:{}/app", server.port());
    let ok = |user: &'static str| {
        let setup = Setup {
            url: url(user),
            timing: vec!["--ttl".into(), "3s".into()],
            hold_window: Duration::from_secs(4),
            dir: common::temp_dir(),
        };
        async move {
            let report = setup.report(user);
            setup.run_to_end("setup", user, &[], &report.once()).await
        }
    };
    let done = ok("app").await;
    assert_eq!(done.code, 0, "the owner's first run: {done:?}");
    psql(&server, "app", "app", &blocks[1]);
    let done = ok("app_worker").await;
    assert_eq!(
        done.code, 0,
        "the worker with the README's grants: {done:?}"
    );
    let read = common::once(&["leader", "--backend", &url("app_reader"), "--name", "setup"]).await;
    assert_eq!(read.code, 0, "the reader: {read:?}");
    let done = ok("app_none").await;
    assert_eq!(
        done.code,
        common::CONFIG,
        "a role without the grants: {done:?}"
    );
    let hint = done.err_line("elect: hint: ");
    assert!(hint.contains("GRANT USAGE ON SCHEMA"), "{hint}");
}

/// `elect revoke` from another process deposes a running leader (ADR 0111).
#[tokio::test]
async fn revoke_stops_the_leader_and_the_next_term_is_above_it() {
    common::revoke(&pg().setup).await;
}

/// `elect run --take-over` and `elect transfer` hand the term to the named
/// successor across processes, with no overlap and no race (ADR 0112).
#[tokio::test]
async fn transfer_hands_the_term_to_the_named_successor() {
    common::transfer(&pg().setup).await;
}

/// A transfer to a candidate that never comes holds the name for the
/// handover window only.
#[tokio::test]
async fn a_transfer_to_nobody_holds_the_name_for_its_window() {
    common::transfer_to_nobody(&pg().setup).await;
}

/// A leader with --yield-to-preferred hands its term to a waiting
/// candidate of a higher --priority, not to one of its own (ADR 0112).
#[tokio::test]
async fn a_leader_yields_to_a_preferred_candidate() {
    common::preference(&pg().setup).await;
}
