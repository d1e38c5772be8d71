//! Issue 26 item 7: every error kind of the PostgreSQL backend says what
//! happened and why in its `Display`, and a server's error never ends in
//! sqlx's "at line N" (the line of the server's C source that raised it).
//! Server errors come from a real server (postgres-testkit).

use std::error::Error as _;
use std::time::Duration;

use election_core::ConfigError;
use election_postgres::{Error, PostgresElection, PostgresOptions};
use election_testkit::display::{assert_chains, chain};
use postgres_testkit::Server;

fn fast() -> PostgresOptions {
    PostgresOptions::new(Duration::from_millis(900), Duration::from_millis(300)).expect("options")
}

/// A server's refusals (a wrong password, a missing database, a role
/// without the privilege to create the schema) name the server's message
/// and SQLSTATE, never the server's source line, in `{e}` and in the
/// whole chain. Before: "...: error returned from database: password
/// authentication failed for user \"postgres\" at line 334"-like tails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_name_the_cause_without_the_servers_source_line() {
    let server = Server::start_with_password("right").expect("a PostgreSQL server");
    let wrong = server.url().replace(":right@", ":wrong@");
    assert_ne!(wrong, server.url(), "the URL carries the password");
    let err = PostgresElection::connect(&wrong, fast())
        .await
        .expect_err("a wrong password");
    let text = chain(&err);
    assert!(matches!(err, Error::Unusable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the database cannot be used for elections: the server refused the credentials: \
         password authentication failed for user \"postgres\" [SQLSTATE 28P01]",
        "{text}"
    );
    assert!(err.source().is_none(), "{text}");

    let no_db = format!(
        "{}/no_such_db",
        server.url().rsplit_once('/').expect("a path").0
    );
    let err = PostgresElection::connect(&no_db, fast())
        .await
        .expect_err("no database");
    assert_eq!(
        chain(&err),
        "the database cannot be used for elections: no such database: database \"no_such_db\" \
         does not exist [SQLSTATE 3D000]"
    );

    server
        .sql("CREATE ROLE weak LOGIN PASSWORD 'weak'; REVOKE CREATE ON DATABASE postgres FROM PUBLIC")
        .expect("role");
    let weak = server.url().replace("postgres:right@", "weak:weak@");
    let err = PostgresElection::connect(&weak, fast())
        .await
        .expect_err("no privilege to create the schema");
    let text = chain(&err);
    assert!(
        text.starts_with(
            "the database cannot be used for elections: the role lacks a privilege the election \
             tables need: permission denied for database postgres"
        ) && text.ends_with("[SQLSTATE 42501]"),
        "{text}"
    );
    assert!(!text.contains(" at line "), "{text}");
}

#[test]
fn every_other_error_kind_says_what_and_why() {
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::Unavailable(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "Connection refused (os error 111)",
            ))),
            "the PostgreSQL server is unavailable: error communicating with database: \
             Connection refused (os error 111)",
        ),
        (
            Error::Unusable {
                reason: "the URL is not a valid postgres:// URL".into(),
                source: sqlx::Error::Configuration("invalid port number".into()),
            },
            "the database cannot be used for elections: the URL is not a valid postgres:// URL: \
             error with configuration: invalid port number",
        ),
        (
            Error::UnsafeSetting {
                setting: "synchronous_commit",
                value: "off".into(),
            },
            "synchronous_commit is off in this session: a claim acknowledged but lost in a crash \
             could hand the same epoch out twice; set it to on",
        ),
        (
            Error::SchemaTooNew {
                found: 9,
                supported: 1,
            },
            "the election schema is version 9, newer than the 1 this version supports; upgrade",
        ),
        (
            Error::CorruptRow {
                name: "jobs".into(),
                detail: "ttl_ms 0".into(),
            },
            "corrupt lease row for jobs: ttl_ms 0",
        ),
        (
            Error::OutcomeUnknown {
                after: Duration::from_secs(2),
            },
            "a request to PostgreSQL did not answer within 2s; its outcome is unknown",
        ),
        (
            Error::TimedOut {
                after: Duration::from_secs(2),
            },
            "a read from PostgreSQL did not answer within 2s",
        ),
        (
            Error::Database(sqlx::Error::RowNotFound),
            "a PostgreSQL statement failed: no rows returned by a query that expected to return \
             at least one row",
        ),
        (
            Error::Config(ConfigError::BadSetting {
                setting: "every",
                reason: "0ns is not between 1ms and 1h".into(),
            }),
            "bad setting every: 0ns is not between 1ms and 1h",
        ),
    ];
    assert_chains(cases);
}
