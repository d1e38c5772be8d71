//! Real candidate processes reaching one SQLite database through two names
//! (issue 23, items 1 and 2; ADR 0046). SQLite names its `-wal` and `-shm`
//! files after the path it was given: two names of one inode get two WALs
//! and two sets of WAL-index locks, so their write transactions do not
//! exclude each other and neither sees the other's commits. A second hard
//! link and a file bind-mounted on its own (`docker run -v
//! /srv/app.db:/data/app.db`) are refused at open and end a term held
//! through the database when they appear; a symlink is fine (SQLite
//! resolves it, so both names share one WAL).
//!
//! The bind-mount test needs root and `unshare -m` (CI runs as root); it
//! fails, loudly, where it cannot run.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use candidate_testkit::Proc;

const BIN: &str = env!("CARGO_BIN_EXE_election-candidate");

fn args(db: &Path, identity: &str) -> Vec<String> {
    let url = format!("sqlite://{}", db.to_str().expect("utf-8"));
    [
        "--backend",
        &url,
        "--identity",
        identity,
        "--name",
        "jobs",
        "--ttl-ms",
        "3000",
        "--renew-ms",
        "100",
        "--poll-ms",
        "20",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn candidate(db: &Path, identity: &str) -> Proc {
    let mut cmd = Command::new(BIN);
    cmd.args(args(db, identity));
    Proc::start(identity, cmd).unwrap_or_else(|e| panic!("{e}"))
}

/// Creates the database (schema and WAL) at `db`, as a first candidate
/// would, and closes it.
async fn created(db: &Path) {
    let e = election_sqlite::SqliteElection::open(db, election_sqlite::SqliteOptions::default())
        .await
        .expect("open");
    e.pool().close().await;
}

/// What a candidate did first: `Ok(epoch)` if elected, `Err(line)` for its
/// `error` line (it never got as far as campaigning).
fn outcome(p: &mut Proc) -> Result<u64, String> {
    loop {
        let line = p.line();
        if line == "campaigning" {
            continue;
        }
        if let Some(epoch) = line.strip_prefix("elected ") {
            let epoch = epoch.split(' ').next().expect("epoch");
            return Ok(epoch.parse().expect("an epoch"));
        }
        assert!(
            line.starts_with("error "),
            "{}: unexpected line {line:?}",
            p.label()
        );
        return Err(line);
    }
}

/// Requires `p` to be refused with an error naming `fix`; fails the test
/// with "two leaders" if it is elected instead (while `leader`, if any,
/// leads).
fn refused_naming(p: &mut Proc, leader: Option<(&str, u64)>, fix: &str) {
    match outcome(p) {
        Ok(epoch) => panic!(
            "two leaders at once: {} elected in epoch {epoch} through a second name of the database{}",
            p.label(),
            leader.map_or_else(String::new, |(who, e)| format!(
                ", while {who} leads in epoch {e}"
            ))
        ),
        Err(line) => {
            assert!(
                line.contains(fix),
                "{}: the error does not name the fix {fix:?}: {line}",
                p.label()
            );
        }
    }
}

/// Two hard links made before anyone opened the database: neither name
/// is used (before ADR 0046 both candidates were elected in the same
/// epoch, each in its own WAL).
#[tokio::test]
async fn two_hard_links_never_elect_two_leaders() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    created(&db).await;
    let link = dir.path().join("link.db");
    std::fs::hard_link(&db, &link).expect("link");
    let mut a = candidate(&db, "a");
    let a_won = outcome(&mut a);
    let mut b = candidate(&link, "b");
    match a_won {
        Ok(epoch) => refused_naming(&mut b, Some(("a", epoch)), "hard link"),
        Err(line) => {
            assert!(line.contains("hard link"), "a: {line}");
            refused_naming(&mut b, None, "hard link");
        }
    }
}

/// A hard link made while a term is held: the holder reports the loss at
/// its next renewal, and a candidate on the new name is refused (before
/// ADR 0046 the holder renewed on, and the candidate on the link was
/// elected in the same epoch).
#[tokio::test]
async fn a_hard_link_made_during_a_term_ends_it_as_a_loss() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = candidate(&db, "a");
    let epoch = outcome(&mut a).expect("a is elected");
    let link = dir.path().join("link.db");
    std::fs::hard_link(&db, &link).expect("link");
    let mut b = candidate(&link, "b");
    refused_naming(&mut b, Some(("a", epoch)), "hard link");
    let lost = a.line();
    assert!(
        lost.starts_with("lost ") && lost.contains("hard link"),
        "a: expected its term lost for the second name, got {lost:?}"
    );
    // Its own name gone, the database is usable again.
    std::fs::remove_file(&link).expect("unlink");
    a.send("exit");
    let mut c = candidate(&db, "c").with_patience(Duration::from_secs(60));
    let next = outcome(&mut c).expect("c is elected once the link is gone");
    assert!(next > epoch, "epoch {next} after {epoch}");
}

/// A symlink is not a second name to SQLite (it resolves it: both names
/// share one WAL), so it is not refused: a candidate on the symlink waits
/// for the leader on the file.
#[tokio::test]
async fn a_symlink_shares_the_database_and_its_election() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let sub = dir.path().join("elsewhere");
    std::fs::create_dir(&sub).expect("dir");
    let link = sub.join("link.db");
    std::os::unix::fs::symlink(&db, &link).expect("symlink");
    let mut a = candidate(&db, "a");
    let e1 = outcome(&mut a).expect("a is elected");
    let mut b = candidate(&link, "b");
    b.expect("campaigning");
    a.send("resign");
    a.expect("resigning");
    a.expect("resigned");
    let e2 = outcome(&mut b).expect("b is elected after a resigned");
    assert!(e2 > e1, "epoch {e2} after {e1}");
}

/// The database file bind-mounted on its own, as `docker run -v
/// /srv/app.db:/data/app.db` does: a candidate in a mount namespace of its
/// own (`unshare -m`) runs on the second path, beside one on the first.
/// The one on the file's own mount is refused (before ADR 0046 both were
/// elected in the same epoch).
#[tokio::test]
async fn a_database_file_mounted_on_its_own_is_refused() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test mounts a file in a mount namespace of its own: run it as root (CI does)"
    );
    let unshare = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .unwrap_or_else(|e| panic!("this test needs unshare(1) (util-linux): {e}"));
    assert!(unshare.success(), "`unshare -m true` failed: {unshare}");
    let dir = tempfile::tempdir().expect("dir");
    let (host, container) = (dir.path().join("srv"), dir.path().join("data"));
    std::fs::create_dir(&host).expect("dir");
    std::fs::create_dir(&container).expect("dir");
    let db = host.join("app.db");
    created(&db).await;
    let mounted = container.join("app.db");
    std::fs::write(&mounted, b"").expect("the mount point");
    let mut a = candidate(&db, "host");
    let epoch = outcome(&mut a).expect("the host's candidate is elected");
    // `unshare -m` makes the namespace's mounts private: the bind mount is
    // seen only by the candidate it starts.
    let script = "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\"";
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", script, "sh"])
        .arg(&db)
        .arg(&mounted)
        .arg(BIN)
        .args(args(&mounted, "container"));
    let mut b = Proc::start("container", cmd).unwrap_or_else(|e| panic!("{e}"));
    refused_naming(&mut b, Some(("host", epoch)), "mount the directory");
    assert!(
        b.wait().is_ok_and(|s| !s.success()),
        "the refused candidate exits with a failure"
    );
    a.send("confirm");
    assert_eq!(a.expect("confirmed"), [epoch.to_string()]);
}
