//! The waiters' line (ADR 0109): a release wakes the first in line only,
//! and passes it the term in the one write of the handover (ADR 0119).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use election_core::{Candidate, Claim, Election, End};
use etcd_testkit::{Member, gateway};

use crate::common::{self, within};

/// Waits until `n` waiters are in `prefix`'s line for `jobs`.
async fn in_line(endpoint: &str, prefix: &str, n: i64) {
    let waiters = format!("{prefix}/w/jobs/");
    within("in line", async {
        while gateway::count(endpoint, waiters.as_bytes()).unwrap() < n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Two round trips of `term`'s own channel after the waiter joined: the
/// watch event of the join, which etcd queued when it applied it, reaches
/// the holder's renewal task (which keeps the head of the line for the
/// release) before the resign that follows.
async fn seen_by(term: &election_core::Term<election_etcd::EtcdClaim>) {
    term.confirm().await.unwrap();
    term.confirm().await.unwrap();
}

/// `held` resigns, and each of `waiting` (in line in this order) wins in
/// turn, each above the one before, and resigns.
async fn woken_in_turn(
    held: &election_core::Term<election_etcd::EtcdClaim>,
    waiting: Vec<
        tokio::task::JoinHandle<
            Result<election_core::Term<election_etcd::EtcdClaim>, election_core::Error>,
        >,
    >,
) {
    held.resign().await.unwrap();
    let mut last = held.epoch();
    for w in waiting {
        let term = within("a waiter's turn", w).await.unwrap().unwrap();
        assert!(term.epoch() > last, "{} not above {last}", term.epoch());
        last = term.epoch();
        term.resign().await.unwrap();
    }
}

/// A clean handover to a waiting candidate is one write (ADR 0119): the
/// holder's release puts the election key over with the waiter's lease, so
/// the successor's epoch is the revision right after the release's, and
/// the successor makes no write of its own to win. Before, the release
/// deleted the key (one revision) and the woken waiter's claim put it
/// again (a second). A member of its own: no other test's writes between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_passes_the_term_to_the_head_waiter_in_one_write() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let prefix = common::prefix("pass");
    let election = common::open(&endpoint, &prefix).await;
    let held = common::leads(&election, "a").await;
    let waiting = common::waits(&election, "b", Duration::from_secs(60));
    in_line(&endpoint, &prefix, 1).await;
    seen_by(&held).await;
    let before = gateway::revision(&endpoint).unwrap();
    held.resign().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("passed the term by the release, not the poll")
        .unwrap()
        .unwrap();
    assert_eq!(next.epoch().get_i64(), before + 1, "one write");
    let leader = election.leader("jobs").await.unwrap().expect("b leads");
    assert_eq!(
        (leader.identity.as_str(), leader.epoch),
        ("b", next.epoch())
    );
    assert_eq!(
        gateway::count(&endpoint, format!("{prefix}/w/jobs/").as_bytes()).unwrap(),
        0
    );
    // The passed term is b's in every check: confirm, proclaim (its epoch
    // kept in what observers read), renewals, its own release.
    next.confirm().await.unwrap();
    next.proclaim("10.0.0.2:8080").await.unwrap();
    let leader = election.leader("jobs").await.unwrap().expect("b leads");
    assert_eq!(leader.epoch, next.epoch());
    assert_eq!(
        leader.value.map(|v| v.as_str().to_owned()).as_deref(),
        Some("10.0.0.2:8080")
    );
    tokio::time::sleep(Duration::from_millis(1500)).await; // two renewals
    next.confirm().await.unwrap();
    assert!(!next.is_lost());
    next.resign().await.unwrap();
    assert_eq!(election.leader("jobs").await.unwrap(), None);
}

/// A term passed while the waiter was not watching (between its wait and
/// its next try) is found by that try: its claim's transaction reads the
/// key on its own lease. The passed term's epoch is the pass's revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_passed_unseen_is_found_at_the_next_try() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let prefix = common::prefix("unseen");
    let election = common::open(&endpoint, &prefix).await;
    let held = common::leads(&election, "a").await;
    let b = election.claim("jobs", "b").unwrap();
    let mut waiting = b.open().await.unwrap();
    assert!(b.try_claim(&mut waiting).await.unwrap().is_none());
    // In line, then out of its wait (cut off: a waiter whose key is held
    // waits on past its poll).
    within("in line", async {
        loop {
            let wait = b.wait(&mut waiting, Duration::from_millis(100));
            if let Ok(woken) = tokio::time::timeout(Duration::from_millis(300), wait).await {
                woken.unwrap();
            }
            if gateway::count(&endpoint, format!("{prefix}/w/jobs/").as_bytes()).unwrap() == 1 {
                return;
            }
        }
    })
    .await;
    seen_by(&held).await;
    let before = gateway::revision(&endpoint).unwrap();
    held.resign().await.unwrap();
    let passed = b
        .try_claim(&mut waiting)
        .await
        .unwrap()
        .expect("b holds it");
    assert_eq!(passed.epoch.get_i64(), before + 1);
    assert!(passed.epoch > held.epoch());
    let leader = Election::leader(&election, "jobs")
        .await
        .unwrap()
        .expect("b leads");
    assert_eq!(
        (leader.identity.as_str(), leader.epoch),
        ("b", passed.epoch)
    );
    b.confirm(&mut waiting).await.unwrap();
    b.release(&mut waiting).await.unwrap();
    b.close(waiting, End::Resigned);
    assert_eq!(election.leader("jobs").await.unwrap(), None);
}

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

/// Waiters at rest send no claims: at each poll a waiter reads the
/// election key (the backstop, should its watch have missed a change) and
/// waits on while the key is held. A claim's transaction is a raft write
/// even when refused; before, every waiter's poll sent one (30 `elect run`
/// waiters at the default 250 ms poll: 120 writes a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_at_rest_send_no_claims() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let prefix = common::prefix("rest");
    let election = common::open(&endpoint, &prefix).await;
    let held = common::leads(&election, "a").await;
    let mut waiting = Vec::new();
    for (n, who) in [(1, "b"), (2, "c")] {
        waiting.push(common::waits(&election, who, Duration::from_millis(50)));
        in_line(&endpoint, &prefix, n).await; // b ahead of c
    }
    let before = gateway::handled(&endpoint, "Txn").expect("metrics");
    // Twenty polls of each waiter.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let claims = gateway::handled(&endpoint, "Txn").expect("metrics") - before;
    assert_eq!(claims, 0, "transactions sent by waiters at rest");
    woken_in_turn(&held, waiting).await;
}

