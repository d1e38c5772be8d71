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

/// Asking who leads a name nobody holds answers on the calling task (ADR
/// 0083): it needs no thread of tokio's blocking pool, so `elect run`'s
/// check of a name's slot 0 before its campaign starts no thread. Here the
/// pool's only thread is kept busy until the answer came; before, the read
/// queued behind it and the answer never came (the timeout's error).
#[test]
fn leader_of_a_free_name_needs_no_blocking_thread() {
    let dir = tempfile::tempdir().expect("dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let election = FileElection::new(dir.path()).expect("election");
        let never = election.candidate("never", "a").expect("never");
        let free = election.candidate("free", "a").expect("free");
        let held = election.candidate("free", "b").expect("held");
        held.campaign()
            .await
            .expect("b wins")
            .resign()
            .await
            .expect("resign");
        // The pool's one thread, busy until the answers came.
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let busy = tokio::task::spawn_blocking(move || wait.recv());
        let answers = async {
            let never = never.leader().await.expect("leader");
            let free = free.leader().await.expect("leader");
            (never, free)
        };
        let answers = tokio::time::timeout(Duration::from_secs(30), answers).await;
        done.send(()).expect("the blocking task waits");
        busy.await.expect("joined").expect("released");
        assert_eq!(
            answers.expect("answered while the blocking pool was busy"),
            (None, None),
            "a name never claimed and one resigned: nobody leads"
        );
    });
}
