//! Faults on members of the tests' own: a killed member, a paused one, a
//! partition (a black-holed proxy), a cluster that loses its leader.

use std::time::Duration;

use election_core::Candidate;
use etcd_testkit::{Cluster, Member, Proxy};

use crate::common::{self, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_loses_before_another_can_win() {
    let member = Member::start().expect("etcd");
    let proxy = Proxy::start(member.client_port()).expect("a proxy");
    let prefix = common::prefix("partition");
    let holder = common::open(&format!("127.0.0.1:{}", proxy.port()), &prefix).await;
    let other = common::open(&member.endpoint(), &prefix).await;
    let term = holder
        .candidate("jobs", "a")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    proxy.black_hole(true);
    let lost_at = within("the holder's loss", async {
        term.lost().await;
        tokio::time::Instant::now()
    })
    .await;
    let next = Candidate::new(other.claim("jobs", "b").unwrap())
        .campaign()
        .await
        .unwrap();
    let won_at = tokio::time::Instant::now();
    assert!(lost_at <= won_at);
    assert!(next.epoch() > term.epoch());
    next.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_ends_the_term_and_a_restarted_one_serves_again() {
    let mut member = Member::start().expect("etcd");
    let prefix = common::prefix("killed");
    let election = common::open(&member.endpoint(), &prefix).await;
    let term = election
        .candidate("jobs", "a")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let epoch = term.epoch();
    member.kill().unwrap();
    within("the loss", term.lost()).await;
    member.restart().unwrap();
    let next = within(
        "a term after the restart",
        election.candidate("jobs", "b").unwrap().campaign(),
    )
    .await
    .unwrap();
    assert!(next.epoch() > epoch);
    next.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_on_a_cluster_survives_its_leader_dying_or_ends_safely() {
    let mut cluster = Cluster::start(3).expect("an etcd cluster");
    let endpoints = cluster.endpoints().join(",");
    let prefix = common::prefix("cluster");
    let election = common::open(&endpoints, &prefix).await;
    let term = election
        .candidate("jobs", "a")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let epoch = term.epoch();
    let leader = cluster.leader().unwrap();
    cluster.member_mut(leader).kill().unwrap();
    // Whether the term outlives the election of a new etcd leader depends
    // on timing; either way a later term has a higher epoch.
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(term);
    let next = within(
        "a term on the two members left",
        election.candidate("jobs", "b").unwrap().campaign(),
    )
    .await
    .unwrap();
    assert!(next.epoch() > epoch);
    next.resign().await.unwrap();
}
