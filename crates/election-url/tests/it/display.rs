//! Issue 26 item 7: every error kind of `election-url` says what happened
//! and why in its `Display`. Each backend's own errors are checked in its
//! crate (`src/driver.rs`), where they are defined.

use election_testkit::display::assert_chains;
use election_url::{Error, ParseError};

/// The schemes compiled in, in the table's order.
const SCHEMES: &[&str] = &["file", "sqlite", "nats", "postgres", "etcd"];

#[test]
fn every_parse_error_kind_says_what_and_why() {
    let cases: Vec<(ParseError, &str)> = vec![
        (
            ParseError::NoScheme {
                schemes: SCHEMES.to_vec(),
            },
            "no scheme (file://, sqlite://, nats://, postgres:// or etcd://)",
        ),
        (
            ParseError::UnknownScheme {
                scheme: "redis".into(),
                schemes: SCHEMES.to_vec(),
            },
            "unknown scheme \"redis\" (file, sqlite, nats, postgres or etcd)",
        ),
        (
            ParseError::UnknownOption {
                scheme: "sqlite",
                option: "tll".into(),
                known: &["ttl", "renew"],
            },
            "unknown option \"tll\" (sqlite:// knows ttl, renew)",
        ),
        (
            ParseError::UnknownOption {
                scheme: "file",
                option: "ttl".into(),
                known: &[],
            },
            "unknown option \"ttl\" (file:// URLs take no options)",
        ),
        (
            ParseError::RepeatedOption {
                option: "ttl".into(),
            },
            "option \"ttl\" is given twice",
        ),
        (ParseError::NotKeyValue, "an option is not key=value"),
        (
            ParseError::BadValue {
                option: "ttl".into(),
                reason: "not a duration".into(),
            },
            "ttl: the value is not a duration",
        ),
        (
            ParseError::Malformed {
                reason: "a relative path".into(),
            },
            "a relative path",
        ),
    ];
    assert_chains(cases);
}

#[test]
fn every_error_kind_says_what_and_why() {
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::Url(ParseError::NoScheme {
                schemes: SCHEMES.to_vec(),
            }),
            "bad backend URL: no scheme (file://, sqlite://, nats://, postgres:// or etcd://)",
        ),
        (
            Error::Config(election_core::ConfigError::BadSetting {
                setting: "ttl",
                reason: "0ns is below 1ms".into(),
            }),
            "bad settings: bad setting ttl: 0ns is below 1ms",
        ),
        (
            Error::Absent {
                what: "the directory /srv/elections".into(),
            },
            "the directory /srv/elections does not exist: no election has run there",
        ),
    ];
    assert_chains(cases);
}
