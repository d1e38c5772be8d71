//! A balanced group at rest on etcd: once the shares are fair, nothing
//! claims. The membership rounds read the other members' slots; a slot's
//! holder that dies goes with its lease (etcd deletes the key), so no
//! reaper campaigns for a live member's slot (ADR 0118). Before, every
//! member kept a reaper polling each other member's slot: a claim
//! transaction every 250 ms per reaper, on a group doing nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use election_core::{LeaseSet, Membership};
use etcd_testkit::{Member, gateway};

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balanced_group_at_rest_sends_no_claims() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let prefix = common::prefix("balance");
    let keys: Vec<String> = (0..12).map(|i| format!("k-{i}")).collect();
    let every = Duration::from_millis(100);
    let mut sets: Vec<Arc<LeaseSet<_>>> = Vec::new();
    let mut members = Vec::new();
    for id in ["a", "b", "c"] {
        let election = common::open(&endpoint, &prefix).await;
        let set = Arc::new(election.lease_set(id).await.expect("a lease set"));
        for k in &keys {
            set.held(k); // asks for every key
        }
        members.push(Membership::start(election, "g", set.clone(), every).expect("join"));
        sets.push(set);
    }
    let counts = || -> Vec<usize> {
        sets.iter()
            .map(|s| keys.iter().filter(|k| s.held(k)).count())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while counts() != [4, 4, 4] {
        assert!(
            Instant::now() < deadline,
            "shares never fair: {:?}",
            counts()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = gateway::handled(&endpoint, "Txn").expect("metrics");
    // Twenty membership rounds, and eight polls of a reaper if any ran.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let claims = gateway::handled(&endpoint, "Txn").expect("metrics") - before;
    assert_eq!(counts(), [4, 4, 4], "the shares moved at rest");
    assert_eq!(claims, 0, "transactions sent by a group at rest");
    for m in members {
        m.stop().await;
    }
    for s in sets {
        s.close().await;
    }
}
