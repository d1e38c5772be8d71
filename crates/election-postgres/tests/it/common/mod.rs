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

/// Short timings: TTL 600 ms, renewal every 150 ms, requests bounded by
/// 150 ms (the most the options allow: the machine running the tests may
/// be busy).
pub(crate) fn fast() -> PostgresOptions {
    PostgresOptions::new(Duration::from_millis(600), Duration::from_millis(150))
        .and_then(|o| o.with_request_timeout(Duration::from_millis(150)))
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
