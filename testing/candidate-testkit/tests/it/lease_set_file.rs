//! Lease-set processes over the file backend: a killed process's locks are
//! freed by the kernel at once, so its keys move right away.

use crate::lease_set;

use std::time::Duration;

const POLL_MS: u64 = 200;

fn bound() -> Duration {
    // No TTL, no grace: only the slack. Each key taken over writes a
    // durable epoch record (two fsyncs), hundreds of them at once on a disk
    // the other tests share: a loaded CI run once took 5.5 s for 564 keys.
    Duration::from_secs(20) + 2 * Duration::from_millis(POLL_MS)
}

async fn run(count: usize) {
    let dir = lease_set::disk_dir();
    let url = format!("file://{}", dir.path().join("leases").display());
    let poll = POLL_MS.to_string();
    lease_set::share_and_fail_over(&url, &["--poll-ms", &poll], count, bound()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_a_thousand_keys_and_a_killed_ones_keys_move() {
    run(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_a_thousand_keys_and_two_are_killed_in_turn() {
    run(3).await;
}

/// Three balanced processes share the keys fairly; a killed one's keys
/// (and only those) go to the survivors, fairly, within the bound; a
/// newcomer gets its share from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_processes_share_fairly_and_take_over_a_killed_ones_keys() {
    let dir = lease_set::disk_dir();
    let url = format!("file://{}", dir.path().join("leases").display());
    let poll = POLL_MS.to_string();
    lease_set::balance_and_fail_over(&url, &["--poll-ms", &poll], bound()).await;
}
