//! `elect` against a real nats-server that requires a token (or a user
//! and password): the secret comes from `ELECT_NATS_*` or a file, never
//! shows in `ps` (argv) or in `elect`'s output, is not inherited by
//! COMMAND, and a missing, wrong or doubly given secret is a clear
//! configuration error (78).

use crate::common;

use common::{Elect, Finished, Report, proc_strings};
use nats_testkit::{Auth, Server};
use nix::sys::signal::Signal;

const TOKEN: &str = "s3cr3t-t0ken-4711";
const PASSWORD: &str = "pa55-w0rd-0815";
/// `elect run` flags for every run here.
const TIMING: [&str; 4] = ["--ttl", "3s", "--grace", "1s"];

fn url(server: &Server) -> String {
    format!("{}?single_replica_ok=1", server.url())
}

/// Fails if `secret` shows anywhere in `done`'s output.
fn assert_never_printed(done: &Finished, secret: &str) {
    for line in done.stdout.iter().chain(&done.stderr) {
        assert!(!line.contains(secret), "secret printed: {line:?}");
    }
}

fn run_args<'a>(url: &'a str, name: &'a str, identity: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--backend",
        url,
        "--name",
        name,
        "--identity",
        identity,
    ];
    args.extend(TIMING);
    args.extend(extra);
    args.push("--");
    args
}

fn secret_file(dir: &std::path::Path, name: &str, secret: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{secret}\n")).expect("write the secret file");
    path.display().to_string()
}

#[tokio::test]
async fn a_token_comes_from_the_environment_or_a_file_and_never_shows() {
    let server = Server::start_with_auth(Auth::Token(TOKEN.into())).expect("nats-server");
    let url = url(&server);
    let dir = common::temp_dir();
    let token_file = secret_file(dir.path(), "token", TOKEN);

    // Without the token: refused by the server, said plainly, exit 78.
    for sub in ["leader", "run"] {
        let mut args = vec![sub, "--backend", &url, "--name", "j"];
        if sub == "run" {
            args.extend(["--", "true"]);
        }
        let done = common::once(&args).await;
        assert_eq!(done.code, common::CONFIG, "{sub}: {done:?}");
        done.err_line("refused the credentials: ");
        done.err_line("elect: hint: give the credentials the server expects: ELECT_NATS_TOKEN");
    }

    // From the environment: elected; argv holds no secret, nor does the
    // command's environment.
    let report = Report {
        path: dir.path().join("a.out"),
    };
    let mut args: Vec<String> = run_args(&url, "j", "a", &[])
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.extend(report.worker());
    let mut a = Elect::spawn_with_env(&args, &[("ELECT_NATS_TOKEN", TOKEN)], "run a");
    let started = report.started().await;
    a.err_with("elect: started ").await;
    let argv = proc_strings(a.pid().as_raw(), "cmdline");
    assert!(
        argv.iter().any(|s| s == "run"),
        "not elect's argv: {argv:?}"
    );
    assert!(
        !argv.iter().any(|s| s.contains(TOKEN)),
        "token in argv: {argv:?}"
    );
    let child_env = proc_strings(started.pid, "environ");
    assert!(
        !child_env
            .iter()
            .any(|s| s.contains(TOKEN) || s.starts_with("ELECT_NATS_")),
        "the command inherited the secret: {child_env:?}"
    );
    assert!(child_env.iter().any(|s| s.starts_with("ELECTION_TOKEN=")));

    // From a file: `leader` sees a leading.
    let done = common::once(&[
        "leader",
        "--backend",
        &url,
        "--name",
        "j",
        "--nats-token-file",
        &token_file,
    ])
    .await;
    assert_eq!(done.code, 0, "{done:?}");
    common::assert_led_by(&done.stdout[0], "j", "a", started.epoch);
    assert_never_printed(&done, TOKEN);

    // Both: refused, naming the two sources and not the secret.
    let mut both: Vec<String> = run_args(&url, "j", "b", &["--nats-token-file", &token_file])
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    both.push("true".into());
    let done = Elect::spawn_with_env(&both, &[("ELECT_NATS_TOKEN", TOKEN)], "both")
        .finish()
        .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line(
        "elect: error: the NATS token is given 2 times: by ELECT_NATS_TOKEN and by --nats-token-file",
    );
    assert_never_printed(&done, TOKEN);

    // A wrong token: refused, and the wrong one is not printed either.
    let done = Elect::spawn_with_env(
        &["leader", "--backend", &url, "--name", "j"],
        &[("ELECT_NATS_TOKEN", "wrong-t0ken-123")],
        "wrong",
    )
    .finish()
    .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("refused the credentials");
    assert_never_printed(&done, "wrong-t0ken-123");

    // In the URL it still works, with a warning about ps.
    let in_url = format!("{url}&token={TOKEN}");
    let done = common::once(&["leader", "--backend", &in_url, "--name", "j"]).await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line(
        "elect: warning: the NATS token is in the URL, which other users can read in `ps`",
    );
    assert_never_printed(&done, TOKEN);

    // A credentials file named by ELECT_NATS_CREDS is read (and a
    // missing one said plainly), and with the token refused as a second
    // way of logging in.
    let done = Elect::spawn_with_env(
        &["leader", "--backend", &server.url(), "--name", "j"],
        &[("ELECT_NATS_CREDS", "/nonexistent/elect.creds")],
        "creds",
    )
    .finish()
    .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("cannot read the NATS credentials file /nonexistent/elect.creds");
    let done = Elect::spawn_with_env(
        &["leader", "--backend", &server.url(), "--name", "j"],
        &[
            ("ELECT_NATS_CREDS", "/nonexistent/elect.creds"),
            ("ELECT_NATS_TOKEN", TOKEN),
        ],
        "creds and token",
    )
    .finish()
    .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("two ways of logging in to NATS are given: a token and a credentials file");
    assert_never_printed(&done, TOKEN);

    a.signal(Signal::SIGTERM);
    report.wait_for("term").await;
    let done = a.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    assert_never_printed(&done, TOKEN);
}

