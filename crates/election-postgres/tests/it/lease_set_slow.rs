//! A lease set on a server too slow for one claim statement of every key
//! within the request timeout (ADR 0058): the claim batches shrink until
//! they fit, and every key is held.

use crate::common;

use std::time::Duration;

use election_core::{Identity, LeaseSet};
use election_postgres::{PostgresKeyedClaims, PostgresOptions};

const KEYS: usize = 1000;

/// The timings of `testing/candidate-testkit`'s lease-set processes: TTL
/// 3 s, renewal every second, requests bounded by 500 ms.
fn options() -> PostgresOptions {
    PostgresOptions::new(Duration::from_millis(3000), Duration::from_millis(1000))
        .and_then(|o| o.with_request_timeout(Duration::from_millis(500)))
        .expect("options")
}

/// Every epoch record a claim writes costs the server 2 ms: a claim
/// statement of more than 250 keys cannot finish within the 500 ms
/// request timeout however fast the machine, one of a few keys always can.
/// Renewals and releases do not write epoch records.
const SLOW: &str = "CREATE FUNCTION election.slow_record() RETURNS trigger LANGUAGE plpgsql AS $$ \
     BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$; \
     CREATE TRIGGER slow_record BEFORE INSERT OR UPDATE ON election.epochs \
     FOR EACH ROW EXECUTE FUNCTION election.slow_record()";

/// 1,000 keys asked at once of a server where a claim of them all always
/// times out: before ADR 0058 every claim asked for all 1,000 keys in one
/// statement, timed out, and no key was ever held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_too_slow_for_the_request_timeout_shrinks_until_every_key_is_held() {
    let server = common::server();
    let e = common::open(&server, options()).await;
    server.sql(SLOW).expect("slow down the epoch records");
    let keys = PostgresKeyedClaims::new(&e, Identity::new("a").expect("identity"))
        .with_poll_interval(Duration::from_millis(200))
        .expect("poll");
    let set = LeaseSet::new(keys);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("shard-{i}")).collect();
    for key in &keys {
        set.held(key); // asks about it
    }
    let all_held = async {
        while !keys.iter().all(|k| set.held(k)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(60), all_held)
        .await
        .is_err()
    {
        let held = keys.iter().filter(|k| set.held(k)).count();
        let rows = server
            .sql("SELECT count(*) FROM election.leases WHERE holder = 'a'")
            .expect("rows");
        panic!(
            "{held} of {KEYS} keys held after 60 s ({rows} rows show the set as holder: \
             written by claims that timed out)"
        );
    }
    set.close().await;
    assert_eq!(
        server
            .sql("SELECT count(*) FROM election.leases WHERE holder IS NOT NULL")
            .expect("read"),
        "0",
        "close released every key"
    );
}
