//! Where the file backend keeps its elections: by default on a disk
//! (`$XDG_STATE_HOME/elect`), never in a runtime directory that a reboot
//! empties; a directory on tmpfs is refused (exit 78, the hint naming
//! `?volatile_ok=1`) unless the URL asks for it by name (ADR 0097).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common;

use common::{Elect, Finished};

/// `elect args` to its end, with `env` added.
async fn elect(args: &[&str], env: &[(&str, &Path)]) -> Finished {
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(k, v)| (*k, v.to_str().expect("a UTF-8 path")))
        .collect();
    Elect::spawn_with_env(args, &env, &args.join(" "))
        .finish()
        .await
}

/// A fresh directory on `/dev/shm`, a tmpfs on Linux.
fn on_tmpfs() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").expect("a temp dir in /dev/shm (a tmpfs)")
}

#[tokio::test]
async fn without_backend_the_epochs_land_in_the_state_directory() {
    let tmp = common::temp_dir();
    let (state, runtime, home) = (
        tmp.path().join("state"),
        tmp.path().join("runtime"),
        tmp.path().join("home"),
    );
    std::fs::create_dir(&runtime).expect("runtime dir");
    let env = [
        ("XDG_STATE_HOME", state.as_path()),
        ("XDG_RUNTIME_DIR", runtime.as_path()),
        ("HOME", home.as_path()),
    ];
    let epochs = tmp.path().join("epochs");
    let record = format!("echo \"$ELECTION_EPOCH\" >> '{}'", epochs.display());
    for _ in 0..2 {
        let done = elect(&["run", "--name", "jobs", "--", "sh", "-c", &record], &env).await;
        assert_eq!(done.code, 0, "{done:?}");
    }
    let ran = std::fs::read_to_string(&epochs).expect("the command ran");
    assert_eq!(ran, "2\n3\n", "epochs grow");
    let dir = state.join("elect");
    assert!(
        dir.join("jobs.epoch").is_file(),
        "no epoch record in {dir:?}"
    );
    assert!(
        dir.join("jobs.epoch-ceiling").is_file(),
        "no ceiling in {dir:?}"
    );
    let mode = std::fs::metadata(&dir).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{dir:?}: {mode:o}");
    assert!(
        !runtime.join("elect").exists(),
        "the runtime directory was used"
    );

    // `elect leader` reads the same directory.
    let done = elect(&["leader", "--name", "jobs", "--json"], &env).await;
    assert!(
        done.stderr.iter().all(|l| !l.contains("does not exist")),
        "{done:?}"
    );
}

#[tokio::test]
async fn a_directory_on_tmpfs_is_refused_with_a_hint_unless_asked_for() {
    let tmp = on_tmpfs();
    let dir = tmp.path().join("elections");
    let url = format!("file://{}", dir.display());
    let ran = common::temp_dir();
    let marker = ran.path().join("ran");
    let touch = format!("touch '{}'", marker.display());
    let run = |url: &str| {
        let url = url.to_owned();
        let touch = touch.clone();
        async move {
            common::once(&[
                "run",
                "--backend",
                &url,
                "--name",
                "j",
                "--",
                "sh",
                "-c",
                &touch,
            ])
            .await
        }
    };

    let done = run(&url).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("which a reboot empties");
    let hint = done.err_line("elect: hint: ");
    assert!(hint.contains(&format!("{url}?volatile_ok=1")), "{hint}");
    assert!(!marker.exists(), "the command ran");

    // Asked for by name: accepted.
    let done = run(&format!("{url}?volatile_ok=1")).await;
    assert_eq!(done.code, 0, "{done:?}");
    assert!(marker.exists(), "the command did not run");

    // The read-only commands refuse it too, and accept it when asked.
    let done = common::once(&["leader", "--backend", &url, "--name", "j"]).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("volatile_ok=1");
    let asked = format!("{url}?volatile_ok=1");
    let done = common::once(&["leader", "--backend", &asked, "--name", "j", "--json"]).await;
    assert_ne!(done.code, common::CONFIG, "{done:?}");
}

#[tokio::test]
async fn a_default_directory_on_tmpfs_is_refused() {
    let tmp = on_tmpfs();
    let state = tmp.path().join("state");
    let env = [("XDG_STATE_HOME", state.as_path())];
    let done = elect(&["run", "--name", "jobs", "--", "true"], &env).await;
    assert_eq!(done.code, common::CONFIG, "{done:?}");
    done.err_line("which a reboot empties");
    done.err_line("XDG_STATE_HOME");
}
