//! Lease sets on a real server: batched statements (one renewal statement
//! per interval for every held key, one claim statement per poll), a
//! close handing keys to a set that polls hourly (by notification), and
//! sets contending with single candidates for the same rows.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use election_core::{Identity, LeaseSet};
use election_postgres::{PostgresElection, PostgresKeyedClaims};

const HOUR: Duration = Duration::from_secs(3600);

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 60s"))
}

fn set(e: &PostgresElection, identity: &str, poll: Duration) -> Arc<LeaseSet<PostgresKeyedClaims>> {
    let keys = PostgresKeyedClaims::new(e, Identity::new(identity).expect("identity"))
        .with_poll_interval(poll)
        .expect("poll");
    Arc::new(LeaseSet::new(keys))
}

/// `set.ask(key)`, asked again after transient errors (a busy machine).
async fn ask(set: &LeaseSet<PostgresKeyedClaims>, key: &str) -> bool {
    within("an answer", async {
        loop {
            match set.ask(key).await {
                Ok(held) => return held,
                Err(
                    election_core::Error::Unavailable { .. }
                    | election_core::Error::OutcomeUnknown { .. },
                ) => tokio::task::yield_now().await,
                Err(e) => panic!("ask {key}: {e:?}"),
            }
        }
    })
    .await
}

/// Waits until `set` holds every key of `keys`.
async fn holds_all(set: &LeaseSet<PostgresKeyedClaims>, keys: &[String]) {
    within("the set holds every key", async {
        while !keys.iter().all(|k| set.held(k)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

fn statements(server: &postgres_testkit::Server, needle: &str) -> usize {
    let log = std::fs::read_to_string(server.log_path()).expect("log");
    log.lines().filter(|l| l.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_keys_cost_one_statement_per_interval() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = set(&e, "a", Duration::from_millis(50));
    let keys: Vec<String> = (0..200).map(|i| format!("shard-{i}")).collect();
    server
        .sql("ALTER SYSTEM SET log_statement = 'all'")
        .expect("log every statement");
    server.sql("SELECT pg_reload_conf()").expect("reload");
    for k in &keys {
        ask(&a, k).await;
    }
    holds_all(&a, &keys).await;
    // Three renewals of every key, seen in the rows.
    let version = || {
        server
            .sql("SELECT min(version) FROM election.leases")
            .expect("read")
            .parse::<i64>()
            .expect("number")
    };
    // Counted over a window of renewals only: how many intervals passed
    // while the 200 keys were asked depends on the machine's load, not on
    // the statements an interval costs.
    const RENEWAL: &str = "SET version = l.version + 1, renewed_unix_ms";
    let before = statements(&server, RENEWAL);
    let start = version();
    within("three renewals", async {
        while version() < start + 3 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let rounds = version() - start;
    let renewals = statements(&server, RENEWAL) - before;
    // Per statement, not per key: about one statement per round of every
    // key (a round per key would be 200), with room for a retried round
    // and the log's lag at either end of the window.
    assert!(
        renewals >= 1 && i64::try_from(renewals).unwrap() <= 2 * rounds + 3,
        "{renewals} renewal statements for {rounds} rounds of 200 keys"
    );
    // Another set waits for all 200 keys; when `a` closes, it claims them
    // in a handful of claim statements, not one per key.
    let b = set(&e, "b", HOUR);
    for k in &keys {
        assert!(!ask(&b, k).await, "a holds {k}");
    }
    let before = statements(&server, "WITH t AS (");
    a.close().await;
    holds_all(&b, &keys).await;
    let claims = statements(&server, "WITH t AS (") - before;
    assert!(
        (1..10).contains(&claims),
        "{claims} claim statements for 200 keys"
    );
    b.close().await;
    assert_eq!(
        server
            .sql("SELECT count(*) FROM election.leases WHERE holder IS NOT NULL")
            .expect("read"),
        "0",
        "close released every key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_hands_keys_to_a_set_that_polls_hourly() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = set(&e, "a", HOUR);
    let b = set(&e, "b", HOUR);
    let keys: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
    for k in &keys {
        ask(&a, k).await;
    }
    holds_all(&a, &keys).await;
    for k in &keys {
        assert!(!ask(&b, k).await, "a holds {k}");
    }
    let epochs: Vec<_> = keys.iter().map(|k| a.epoch(k).expect("held")).collect();
    a.close().await;
    holds_all(&b, &keys).await;
    for (k, before) in keys.iter().zip(epochs) {
        assert!(b.epoch(k).expect("held") > before);
    }
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_and_single_candidates_share_rows() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let term = e
        .candidate("k", "single")
        .expect("c")
        .campaign()
        .await
        .expect("single");
    let a = set(&e, "a", HOUR);
    assert!(!ask(&a, "k").await);
    term.resign().await.expect("resign");
    holds_all(&a, &["k".to_owned()]).await;
    assert!(a.epoch("k").expect("held") > term.epoch());
    let leader = e.leader("k").await.expect("read").expect("a leads");
    assert_eq!(leader.identity.as_str(), "a");
    a.close().await;
    let again = e
        .candidate("k", "single")
        .expect("c")
        .campaign()
        .await
        .expect("single again");
    again.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_row_is_lost_by_its_set_and_waited_out_by_others() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = set(&e, "a", Duration::from_millis(20));
    ask(&a, "k").await;
    holds_all(&a, &["k".to_owned()]).await;
    let before = a.epoch("k").expect("held");
    server
        .sql("DELETE FROM election.leases WHERE name = 'k'")
        .expect("delete");
    let b = set(&e, "b", Duration::from_millis(20));
    ask(&b, "k").await;
    within("a loses k", async {
        while a.held("k") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // `a` asks again too: whoever wins, the epoch is above the lost one,
    // and only one set holds the key.
    within("a set wins k again", async {
        while !a.held("k") && !b.held("k") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let (winner, other) = if a.held("k") { (&a, &b) } else { (&b, &a) };
    assert!(!other.held("k"), "two sets hold k");
    assert!(winner.epoch("k").expect("held") > before);
    b.close().await;
    a.close().await;
}
