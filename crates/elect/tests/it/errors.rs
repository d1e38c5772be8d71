//! `elect`'s errors: usage, configuration, an unreachable backend, a
//! command that cannot run: the documented exit code, a hint, and with
//! `--json` one JSON object.

use crate::common;

use common::{Setup, once};

/// A local port nothing listens on.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[tokio::test]
async fn a_bad_url_is_a_configuration_error_with_a_hint() {
    for url in [
        "nowhere",
        "ftp://x",
        "file://relative",
        "nats://host",
        "nats://h:4222?colour=red",
    ] {
        for sub in ["run", "leader", "observe"] {
            let mut args = vec![sub, "--backend", url, "--name", "j"];
            if sub == "run" {
                args.extend(["--", "true"]);
            }
            let done = once(&args).await;
            assert_eq!(done.code, common::CONFIG, "{sub} {url}: {done:?}");
            assert!(done.stdout.is_empty(), "{done:?}");
            assert_eq!(done.stderr.len(), 2, "{done:?}");
            assert!(
                done.stderr[0].starts_with(&format!("elect: error: bad backend URL {url:?}: ")),
                "{done:?}"
            );
            assert!(done.stderr[1].starts_with("elect: hint: "), "{done:?}");
        }
    }
}

#[tokio::test]
async fn json_errors_are_one_object_with_the_exit_code() {
    let port = free_port();
    let nats = format!("nats://127.0.0.1:{port}");
    for (url, code) in [
        ("nowhere", common::CONFIG),
        (nats.as_str(), common::UNAVAILABLE),
    ] {
        for sub in ["run", "leader"] {
            let mut args = vec![sub, "--backend", url, "--name", "j", "--json"];
            if sub == "run" {
                // Without --no-wait, a server down is waited for (ADR 0064).
                args.extend(["--no-wait", "--", "true"]);
            }
            let done = once(&args).await;
            assert_eq!(done.code, code, "{done:?}");
            assert_eq!(done.stderr.len(), 1, "{done:?}");
            let v = common::json(&done.stderr[0]);
            assert_eq!(v["event"], "error", "{v}");
            assert_eq!(v["exit_code"], code, "{v}");
            assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
            assert!(v["hint"].as_str().is_some_and(|h| !h.is_empty()), "{v}");
            assert!(v["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
        }
    }
}

#[tokio::test]
async fn an_unreachable_nats_server_is_unavailable() {
    let url = format!("nats://127.0.0.1:{}", free_port());
    for sub in ["run", "leader", "observe"] {
        let mut args = vec![sub, "--backend", &url, "--name", "j"];
        if sub == "run" {
            // Without --no-wait, a server down is waited for (ADR 0064;
            // tests/server_down.rs).
            args.extend(["--no-wait", "--", "true"]);
        }
        let done = once(&args).await;
        assert_eq!(done.code, common::UNAVAILABLE, "{sub}: {done:?}");
        done.err_line(&format!("elect: error: cannot connect to NATS at {url}"));
        done.err_line("elect: hint: ");
    }
}

#[tokio::test]
async fn usage_errors_exit_64() {
    for args in [
        &["run", "--", "true"][..], // no --name
        &["run", "--name", "j"],    // no command
        &[
            "run",
            "--name",
            "j",
            "--no-wait",
            "--timeout",
            "1s",
            "--",
            "true",
        ],
        &["run", "--name", "j", "--ttl", "15", "--", "true"], // no unit
        &["leader"],
        &["frobnicate"],
    ] {
        let done = once(args).await;
        assert_eq!(done.code, common::USAGE, "{args:?}: {done:?}");
    }
    let done = once(&["--help"]).await;
    assert_eq!(done.code, 0, "{done:?}");
    assert!(
        done.stdout.iter().any(|l| l.contains("79 term lost")),
        "{done:?}"
    );
}

/// A bad `--name` or `--identity` is a usage error (64), like any other
/// bad flag value, said before anything is opened.
#[tokio::test]
async fn a_bad_name_or_identity_is_a_usage_error() {
    let b = Setup::file();
    let r = b.report("x");
    let done = b.run_to_end("a/b", "a", &[], &r.once()).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    done.err_line("bad election name \"a/b\"");
    let done = b.run_to_end("j", "a\tb", &[], &r.once()).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    done.err_line("bad identity");
    let done = once(&["leader", "--backend", &b.url, "--name", "a/b"]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
    let long = "é".repeat(101); // 101 characters, 202 bytes
    let done = once(&["leader", "--backend", &b.url, "--name", &long]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    done.err_line("longer than 200 bytes");
    let help = once(&["run", "--help"]).await;
    assert!(
        help.stdout.iter().any(|l| l.contains("1-200 bytes")),
        "{help:?}"
    );
    assert!(
        !b.dir.path().join("elections").exists(),
        "a usage error created the directory"
    );
}

/// A command that cannot be executed is found out before the campaign:
/// 126, no epoch spent, nothing held.
#[tokio::test]
async fn a_command_that_is_not_executable_exits_126_before_campaigning() {
    let b = Setup::file();
    let script = b.dir.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").expect("write");
    let done = b
        .run_to_end("j", "a", &[], &[script.display().to_string()])
        .await;
    assert_eq!(done.code, 126, "{done:?}");
    done.err_line("elect: error: cannot run ");
    assert!(
        !done.stderr.iter().any(|l| l.contains("campaigning")),
        "{done:?}"
    );
    // No epoch was spent: the first term is still Epoch::FIRST.
    assert_eq!(common::assert_free(&b, "j", 0).await, 2);
}

#[tokio::test]
async fn a_corrupt_epoch_record_is_repaired_with_repair_epoch_never_by_deleting_it() {
    let b = Setup::file();
    let r = b.report("x");
    let done = b.run_to_end("j", "a", &[], &r.once()).await;
    assert_eq!(done.code, 0, "{done:?}");
    let dir = b.url.trim_start_matches("file://").to_owned();
    let record = std::path::Path::new(&dir).join("j.epoch");
    // Damaged, showing an epoch above the ceiling (the floor of a repair
    // of a damaged record is at least the ceiling, ADR 0048).
    std::fs::write(&record, "election-file/1\nepoch=4000\nidentity=\n").expect("damage");

    let done = b.run_to_end("j", "a", &[], &r.once()).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    let hint = done.err_line("elect: hint: ");
    assert!(
        hint.contains("repair-epoch") && hint.contains("never delete"),
        "{hint}"
    );
    assert!(
        !hint.contains("remove"),
        "a hint must not advise removing state: {hint}"
    );

    let low = once(&[
        "repair-epoch",
        "--backend",
        &b.url,
        "--name",
        "j",
        "--epoch",
        "3999",
    ])
    .await;
    assert_eq!(low.code, common::CONFIG, "{low:?}");
    low.err_line("epochs up to 4000 may have been handed out");
    let ok = once(&[
        "repair-epoch",
        "--backend",
        &b.url,
        "--name",
        "j",
        "--epoch",
        "5000",
    ])
    .await;
    assert_eq!(ok.code, 0, "{ok:?}");
    ok.err_line("now holds epoch 5000");

    let done = b.run_to_end("j", "a", &[], &r.once()).await;
    assert_eq!(done.code, 0, "{done:?}");
    assert_eq!(common::elected_epoch(&done), 5001);
    assert_eq!(
        r.lines().len(),
        2,
        "the command ran in the first and the last run only"
    );

    let sqlite = once(&[
        "repair-epoch",
        "--backend",
        "sqlite:///nonexistent/x.db",
        "--name",
        "j",
        "--epoch",
        "5",
    ])
    .await;
    assert_ne!(sqlite.code, 0, "{sqlite:?}");
}

/// A SQLite database with a second hard link (issue 23, ADR 0046): `elect`
/// refuses it with the configuration exit code and a hint that names the
/// fix, before campaigning, and the command never runs.
#[tokio::test]
async fn a_sqlite_database_with_a_second_name_is_a_configuration_error() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let url = format!("sqlite://{}", db.display());
    let done = once(&["run", "--backend", &url, "--name", "j", "--", "true"]).await;
    assert_eq!(done.code, 0, "{done:?}");
    std::fs::hard_link(&db, dir.path().join("link.db")).expect("link");
    let ran = dir.path().join("ran");
    let touch = format!("touch {}", ran.display());
    for sub in ["run", "leader"] {
        let mut args = vec![sub, "--backend", &url, "--name", "j"];
        if sub == "run" {
            args.extend(["--", "sh", "-c", &touch]);
        }
        let done = once(&args).await;
        assert_eq!(done.code, common::CONFIG, "{sub}: {done:?}");
        done.err_line("hard links");
        done.err_line("elect: hint: remove the second hard link");
    }
    assert!(!ran.exists(), "the command ran");
}
