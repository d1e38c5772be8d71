//! Issue 26 item 7: every error kind of the NATS backend says what
//! happened and why in its `Display`; a chain printer shows each message
//! once.

use std::time::Duration;

use election_core::ConfigError;
use election_nats::Error;
use election_testkit::display::{assert_chains, chain};

#[test]
fn every_error_kind_says_what_and_why() {
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::Unavailable {
                what: "kv update",
                source: Some("no responders".into()),
            },
            "the NATS coordinator is unavailable: kv update: no responders",
        ),
        (
            Error::Unavailable {
                what: "the connection is closed",
                source: None,
            },
            "the NATS coordinator is unavailable: the connection is closed",
        ),
        (
            Error::OutcomeUnknown {
                after: Duration::from_secs(2),
            },
            "a NATS request timed out after 2s; its outcome is unknown",
        ),
        (
            Error::BucketMismatch {
                bucket: "elections".into(),
                found: "max_age 3s".into(),
                wanted: "max_age 10s".into(),
            },
            "bucket elections exists with max_age 3s, but this election needs max_age 10s",
        ),
        (
            Error::NoBucket {
                bucket: "elections".into(),
            },
            "bucket elections does not exist (yet): no election has run in it",
        ),
        (
            Error::CorruptValue {
                key: "jobs".into(),
                detail: "not JSON".into(),
            },
            "unreadable lease value for jobs: not JSON",
        ),
        (
            Error::Config(ConfigError::BadSetting {
                setting: "grace",
                reason: "0ns is below 1ms".into(),
            }),
            "bad setting grace: 0ns is below 1ms",
        ),
    ];
    assert_chains(cases);
}

/// A connection refused names the cause, from a real attempt (nothing
/// listens on the port).
#[tokio::test]
async fn a_refused_connection_names_the_cause() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let source = async_nats::ConnectOptions::new()
        .connect(url.as_str())
        .await
        .expect_err("nothing listens");
    let e = Error::Connect {
        url: url.clone(),
        source,
    };
    let text = chain(&e);
    assert!(
        text.starts_with(&format!("cannot connect to NATS at {url}: "))
            && text.len() > url.len() + 30,
        "{text}"
    );
}
