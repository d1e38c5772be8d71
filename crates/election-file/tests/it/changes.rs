//! `FileElection::changes`: a reader wakes when a term begins and when it
//! ends (resign, drop; a killed holder: candidate-testkit's tests/file.rs),
//! without polling; `last_term`
//! names a term that ended before the reader looked.

use std::time::Duration;

use election_core::{Claim, Term};
use election_file::{FileClaim, FileElection};

/// Far longer than any wake-up; the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(30);

/// The term `identity` wins in election `jobs`.
async fn elected(election: &FileElection, identity: &str) -> Term<FileClaim> {
    let candidate = election.candidate("jobs", identity).unwrap();
    candidate.campaign().await.unwrap()
}

async fn woken(changes: &mut election_file::Changes, what: &str) {
    tokio::time::timeout(PATIENCE, changes.changed())
        .await
        .unwrap_or_else(|_| panic!("no wake-up for {what}"))
        .expect("changed");
}

#[tokio::test]
async fn a_reader_wakes_when_a_term_begins_and_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let election = FileElection::new(tmp.path()).unwrap();
    let reader = election.claim("jobs", "observer").unwrap();
    let mut changes = election.changes("jobs").unwrap();
    assert_eq!(election.last_term("jobs").unwrap(), None);

    // Resign.
    let term = elected(&election, "a").await;
    woken(&mut changes, "a term's start").await;
    assert_eq!(
        reader.leader().await.unwrap().map(|l| l.epoch),
        Some(term.epoch())
    );
    let epoch = term.epoch();
    term.resign().await.unwrap();
    // Wake-ups may be spurious: wait until the reader sees the end.
    while reader.leader().await.unwrap().is_some() {
        woken(&mut changes, "a resign").await;
    }

    // Drop.
    let term = elected(&election, "b").await;
    assert!(term.epoch() > epoch);
    while reader.leader().await.unwrap().is_none() {
        woken(&mut changes, "the second term's start").await;
    }
    drop(term);
    while reader.leader().await.unwrap().is_some() {
        woken(&mut changes, "a dropped term").await;
    }
    // A term that began and ended unseen is named by the record.
    let last = election.last_term("jobs").unwrap().expect("a last term");
    assert_eq!(last.identity.as_str(), "b");
    assert!(last.epoch > epoch);
}
