//! `elect`'s edges (issue 12): permanent failures end a campaign at once
//! (78, a hint naming the fix), transient ones are retried with a line
//! saying why (69 when they end it); one URL grammar; read-only commands
//! create nothing; a command is checked before the campaign; errors name
//! the user's flags.

use crate::common;

use std::path::Path;

use common::{Elect, Setup, once};

/// The file backend's directory of `b`, created.
fn dir_of(b: &Setup) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(b.url.trim_start_matches("file://"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// Every entry of `dir` (names), sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---- Full disk, permanent and transient failures ----

/// A full disk while the first term durably reserves its block of epochs
/// (ADR 0025: here the temporary ceiling file is /dev/full, whose every
/// write fails with ENOSPC): `--no-wait`
/// ends with 69 and a hint to free space; the temporary file is removed;
/// a waiting run says why it retries, and wins once the write succeeds.
#[tokio::test]
async fn a_full_disk_is_transient_said_and_cleaned_up() {
    let b = Setup::file();
    let dir = dir_of(&b);
    let tmp = dir.join("j.epoch-ceiling.tmp");
    std::os::unix::fs::symlink("/dev/full", &tmp).expect("symlink");
    let r = b.report("x");

    let done = b.run_to_end("j", "a", &["--no-wait"], &r.once()).await;
    assert_eq!(done.code, common::UNAVAILABLE, "{done:?}");
    done.err_line("No space left on device");
    let hint = done.err_line("elect: hint: ");
    assert!(hint.contains("free space"), "{hint}");
    assert!(
        std::fs::symlink_metadata(&tmp).is_err(),
        "the temporary record was left behind: {:?}",
        entries(&dir)
    );
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());

    // Waiting: the failure is said, then retried (the temporary file is
    // gone, so the retry's write succeeds).
    std::os::unix::fs::symlink("/dev/full", &tmp).expect("symlink");
    let done = b
        .run_to_end("j", "a", &["--timeout", "20s"], &r.once())
        .await;
    assert_eq!(done.code, 0, "{done:?}");
    let retry = done.err_line("retrying");
    assert!(retry.contains("No space left on device"), "{retry}");
    assert_eq!(r.lines().len(), 1, "{:?}", r.lines());
    assert!(
        !entries(&dir).iter().any(|e| e.ends_with(".tmp")),
        "{:?}",
        entries(&dir)
    );
}

/// `<name>.epoch` is a directory: permanent. The campaign ends at once
/// with 78 and a hint naming the fix, even while waiting.
#[tokio::test]
async fn a_directory_where_the_epoch_record_belongs_is_permanent() {
    let b = Setup::file();
    let dir = dir_of(&b);
    std::fs::create_dir(dir.join("j.epoch")).expect("mkdir");
    let r = b.report("x");
    let started = std::time::Instant::now();
    let done = b
        .run_to_end("j", "a", &["--timeout", "10s"], &r.once())
        .await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    let hint = done.err_line("elect: hint: ");
    assert!(
        hint.contains("is a directory") && hint.contains("move it"),
        "{hint}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "it waited out --timeout: {done:?}"
    );
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
}

/// A write past the process's file size limit (`ulimit -f`, EFBIG; the
/// SIGXFSZ it also raises is ignored, as a shell that set the limit may
/// do): permanent, 78, the hint names the limit.
#[tokio::test]
async fn a_file_size_limit_is_permanent() {
    let b = Setup::file();
    dir_of(&b);
    let r = b.report("x");
    let mut command = tokio::process::Command::new(common::BIN);
    command.args([
        "run",
        "--backend",
        &b.url,
        "--name",
        "j",
        "--timeout",
        "10s",
        "--",
    ]);
    command.args(r.once()).stdin(std::process::Stdio::null());
    #[allow(unsafe_code)]
    // SAFETY: between fork and exec the child only calls setrlimit(2) and
    // signal(2), both async-signal-safe; nothing allocates or locks.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 16,
                rlim_max: 16,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let done = Elect::start(command, "run (ulimit -f)").finish().await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    let hint = done.err_line("elect: hint: ");
    assert!(hint.contains("ulimit -f"), "{hint}");
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
}

/// A text file given as the SQLite database: permanent (78, a hint that
/// it is not an election database), for `run` and `leader`; it is not
/// changed.
#[tokio::test]
async fn a_text_file_as_the_database_is_permanent() {
    let b = Setup::sqlite();
    let path = b.dir.path().join("notes.txt");
    let text = "my notes, not a database\n".repeat(100);
    std::fs::write(&path, &text).expect("write");
    let url = format!("sqlite://{}", path.display());
    let r = b.report("x");
    let mut run = vec![
        "run",
        "--backend",
        &url,
        "--name",
        "j",
        "--timeout",
        "10s",
        "--",
    ];
    let cmd = r.once();
    run.extend(cmd.iter().map(String::as_str));
    for args in [run, vec!["leader", "--backend", &url, "--name", "j"]] {
        let done = once(&args).await;
        assert_eq!(done.code, common::CONFIG, "{args:?}: {done:?}");
        let hint = done.err_line("elect: hint: ");
        assert!(hint.contains("not an election database"), "{hint}");
    }
    assert_eq!(std::fs::read_to_string(&path).expect("read"), text);
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
}

// ---- One URL grammar ----

/// Query strings are options, never part of a path: an unknown or
/// repeated option is refused (two hosts whose URLs differ only in a query
/// would otherwise elect in two places), and percent-escapes are decoded.
#[tokio::test]
async fn url_queries_are_options_and_paths_are_percent_decoded() {
    let b = Setup::file();
    let base = b.dir.path().display().to_string();
    let r = b.report("x");
    for url in [
        format!("file://{base}/fb?x=1"),
        format!("sqlite://{base}/app.db?mode=ro"),
        format!("file://{base}/fb#frag"),
        format!("file://{base}/f%zzb"),
        "nats://127.0.0.1:4222?bucket=a&bucket=b".to_owned(),
    ] {
        let mut args = vec!["run", "--backend", &url, "--name", "j", "--no-wait", "--"];
        let cmd = r.once();
        args.extend(cmd.iter().map(String::as_str));
        let done = once(&args).await;
        assert_eq!(done.code, common::CONFIG, "{url}: {done:?}");
        done.err_line("elect: error: bad backend URL");
    }
    assert!(r.lines().is_empty(), "the command ran: {:?}", r.lines());
    let made: Vec<String> = entries(b.dir.path())
        .into_iter()
        .filter(|e| !e.ends_with(".out"))
        .collect();
    assert!(made.is_empty(), "created: {made:?}");

    // `%3F` is a '?' in the directory's name, `%20` a space.
    let url = format!("file://{base}/f%3Fb%20c");
    let mut args = vec!["run", "--backend", &url, "--name", "j", "--no-wait", "--"];
    let cmd = r.once();
    args.extend(cmd.iter().map(String::as_str));
    let done = once(&args).await;
    assert_eq!(done.code, 0, "{done:?}");
    assert!(b.dir.path().join("f?b c").join("j.epoch").is_file());
}

// ---- Read-only commands create nothing ----

/// `leader` and `observe` pointed at a directory or database that does
/// not exist (a typo) create nothing: they say "no leader" and note on
/// stderr what does not exist. On an existing SQLite database without
/// election tables (an application's own), no table is created.
#[tokio::test]
async fn leader_and_observe_create_nothing() {
    let tmp = common::temp_dir();
    let base = tmp.path();
    let app = base.join("app.db");
    // An application's database (empty: a SQLite database with no
    // tables yet), without election tables.
    std::fs::write(&app, "").expect("create");
    let urls = [
        format!("file://{}/typo", base.display()),
        format!("sqlite://{}/typo.db", base.display()),
        format!("sqlite://{}", app.display()),
    ];
    for url in &urls {
        let done = once(&["leader", "--backend", url, "--name", "j"]).await;
        assert_eq!(done.code, 0, "{url}: {done:?}");
        assert_eq!(done.stdout, ["j: no leader"], "{done:?}");
        done.err_line("elect: note: ");

        let mut observe = Elect::spawn(
            &["observe", "--backend", url, "--name", "j", "--poll", "20ms"],
            "observe",
        );
        assert_eq!(observe.out_line().await, "j: no leader");
        observe.signal(nix::sys::signal::Signal::SIGTERM);
        let done = observe.finish().await;
        assert_eq!(done.code, 0, "{done:?}");
    }
    assert_eq!(entries(base), ["app.db"], "something was created");
    assert_eq!(std::fs::metadata(&app).expect("app.db").len(), 0);
}

/// `run` on a directory or database that does not exist creates it, and
/// says so on stderr (a typo shows at once).
#[tokio::test]
async fn run_says_it_creates_a_missing_directory_or_database() {
    for b in [Setup::file(), Setup::sqlite()] {
        let r = b.report("x");
        let done = b.run_to_end("j", "a", &[], &r.once()).await;
        assert_eq!(done.code, 0, "{done:?}");
        let line = done.err_line("does not exist: creating it");
        let path = b.url.split_once("://").expect("url").1;
        assert!(line.contains(path), "{line}");
        // The second time it exists: nothing to say.
        let done = b.run_to_end("j", "a", &[], &r.once()).await;
        assert_eq!(done.code, 0, "{done:?}");
        assert!(
            !done.stderr.iter().any(|l| l.contains("creating it")),
            "{done:?}"
        );
    }
}

// ---- Flags and texts ----

/// Errors about lease timings name the flags the user gave, never the
/// libraries' settings (`busy_timeout`, `renew_interval`).
#[tokio::test]
async fn timing_errors_name_the_users_flags() {
    let tmp = common::temp_dir();
    let sqlite = format!("sqlite://{}/x.db", tmp.path().display());
    // Checked before connecting: no server needed.
    let nats = "nats://127.0.0.1:1".to_owned();
    for (url, flags, says) in [
        (&sqlite, &["--ttl", "0s"][..], "--ttl 0s"),
        (&sqlite, &["--renew", "5s", "--ttl", "3s"], "--renew 5s"),
        (&sqlite, &["--renew", "7s"], "--renew 7s"), // the default --ttl is 15s
        (&nats, &["--ttl", "0s"], "--ttl 0s"),
        (&nats, &["--renew", "5s", "--ttl", "3s"], "--renew 5s"),
        (&nats, &["--ttl", "3s", "--grace", "2s"], "--grace 2s"),
    ] {
        let mut args = vec!["run", "--backend", url, "--name", "j"];
        args.extend(flags);
        args.extend(["--", "true"]);
        let done = once(&args).await;
        assert_eq!(done.code, common::CONFIG, "{args:?}: {done:?}");
        let error = done.err_line("elect: error: ");
        assert!(error.contains(says), "{args:?}: {error}");
        for internal in [
            "busy_timeout",
            "renew_interval",
            "failover_grace",
            "request_timeout",
        ] {
            assert!(!error.contains(internal), "{args:?}: {error}");
        }
    }
    assert!(
        std::fs::read_dir(tmp.path()).expect("dir").next().is_none(),
        "a refused run created the database"
    );
}

/// Usage errors: a negative duration says so (not clap's `-- -5`, which
/// would become the command); `--json` with `--quiet`; `--poll 0s`.
#[tokio::test]
async fn usage_edges_exit_64_with_a_plain_message() {
    let done = once(&["run", "--name", "j", "--timeout", "-5s", "--", "true"]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    let all = done.stderr.join("\n");
    assert!(all.contains("negative"), "{all}");
    assert!(!all.contains("-- -5"), "{all}");
    let done = once(&["run", "--name", "j", "--kill-grace", "-5s", "--", "true"]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    let all = done.stderr.join("\n");
    assert!(all.contains("negative") && !all.contains("-- -5"), "{all}");
    let done = once(&["leader", "--name", "j", "--json", "--quiet"]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    let done = once(&["observe", "--name", "j", "--poll", "0s"]).await;
    assert_eq!(done.code, common::USAGE, "{done:?}");
    done.err_line("spin");
}

/// The help says where `--json` output goes (stdout for `leader`), that
/// identities and names are limited in bytes, and that flock(1) does not
/// exclude elect.
#[tokio::test]
async fn help_texts_say_what_elect_does() {
    let leader = once(&["leader", "--help"]).await;
    let text = leader.stdout.join("\n");
    assert!(text.contains("JSON on stdout"), "{text}");
    let run = once(&["run", "--help"]).await;
    let text = run.stdout.join("\n");
    assert!(text.contains("1-200 bytes"), "{text}");
    assert!(text.contains("flock(1)"), "{text}");
    assert!(!text.contains("200 characters"), "{text}");
}

// ---- observe sees every term ----

/// `observe` on the file backend wakes on each change of the election's
/// files: with no polling at all (`--poll 1h`) it prints a term that lasts
/// only as long as `true` runs, then the vacancy. Before: it looked every
/// 250 ms and missed short terms; with `--poll 1h` it printed only the
/// first line.
#[tokio::test]
async fn observe_prints_a_short_term_without_polling() {
    let b = Setup::file();
    dir_of(&b);
    let mut observe = Elect::spawn(
        &[
            "observe",
            "--backend",
            &b.url,
            "--name",
            "j",
            "--poll",
            "1h",
        ],
        "observe",
    );
    assert_eq!(observe.out_line().await, "j: no leader");
    for (identity, epoch) in [("a", 2), ("b", 3)] {
        let done = b.run_to_end("j", identity, &[], &["true".to_owned()]).await;
        assert_eq!(done.code, 0, "{done:?}");
        common::assert_led_by(&observe.out_line().await, "j", identity, epoch);
        assert_eq!(observe.out_line().await, "j: no leader");
    }
    observe.signal(nix::sys::signal::Signal::SIGTERM);
    let done = observe.finish().await;
    assert_eq!(done.code, 0, "{done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
}
