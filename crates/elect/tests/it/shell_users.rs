//! What shell users expect from flock(1), consul lock and etcdctl lock:
//! `-c 'shell string'`, `--verbose` that shows renewals (SQLite, NATS),
//! and a man page and completions generated from the command line.

use crate::common;

use common::{Setup, json, once};
use nix::sys::signal::Signal;

#[tokio::test]
async fn dash_c_runs_a_shell_string_under_the_term() {
    let b = Setup::file();
    let out = b.dir.path().join("c.out");
    let script = format!(
        "echo \"one $ELECTION_NAME $ELECTION_TOKEN\" >> '{p}' && echo two >> '{p}'; false || exit 5",
        p = out.display()
    );
    let done = once(&["run", "--backend", &b.url, "--name", "c", "-c", &script]).await;
    assert_eq!(done.code, 5, "{done:?}");
    let epoch = common::elected_epoch(&done);
    done.err_line("elect: started \"/bin/sh -c echo ");
    let lines = std::fs::read_to_string(&out).expect("the shell string ran");
    assert_eq!(lines, format!("one c {epoch}\ntwo\n"));
    done.err_line(&format!("elect: resigned c, term {epoch}"));

    // The long form, and the same in JSON.
    let done = once(&[
        "run",
        "--backend",
        &b.url,
        "--name",
        "c",
        "--json",
        "--command",
        "exit 0",
    ])
    .await;
    assert_eq!(done.code, 0, "{done:?}");

    // -c and a COMMAND, or neither: usage errors, nothing run.
    for args in [
        vec![
            "run",
            "--backend",
            &b.url,
            "--name",
            "c",
            "-c",
            "true",
            "--",
            "true",
        ],
        vec!["run", "--backend", &b.url, "--name", "c"],
    ] {
        let done = once(&args).await;
        assert_eq!(done.code, common::USAGE, "{args:?}: {done:?}");
    }
}

/// `elect run -v` (text and `--json`) on `b` shows the library's
/// `renewed` events of the term it runs.
async fn verbose_shows_renewals(b: &Setup) {
    let r = b.report("v");
    let mut run = b.run("verbose", "a", &["-v"], &r.worker());
    let s = r.started().await;
    run.err_with(&format!(
        "elect: info: elected name=verbose identity=a epoch={}",
        s.epoch
    ))
    .await;
    let renewed = format!(
        "elect: debug: renewed name=verbose identity=a epoch={}",
        s.epoch
    );
    run.err_with(&renewed).await;
    // A second one: each renewal shows.
    run.err_with(&renewed).await;
    run.signal(Signal::SIGTERM);
    let done = run.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    done.err_line("elect: info: resigned name=verbose");

    let rj = b.report("vj");
    let mut run = b.run("verbose", "b", &["-v", "--json"], &rj.worker());
    let s = rj.started().await;
    let line = run
        .err_until("a renewed event", |l| l.contains("\"renewed\""))
        .await;
    let v = json(&line);
    assert_eq!(v["event"], "log", "{v}");
    assert_eq!(v["level"], "debug", "{v}");
    assert_eq!(v["message"], "renewed", "{v}");
    assert_eq!(v["epoch"], s.epoch, "{v}");
    assert_eq!(v["identity"], "b", "{v}");
    run.signal(Signal::SIGTERM);
    let done = run.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    for line in &done.stderr {
        json(line);
    }

    // Without -v: none of the library's events.
    let rq = b.report("q");
    let done = b.run_to_end("verbose", "c", &[], &rq.once()).await;
    assert_eq!(done.code, 0, "{done:?}");
    assert!(
        !done
            .stderr
            .iter()
            .any(|l| l.contains("debug:") || l.contains("info:")),
        "{done:?}"
    );
}

#[tokio::test]
async fn verbose_shows_renewals_on_sqlite() {
    verbose_shows_renewals(&Setup::sqlite()).await;
}

#[tokio::test]
async fn verbose_shows_renewals_on_nats() {
    let s = nats_testkit::Server::start().expect("nats-server");
    let url = format!("{}?single_replica_ok=1", s.url());
    verbose_shows_renewals(&Setup::nats(&url, &["--ttl", "3s", "--grace", "1s"])).await;
}

#[tokio::test]
async fn verbose_and_quiet_together_are_a_usage_error() {
    let b = Setup::file();
    let done = once(&[
        "run",
        "--backend",
        &b.url,
        "--name",
        "v",
        "-q",
        "-v",
        "--",
        "true",
    ])
    .await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    done.err_line("error: the argument '--quiet' cannot be used with '--verbose...'");
}

#[tokio::test]
async fn the_man_pages_are_generated_and_name_every_subcommand() {
    let done = once(&["man"]).await;
    assert_eq!(done.code, 0, "{done:?}");
    let page = done.stdout.join("\n");
    assert!(page.contains(".TH elect 1"), "{page}");
    for sub in ["run", "leader", "observe", "repair\\-epoch", "completions"] {
        assert!(
            page.contains(&format!("elect\\-{sub}(1)")),
            "no {sub}: {page}"
        );
    }
    let done = once(&["man", "run"]).await;
    assert_eq!(done.code, 0, "{done:?}");
    let page = done.stdout.join("\n");
    assert!(page.contains(".TH elect-run 1"), "{page}");
    assert!(page.contains("ELECTION_TOKEN"), "{page}");
    assert!(page.contains("ELECT_NATS_TOKEN"), "{page}");

    let dir = common::temp_dir();
    let man1 = dir.path().join("man1");
    let done = once(&["man", "--dir", &man1.display().to_string()]).await;
    assert_eq!(done.code, 0, "{done:?}");
    for page in [
        "elect",
        "elect-run",
        "elect-leader",
        "elect-observe",
        "elect-repair-epoch",
    ] {
        let text = std::fs::read_to_string(man1.join(format!("{page}.1")))
            .unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(text.contains(&format!(".TH {page} 1")), "{page}: {text}");
    }
    let done = once(&["man", "nosuch"]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
}

#[tokio::test]
async fn completions_are_generated_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let done = once(&["completions", shell]).await;
        assert_eq!(done.code, 0, "{shell}: {done:?}");
        let script = done.stdout.join("\n");
        for word in [
            "run",
            "leader",
            "observe",
            "repair-epoch",
            "nats-token-file",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    let done = once(&["completions", "tcsh"]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    // bash accepts the script.
    let done = once(&["completions", "bash"]).await;
    let dir = common::temp_dir();
    let path = dir.path().join("elect.bash");
    std::fs::write(&path, done.stdout.join("\n")).expect("write");
    let status = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .status()
        .expect("bash");
    assert!(status.success(), "bash -n rejects the completion script");
}
