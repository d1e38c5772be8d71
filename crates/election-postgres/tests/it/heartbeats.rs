//! Lease-set heartbeats (ADR 0110): a lease set whose holder stopped renewing is
//! taken over a TTL after the contender's first sight of the holder's last
//! heartbeat, not a TTL after its first look at each key row; never while the
//! holder still renews, and never by a heartbeat deleted by hand.

use std::time::Duration;

use crate::common;

use election_core::Identity;
use election_postgres::{PostgresElection, PostgresKeyedClaims, PostgresOptions};
use election_testkit::heartbeats::{self, HandClock, HeartbeatCase};
use postgres_testkit::Server;

const TTL: Duration = Duration::from_secs(3);

/// Two sets over one server, on one hand-moved clock, and the server.
async fn case() -> (Server, HeartbeatCase<PostgresKeyedClaims>) {
    let server = common::server();
    let clock = HandClock::new();
    let options = PostgresOptions::new(TTL, Duration::from_secs(1)).expect("options");
    let open = || async {
        PostgresElection::connect(&server.url(), options.clone())
            .await
            .expect("connect")
            .with_clock(clock.clone())
    };
    let (ea, eb) = (open().await, open().await);
    let a = PostgresKeyedClaims::new(&ea, Identity::new("node-a").unwrap());
    let b = PostgresKeyedClaims::new(&eb, Identity::new("node-b").unwrap());
    let case = HeartbeatCase {
        a,
        b,
        advance: clock.advancer(),
        ttl: TTL,
    };
    (server, case)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_that_stopped_renewing_is_taken_over_a_ttl_after_its_last_heartbeat() {
    let (_server, case) = case().await;
    heartbeats::taken_over_a_ttl_after_the_last_heartbeat(case).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_that_renews_is_never_taken_over_by_heartbeat() {
    let (_server, case) = case().await;
    heartbeats::never_taken_over_while_renewing(case).await;
}

/// The heartbeat deleted between `b`'s last listing and its look: the
/// look finds no heartbeat, and the rows are held for a full TTL of `b`'s
/// own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_deleted_by_hand_takes_nothing_over() {
    let (server, case) = case().await;
    let id = case.a.state().heartbeat();
    heartbeats::deleted_by_hand_takes_nothing_over(case, id, async |id| {
        server
            .sql(&format!("DELETE FROM election.heartbeats WHERE id = {id}"))
            .expect("delete");
    })
    .await;
}
