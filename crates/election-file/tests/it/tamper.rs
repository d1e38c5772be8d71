//! The tamper watch (ADR 0074): one inotify watch per election directory
//! finds a held claim file deleted or renamed over by the directory's
//! events, without waiting for the tamper check interval (an hour here),
//! and only the tampered key's term ends.

use std::time::Duration;

use election_core::LossReason;
use election_file::{FileElection, FileOptions};

const HOUR: Duration = Duration::from_secs(3600);
const PATIENCE: Duration = Duration::from_secs(30);

fn election(dir: &std::path::Path, interval: Duration) -> FileElection {
    let options = FileOptions::default().tamper_check_interval(interval);
    FileElection::with_options(dir, options).expect("election")
}

fn revoked(reason: &LossReason) -> String {
    match reason {
        LossReason::Revoked { detail } => detail.clone(),
        other => panic!("expected Revoked, got {other:?}"),
    }
}

/// Wins `name` in `e`, deletes its claim file in `dir` and returns the
/// detail of the loss the term reports, which must come by the
/// directory's event (within `PATIENCE`, not the hour): `waiting` names
/// what the test expects to report it.
async fn won_then_claim_file_deleted(
    e: &FileElection,
    dir: &std::path::Path,
    name: &str,
    waiting: &str,
) -> String {
    let term = e
        .candidate(name, "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("won");
    std::fs::remove_file(dir.join(format!("{name}.lock"))).expect("delete");
    let lost = tokio::time::timeout(PATIENCE, term.lost())
        .await
        .expect(waiting);
    revoked(&lost.reason)
}

#[tokio::test]
async fn a_deleted_claim_file_is_lost_without_waiting_for_the_interval() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path(), HOUR);
    let detail = won_then_claim_file_deleted(
        &e,
        tmp.path(),
        "jobs",
        "the loss is reported by the directory's event, not after the hour",
    )
    .await;
    assert_eq!(detail, "the claim file was deleted");
}

#[tokio::test]
async fn only_the_key_whose_claim_file_was_renamed_over_is_lost() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path(), HOUR);
    let set = e.lease_set("node-a").await.expect("set");
    let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
    for k in &keys {
        assert!(set.ask(k).await.expect("ask"), "{k} won");
    }
    let mut events = set.events();
    let fresh = tmp.path().join("k7.lock.new");
    std::fs::write(&fresh, b"").expect("write");
    std::fs::rename(&fresh, tmp.path().join("k7.lock")).expect("rename over");
    let lost = tokio::time::timeout(PATIENCE, async {
        loop {
            if let election_core::KeyEvent::Lost { key, reason, .. } =
                events.next().await.expect("events")
            {
                return (key, reason);
            }
        }
    })
    .await
    .expect("k7's loss is reported by the directory's event, not after the hour");
    assert_eq!(lost.0.as_str(), "k7");
    assert_eq!(revoked(&lost.1), "the claim file was replaced");
    for k in keys.iter().filter(|k| *k != "k7") {
        assert!(set.held(k), "{k} untouched, still held");
    }
    set.close().await;
}

#[tokio::test]
async fn a_directory_moved_away_ends_its_terms() {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("elections");
    let e = election(&dir, HOUR);
    let term = e
        .candidate("jobs", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("won");
    std::fs::rename(&dir, tmp.path().join("moved")).expect("move the directory");
    std::fs::create_dir(&dir).expect("a new directory at the path");
    let lost = tokio::time::timeout(PATIENCE, term.lost())
        .await
        .expect("the directory's own move is an event");
    assert_eq!(revoked(&lost.reason), "the claim file was deleted");
}

/// The directory's task belongs to the runtime of the first term it
/// watched; when that runtime ends, a term in another runtime starts a
/// new one instead of counting on the dead task.
#[test]
fn a_term_in_a_second_runtime_is_watched_after_the_first_one_ended() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path(), HOUR);
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    };
    runtime().block_on(async {
        let term = e.candidate("one", "a").expect("candidate").campaign().await;
        term.expect("won").resign().await.expect("resign");
    });
    let detail = runtime().block_on(won_then_claim_file_deleted(
        &e,
        tmp.path(),
        "two",
        "watched by a task of this runtime",
    ));
    assert_eq!(detail, "the claim file was deleted");
}
