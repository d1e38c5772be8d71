//! Helpers the PostgreSQL backend's test files share (each uses a part).
#![allow(dead_code)]

use std::time::Duration;

use election_postgres::{PostgresElection, PostgresOptions};
use postgres_testkit::Server;

/// A fresh server (a loud failure with the install command when
/// PostgreSQL is missing).
pub(crate) fn server() -> Server {
    Server::start().expect("PostgreSQL must be installed: apt-get install -y postgresql")
}

/// Short timings: TTL 1.2 s, renewal every 400 ms, requests bounded by
/// 400 ms (the most the options allow). The machine running the tests may
/// be busy: CI runs three tests per two cores, each starting its own
/// server, and a first claim bounded by 150 ms answered `OutcomeUnknown`
/// there (`a_deposed_holders_proclaim_is_refused`, 1 run in 18 with six
/// copies side by side).
pub(crate) fn fast() -> PostgresOptions {
    PostgresOptions::new(Duration::from_millis(1200), Duration::from_millis(400))
        .and_then(|o| o.with_request_timeout(Duration::from_millis(400)))
        .expect("options")
}

/// The election on `server` with `options`, on a pool of its own.
pub(crate) async fn open(server: &Server, options: PostgresOptions) -> PostgresElection {
    PostgresElection::connect(&server.url(), options)
        .await
        .expect("connect")
}

/// Another node takes the row of `name` over, as after a partition: a new
/// holder with an epoch from the sequence. True if there was a row.
pub(crate) fn intrude(server: &Server, name: &str) -> bool {
    let quoted = name.replace('\'', "''");
    let n = server
        .sql(&format!(
            "WITH u AS (UPDATE election.leases SET holder = 'intruder', nonce = 0,
                 epoch = nextval('election.epoch_seq'), version = version + 1
               WHERE name = '{quoted}' RETURNING 1) SELECT count(*) FROM u"
        ))
        .expect("intrude");
    n == "1"
}
