//! Transfer (ADR 0112) on the file backend: a handover written into the
//! epoch record reserves the name for the successor; other candidates
//! wait its window out without taking the free lock again and again, and
//! are woken by the successor's term; a request reaches the holder by the
//! directory's event and never a later term.

use std::time::Duration;

use election_core::{Claim, Identity};
use election_file::{FileElection, FileOptions};
use tokio::time::Instant;

const HOUR: Duration = Duration::from_secs(3600);
const PATIENCE: Duration = Duration::from_secs(30);

/// An election whose tamper watch checks by the directory's events only
/// (the sweep's interval is an hour).
fn election(dir: &std::path::Path) -> FileElection {
    let options = FileOptions::default().tamper_check_interval(HOUR);
    FileElection::with_options(dir, options).expect("election")
}

fn id(s: &str) -> Identity {
    Identity::new(s).expect("identity")
}

/// A candidate that never polls (a minute between backstop wake-ups): it
/// wins only by a wake-up.
fn patient(e: &FileElection, who: &str) -> election_core::Candidate<election_file::FileClaim> {
    e.candidate("jobs", who)
        .expect("candidate")
        .with_poll_interval(Duration::from_secs(60))
        .expect("interval")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_candidate_sleeps_out_the_window_instead_of_retaking_the_free_lock() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path());
    let term = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    let window = Duration::from_millis(1500);
    term.transfer(&id("b"), window).await.expect("handed to b");
    let c = e.claim("jobs", "c").expect("c");
    let mut attempt = c.open().await.expect("open");
    let before_seen = Instant::now();
    assert!(
        c.try_claim(&mut attempt).await.expect("try").is_none(),
        "c won b's name"
    );
    // One wait, with a minute's backstop: it returns when c's window ends,
    // not at once (the lock is free: a wait for it would be granted at
    // once, and the campaign would spin on it).
    tokio::time::timeout(PATIENCE, c.wait(&mut attempt, Duration::from_secs(60)))
        .await
        .expect("the wait ends with the window")
        .expect("wait");
    let waited = before_seen.elapsed();
    assert!(
        waited >= window,
        "c's wait ended {waited:?} into a window of {window:?}"
    );
    let won = c
        .try_claim(&mut attempt)
        .await
        .expect("try")
        .expect("c wins after the window");
    assert!(won.epoch > term.epoch());
    c.close(attempt, election_core::End::Dropped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_successor_wins_at_the_handover_and_a_waiter_is_woken_by_its_term() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path());
    let term = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    // Both wait in the kernel before the handover; neither polls.
    let (c, b) = (patient(&e, "c"), patient(&e, "b"));
    let c = tokio::spawn(async move { c.campaign().await });
    let b = tokio::spawn(async move { b.campaign().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let handed = Instant::now();
    term.transfer(&id("b"), HOUR).await.expect("handed to b");
    let next = tokio::time::timeout(Duration::from_secs(10), b)
        .await
        .expect("b is woken by the handover, not by a poll")
        .expect("join")
        .expect("b wins");
    assert!(next.epoch() > term.epoch());
    assert!(handed.elapsed() < Duration::from_secs(10));
    assert!(
        !c.is_finished(),
        "c won a name reserved for b: {:?}",
        c.await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!c.is_finished(), "c won b's term");
    // c waits out an hour's window, unless woken by b's term: it then
    // waits for the lock again, and wins at b's resign.
    next.resign().await.expect("b resigns");
    let third = tokio::time::timeout(Duration::from_secs(10), c)
        .await
        .expect("c is woken by b's term and its end, not the window or a poll")
        .expect("join")
        .expect("c wins");
    assert!(third.epoch() > next.epoch());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_reserved_nobody_leads_and_there_is_nothing_to_revoke_or_ask() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path());
    let term = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    assert_eq!(e.handover("jobs").await.expect("read"), None);
    term.transfer(&id("b"), HOUR).await.expect("handed to b");
    let shown = e.handover("jobs").await.expect("read").expect("reserved");
    assert_eq!(
        (
            shown.from.as_str(),
            shown.to.as_str(),
            shown.epoch,
            shown.window
        ),
        ("a", "b", term.epoch(), HOUR)
    );
    assert_eq!(e.leader("jobs").await.expect("leader"), None);
    assert!(
        e.revoke("jobs", &id("ops"))
            .await
            .expect("revoke")
            .is_none()
    );
    let asked = e.request_transfer("jobs", &id("c"), &id("ops")).await;
    assert_eq!(asked.expect("request"), None);
    assert_eq!(
        e.last_term("jobs").expect("last").map(|l| l.epoch),
        Some(term.epoch())
    );
    // A fresh candidate finds it reserved, and looking changes nothing.
    let d = e.candidate("jobs", "d").expect("d");
    assert!(d.try_campaign().await.expect("try").is_none());
    assert_eq!(e.handover("jobs").await.expect("read"), Some(shown));
    let next = e
        .candidate("jobs", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b wins");
    assert_eq!(e.handover("jobs").await.expect("read"), None);
    let leader = e.leader("jobs").await.expect("leader").expect("b leads");
    assert_eq!(
        (leader.identity.as_str(), leader.epoch),
        ("b", next.epoch())
    );
    next.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reaches_its_term_by_the_event_and_never_a_later_term() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path());
    let first = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    let asked = e
        .request_transfer("jobs", &id("b"), &id("ops"))
        .await
        .expect("request")
        .expect("a term holds it");
    assert_eq!(asked.epoch, first.epoch());
    // Heard by the directory's event: the sweep is an hour away.
    let heard = tokio::time::timeout(PATIENCE, first.transfer_requested())
        .await
        .expect("heard by the event");
    assert_eq!((heard.to.as_str(), heard.by.as_str()), ("b", "ops"));
    first
        .confirm()
        .await
        .expect("a request is not tampering: the term goes on");
    first.resign().await.expect("resign");
    // The request is left in the directory; the next term never hears it,
    // also when its file is renamed over again (an event naming it).
    let transfer = tmp.path().join("jobs.transfer");
    assert!(transfer.exists(), "the request file is left over");
    let second = e
        .candidate("jobs", "c")
        .expect("c")
        .campaign()
        .await
        .expect("c wins");
    let again = tmp.path().join("jobs.transfer.copy");
    std::fs::copy(&transfer, &again).expect("copy");
    std::fs::rename(&again, &transfer).expect("rename");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        second.transfer_request(),
        None,
        "an earlier term's request reached c"
    );
    let asked = e
        .request_transfer("jobs", &id("d"), &id("ops"))
        .await
        .expect("request")
        .expect("c's term holds it");
    let heard = tokio::time::timeout(PATIENCE, second.transfer_requested())
        .await
        .expect("heard by the event");
    assert_eq!((heard.to.as_str(), heard.epoch), ("d", second.epoch()));
    assert_eq!(asked.epoch, second.epoch());
    second.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_waiting_out_the_window_is_woken_by_the_successors_term() {
    let tmp = tempfile::tempdir().expect("dir");
    let e = election(tmp.path());
    let term = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    term.transfer(&id("b"), HOUR).await.expect("handed to b");
    // c reads the handover and sleeps out its hour (it never polls)...
    let c = patient(&e, "c");
    let c = tokio::spawn(async move { c.campaign().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !c.is_finished(),
        "c won a name reserved for b: {:?}",
        c.await
    );
    // ... until b's term begins: c then waits for the lock, and wins at
    // b's resign.
    let next = e
        .candidate("jobs", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b wins");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!c.is_finished(), "c won b's term");
    next.resign().await.expect("b resigns");
    let third = tokio::time::timeout(Duration::from_secs(10), c)
        .await
        .expect("c is woken by b's term and its end, not the window or a poll")
        .expect("join")
        .expect("c wins");
    assert!(third.epoch() > next.epoch());
}
