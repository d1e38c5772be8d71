//! Issue 11, item 5 on the real file backend: dropping `lead` while a task
//! of the term is in a synchronous section keeps the OS lock until the task
//! has stopped (before, closing the claim file freed it at once).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use election_core::conformance::PATIENCE;
use election_core::{LeadOptions, Lease, LossReason};
use election_file::FileElection;

/// Sets its flag when dropped, so a blocking task never outlives a failed
/// test.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_lead_keeps_the_lock_until_its_blocking_task_stopped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = FileElection::new(dir.path())
        .expect("election")
        .candidate("job", "a")
        .expect("candidate");
    let term = a.campaign().await.expect("a wins");
    let epoch = term.epoch();
    let lease = term.lease();
    let release = Arc::new(AtomicBool::new(false));
    let _unblock = SetOnDrop(release.clone());
    let finished = Arc::new(AtomicBool::new(false));
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let lead = tokio::spawn({
        let (release, finished) = (release.clone(), finished.clone());
        term.lead(LeadOptions::default(), move |leadership| async move {
            leadership.spawn(async move {
                let _ = started_tx.send(());
                while !release.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                finished.store(true, Ordering::Release);
            });
            std::future::pending::<()>().await
        })
    });
    tokio::time::timeout(PATIENCE, started)
        .await
        .expect("the task starts")
        .expect("started");
    lead.abort();
    assert!(lead.await.expect_err("aborted").is_cancelled());
    assert!(matches!(
        lease.loss().expect("ended").reason,
        LossReason::Dropped
    ));

    // Another process's view: a new election handle on the same directory.
    let b = FileElection::new(dir.path())
        .expect("election")
        .candidate("job", "b")
        .expect("candidate");
    assert!(
        b.try_campaign().await.expect("try").is_none(),
        "b won the lock while the dropped lead's task still ran"
    );
    assert_eq!(
        b.leader().await.expect("leader").map(|l| l.epoch),
        Some(epoch)
    );
    let waiting = tokio::spawn(async move { b.campaign().await });
    release.store(true, Ordering::Release);
    let next = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("b wins once the task stopped")
        .expect("join")
        .expect("campaign");
    assert!(
        finished.load(Ordering::Acquire),
        "b won before the task finished"
    );
    assert!(next.epoch() > epoch);
    next.resign().await.expect("resign");
}
