//! Lease-set processes over one real PostgreSQL server (postgres-testkit):
//! a killed process's leases are taken over once a contender has seen no
//! renewal for a full TTL on its own monotonic clock (a dropped connection
//! alone does not prove the holder gone).

use crate::lease_set;

use std::time::Duration;

use election_url::{BackendUrl, Settings};
use postgres_testkit::Server;

const TTL_MS: u64 = 3000;
const RENEW_MS: u64 = 1000;
const POLL_MS: u64 = 200;

fn bound() -> Duration {
    // The last renewal was at most a renew interval before the kill; a
    // contender notices it within a poll, waits a full TTL, and claims at
    // its next poll.
    Duration::from_millis(TTL_MS + RENEW_MS + 2 * POLL_MS) + lease_set::SLACK
}

/// A server for the processes of a test, its URL, and the flags every
/// process gets.
async fn database() -> (Server, String, Vec<String>) {
    let server = Server::start().expect("a PostgreSQL server (apt-get install -y postgresql)");
    let url = server.url();
    // Create the schema once, so that the processes do not all migrate at
    // once (they could; these tests are about the leases).
    BackendUrl::parse(&url)
        .expect("url")
        .open(&Settings::default())
        .await
        .expect("open");
    let args = [
        ("--ttl-ms", TTL_MS),
        ("--renew-ms", RENEW_MS),
        ("--poll-ms", POLL_MS),
    ]
    .into_iter()
    .flat_map(|(flag, ms)| [flag.to_owned(), ms.to_string()])
    .collect();
    (server, url, args)
}

/// A frozen holder's `held` answers false once its leases could have run
/// out, and its keys move during the freeze.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_never_answers_held_for_keys_taken_over() {
    let (server, url, args) = database().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lease_set::pause_past_the_ttl(&url, &args, bound(), async || {
        no_transaction_left_open(&server)
    })
    .await;
}

/// Whether no session of the server is inside a transaction. The lease
/// steps are single statements, which the server finishes without the
/// frozen client; a process frozen inside a transaction would keep its row
/// locks, so nobody could take its keys over until it ran again.
fn no_transaction_left_open(server: &Server) -> bool {
    let open = server
        .sql(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()",
        )
        .expect("pg_stat_activity");
    open == "0"
}

async fn run(count: usize) {
    let (_server, url, args) = database().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lease_set::share_and_fail_over(&url, &args, count, bound()).await;
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
    let (_server, url, args) = database().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lease_set::balance_and_fail_over(&url, &args, bound()).await;
}
