//! `leader()` against real files: who leads, in which term, since when.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use election_file::FileElection;

/// `t` rounded down to the millisecond: the record keeps milliseconds.
fn floor_ms(t: SystemTime) -> SystemTime {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).expect("ms"))
}

fn assert_within(since: SystemTime, before: SystemTime, after: SystemTime) {
    assert!(
        floor_ms(before) <= since && since <= after,
        "since {since:?} is not within the campaign [{before:?}, {after:?}]"
    );
}

#[tokio::test]
async fn leader_says_since_when_each_term_leads() {
    let dir = tempfile::tempdir().expect("dir");
    let election = FileElection::new(dir.path()).expect("election");
    let a = election.candidate("jobs", "a").expect("a");
    let b = election.candidate("jobs", "b").expect("b");
    let observer = election.candidate("jobs", "observer").expect("observer");

    let before = SystemTime::now();
    let t1 = a.campaign().await.expect("a wins");
    let after = SystemTime::now();
    let seen = observer.leader().await.expect("leader").expect("a leads");
    assert_eq!((seen.identity.as_str(), seen.epoch), ("a", t1.epoch()));
    let since_a = seen.since.expect("the record has since_unix_ms");
    assert_within(since_a, before, after);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        observer.leader().await.expect("leader"),
        Some(seen),
        "the same for the whole term"
    );
    t1.resign().await.expect("resign");

    // The next term has its own start time, not the first one's.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let before = SystemTime::now();
    let t2 = b.campaign().await.expect("b wins");
    let after = SystemTime::now();
    let seen = observer.leader().await.expect("leader").expect("b leads");
    assert_eq!((seen.identity.as_str(), seen.epoch), ("b", t2.epoch()));
    let since_b = seen.since.expect("the record has since_unix_ms");
    assert_within(since_b, before, after);
    assert!(since_b > since_a);
    t2.resign().await.expect("resign");
    assert_eq!(observer.leader().await.expect("leader"), None);
}
