//! Lease-set processes over one real nats-server: a killed process's
//! session ages out after the TTL, and its keys move after the failover
//! grace.

use crate::lease_set;

use std::time::Duration;

const TTL_MS: u64 = 3000;
const RENEW_MS: u64 = 1000;
const GRACE_MS: u64 = 1000;

fn bound() -> Duration {
    // The last session renewal was before the kill: it ages out within a
    // TTL, then the grace runs.
    Duration::from_millis(TTL_MS + GRACE_MS) + lease_set::SLACK
}

async fn run(count: usize) {
    let server = nats_testkit::Server::start().expect("nats-server");
    let (ttl, renew, grace) = (
        TTL_MS.to_string(),
        RENEW_MS.to_string(),
        GRACE_MS.to_string(),
    );
    let args = ["--ttl-ms", &ttl, "--renew-ms", &renew, "--grace-ms", &grace];
    lease_set::share_and_fail_over(&server.url(), &args, count, bound()).await;
}

/// A frozen holder's `held` answers false once its session could have run
/// out, and its keys move during the freeze.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_never_answers_held_for_keys_taken_over() {
    let server = nats_testkit::Server::start().expect("nats-server");
    let (ttl, renew, grace) = (
        TTL_MS.to_string(),
        RENEW_MS.to_string(),
        GRACE_MS.to_string(),
    );
    let args = ["--ttl-ms", &ttl, "--renew-ms", &renew, "--grace-ms", &grace];
    // A frozen NATS client holds nothing the server needs.
    lease_set::pause_past_the_ttl(&server.url(), &args, bound(), async || true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_a_thousand_keys_and_a_killed_ones_keys_move() {
    run(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_a_thousand_keys_and_two_are_killed_in_turn() {
    run(3).await;
}

/// The same on a 3-node cluster with R3 buckets, each process connected to
/// every node: a SIGKILLed holder's session ages out in the replicated
/// bucket and its keys move to the other process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_an_r3_cluster_share_a_thousand_keys_and_a_killed_ones_keys_move() {
    let cluster = nats_testkit::Cluster::start(3).expect("cluster");
    let (ttl, renew, grace) = (
        TTL_MS.to_string(),
        RENEW_MS.to_string(),
        GRACE_MS.to_string(),
    );
    let args = ["--ttl-ms", &ttl, "--renew-ms", &renew, "--grace-ms", &grace];
    let urls = format!("{}?replicas=3", cluster.urls().join(","));
    lease_set::share_and_fail_over(&urls, &args, 2, bound()).await;
}

/// Three balanced processes share the keys fairly; a killed one's keys
/// (and only those) go to the survivors, fairly, within the bound; a
/// newcomer gets its share from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_processes_share_fairly_and_take_over_a_killed_ones_keys() {
    let server = nats_testkit::Server::start().expect("nats-server");
    let (ttl, renew, grace) = (
        TTL_MS.to_string(),
        RENEW_MS.to_string(),
        GRACE_MS.to_string(),
    );
    let args = ["--ttl-ms", &ttl, "--renew-ms", &renew, "--grace-ms", &grace];
    lease_set::balance_and_fail_over(&server.url(), &args, bound()).await;
}