/// A waiter behind another reads nothing at its polls (ADR 0121): the key
/// ahead's deletion wakes it, and a pass goes only to the head. Here the
/// head `b` polls hourly and `c`, behind it, every 20 ms: fifty polls a
/// second, each a `Range` on the code before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_another_reads_nothing_at_its_polls() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let prefix = common::prefix("behind");
    let election = common::open(&endpoint, &prefix).await;
    let held = common::leads(&election, "a").await;
    let b = common::waits(&election, "b", Duration::from_secs(3600));
    in_line(&endpoint, &prefix, 1).await;
    let c = common::waits(&election, "c", Duration::from_millis(20));
    in_line(&endpoint, &prefix, 2).await;
    let before = gateway::handled(&endpoint, "Range").expect("metrics");
    // Fifty polls of c.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reads = gateway::handled(&endpoint, "Range").expect("metrics") - before;
    assert!(
        reads < 10,
        "{reads} reads in a second, with c behind b polling every 20 ms"
    );
    woken_in_turn(&held, vec![b, c]).await;
}

/// When the waiter ahead wins (the term passed to it, its waiter key
/// deleted), the one behind finds the line again without a claim (ADR
/// 0121): a chain of two handovers makes two transactions, the two
/// passes. Before, the waiter behind sent a claim (a refused `Txn`, a raft
/// write) as the one ahead started its term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_sends_no_claim_when_the_one_ahead_wins() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let prefix = common::prefix("ahead-wins");
    let election = common::open(&endpoint, &prefix).await;
    let held = common::leads(&election, "a").await;
    let hour = Duration::from_secs(3600);
    let b = common::waits(&election, "b", hour);
    in_line(&endpoint, &prefix, 1).await;
    let c = common::waits(&election, "c", hour);
    in_line(&endpoint, &prefix, 2).await;
    let before = gateway::handled(&endpoint, "Txn").expect("metrics");
    held.resign().await.unwrap();
    let b = within("b's turn", b).await.unwrap().unwrap();
    b.resign().await.unwrap();
    let c = within("c's turn", c).await.unwrap().unwrap();
    let txns = gateway::handled(&endpoint, "Txn").expect("metrics") - before;
    assert!(c.epoch() > b.epoch() && b.epoch() > held.epoch());
    eprintln!("{txns} transactions in two handovers");
    assert_eq!(txns, 2, "transactions in two handovers: the two passes");
    c.resign().await.unwrap();
}
