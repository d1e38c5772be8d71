//! Real candidate processes competing through one directory (the file
//! backend).

use candidate_testkit::Proc;
use election_core::Claim;
use nix::sys::signal::Signal;

const BIN: &str = env!("CARGO_BIN_EXE_election-candidate");

fn start(dir: &std::path::Path, identity: &str) -> Proc {
    let url = format!("file://{}", dir.to_str().expect("utf-8"));
    Proc::spawn(
        BIN,
        &["--backend", &url, "--name", "jobs", "--identity", identity],
        identity,
    )
}

#[tokio::test]
async fn sigkill_of_the_leader_hands_over_with_a_higher_epoch() {
    let dir = tempfile::tempdir().expect("dir");
    let mut a = start(dir.path(), "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut b = start(dir.path(), "b");
    b.expect("campaigning");
    a.signal(Signal::SIGKILL);
    let (e2, _) = b.elected();
    assert!(e2 > e1, "epoch {e2} after {e1}");
    b.send("resign");
    b.expect("resigning");
    b.expect("resigned");
    // A third process after the crash and the resign: higher again.
    let mut c = start(dir.path(), "c");
    c.expect("campaigning");
    let (e3, _) = c.elected();
    assert!(e3 > e2);
}

#[tokio::test]
async fn a_stopped_follower_does_not_block_the_others() {
    let dir = tempfile::tempdir().expect("dir");
    let mut a = start(dir.path(), "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut stopped = start(dir.path(), "stopped");
    stopped.expect("campaigning");
    stopped.signal(Signal::SIGSTOP);
    let mut c = start(dir.path(), "c");
    c.expect("campaigning");
    a.send("resign");
    a.expect("resigning");
    let (e2, _) = c.elected();
    assert!(e2 > e1);
    // And a crash of the new leader still hands over past the stopped one.
    let mut d = start(dir.path(), "d");
    d.expect("campaigning");
    c.signal(Signal::SIGKILL);
    let (e3, _) = d.elected();
    assert!(e3 > e2);
    stopped.signal(Signal::SIGCONT);
    d.send("resign");
    d.expect("resigning");
    let (e4, _) = stopped.elected();
    assert!(
        e4 > e3,
        "the resumed follower wins next, with a higher epoch"
    );
}

#[tokio::test]
async fn many_processes_take_turns_one_at_a_time() {
    let dir = tempfile::tempdir().expect("dir");
    let mut procs: Vec<Proc> = (0..5)
        .map(|i| start(dir.path(), &format!("p{i}")))
        .collect();
    for p in &mut procs {
        p.expect("campaigning");
    }
    // Each leader resigns as soon as it is elected (stdin closed).
    for p in &mut procs {
        p.close_stdin();
    }
    let mut terms = Vec::new();
    for p in &mut procs {
        let (epoch, elected) = p.elected();
        let resigning: u64 = p.expect("resigning")[0].parse().expect("ns");
        let resigned: u64 = p.expect("resigned")[0].parse().expect("ns");
        terms.push((elected, resigned, epoch, resigning));
    }
    terms.sort();
    for pair in terms.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        assert!(
            next.2 > prev.2,
            "epochs not increasing in order of election: {terms:?}"
        );
        assert!(next.0 >= prev.3, "two leaders at once: {terms:?}");
    }
}

/// Far longer than any wake-up; the test fails instead of hanging.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

async fn woken(changes: &mut election_file::Changes, what: &str) {
    tokio::time::timeout(PATIENCE, changes.changed())
        .await
        .unwrap_or_else(|_| panic!("no wake-up for {what}"))
        .expect("changed");
}

/// (Moved from election-file's tests/changes.rs: it needs a candidate
/// process.)
/// A holder killed with SIGKILL: the kernel closes its claim file, which
/// wakes the reader.
#[tokio::test]
async fn a_reader_of_changes_wakes_when_the_holder_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let election = election_file::FileElection::new(tmp.path()).unwrap();
    let reader = election.claim("jobs", "observer").unwrap();
    let mut changes = election.changes("jobs").unwrap();
    let bin = BIN;
    let mut child = tokio::process::Command::new(bin)
        .args([
            "--backend",
            &format!("file://{}", tmp.path().display()),
            "--name",
            "jobs",
            "--identity",
            "k",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("candidate");
    while reader.leader().await.unwrap().is_none() {
        woken(&mut changes, "the child's term").await;
    }
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("wait");
    while reader.leader().await.unwrap().is_some() {
        woken(&mut changes, "the holder's death").await;
    }
}
