//! The waiters' line (ADR 0109): a release wakes the first in line only.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use election_core::Candidate;

use crate::common::{self, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_win_one_after_another_in_their_order() {
    let endpoint = common::shared();
    let election = common::open(&endpoint, &common::prefix("line")).await;
    let held = election
        .candidate("jobs", "first")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let won = Arc::new(AtomicUsize::new(0));
    let waiters = format!("{}/w/jobs/", election.options().key_prefix());
    let mut tasks = Vec::new();
    for i in 0..5 {
        let candidate = Candidate::new(election.claim("jobs", &format!("w{i}")).unwrap())
            .with_poll_interval(Duration::from_secs(60))
            .unwrap();
        let won = won.clone();
        tasks.push(tokio::spawn(async move {
            let term = candidate.campaign().await.unwrap();
            let order = won.fetch_add(1, Ordering::SeqCst);
            term.resign().await.unwrap();
            order
        }));
        // Each in line before the next joins: the line's order is known.
        within("in line", async {
            while etcd_testkit::gateway::count(&endpoint, waiters.as_bytes()).unwrap() <= i {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }
    held.resign().await.unwrap();
    for (i, t) in tasks.into_iter().enumerate() {
        // Woken by watches only (the poll is a minute): in order.
        let order = within("a waiter's turn", t).await.unwrap();
        assert_eq!(order, i);
    }
}