#[tokio::test]
async fn a_user_and_password_come_from_the_environment_and_a_file() {
    let server = Server::start_with_auth(Auth::UserPassword {
        user: "app".into(),
        password: PASSWORD.into(),
    })
    .expect("nats-server");
    let url = url(&server);
    let dir = common::temp_dir();
    let password_file = secret_file(dir.path(), "password", PASSWORD);

    let mut args: Vec<String> = run_args(&url, "j", "a", &["--nats-password-file", &password_file])
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.extend(["sh".into(), "-c".into(), "exit 0".into()]);
    let done = Elect::spawn_with_env(&args, &[("ELECT_NATS_USER", "app")], "file")
        .finish()
        .await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line("elect: resigned j, term ");

    let done = Elect::spawn_with_env(
        &[
            "leader",
            "--backend",
            &url,
            "--name",
            "j",
            "--nats-user",
            "app",
        ],
        &[("ELECT_NATS_PASSWORD", PASSWORD)],
        "env",
    )
    .finish()
    .await;
    assert_eq!(done.code, 0, "{done:?}");
    assert_eq!(done.stdout, ["j: no leader"], "{done:?}");

    // A user without a password, and a wrong password.
    let done = Elect::spawn_with_env(
        &["leader", "--backend", &url, "--name", "j"],
        &[("ELECT_NATS_USER", "app")],
        "no password",
    )
    .finish()
    .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("a NATS user is given (by ELECT_NATS_USER) but no password");
    let done = Elect::spawn_with_env(
        &["leader", "--backend", &url, "--name", "j"],
        &[
            ("ELECT_NATS_USER", "app"),
            ("ELECT_NATS_PASSWORD", "nope-nope"),
        ],
        "wrong password",
    )
    .finish()
    .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("refused the credentials");
    assert_never_printed(&done, "nope-nope");
}
