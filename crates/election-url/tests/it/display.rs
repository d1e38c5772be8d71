//! Issue 26 item 7: every error kind of `election-url` says what happened
//! and why in its `Display`; a backend's error is named once in a chain.

use std::path::PathBuf;

use election_testkit::display::{assert_chains, chain};
use election_url::{Error, ParseError};

/// The schemes compiled in, in the table's order.
const SCHEMES: &[&str] = &["file", "sqlite", "nats", "postgres"];

#[test]
fn every_parse_error_kind_says_what_and_why() {
    let cases: Vec<(ParseError, &str)> = vec![
        (
            ParseError::NoScheme {
                schemes: SCHEMES.to_vec(),
            },
            "no scheme (file://, sqlite://, nats:// or postgres://)",
        ),
        (
            ParseError::UnknownScheme {
                scheme: "redis".into(),
                schemes: SCHEMES.to_vec(),
            },
            "unknown scheme \"redis\" (file, sqlite, nats or postgres)",
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
            "bad backend URL: no scheme (file://, sqlite://, nats:// or postgres://)",
        ),
        (
            Error::Config(election_core::ConfigError::BadSetting {
                setting: "ttl",
                reason: "0ns is below 1ms".into(),
            }),
            "bad settings: bad setting ttl: 0ns is below 1ms",
        ),
        (
            Error::opening(election_nats::ConnectError::Credentials {
                path: PathBuf::from("/etc/app.creds"),
                source: std::io::Error::from_raw_os_error(2),
            }),
            "cannot read the NATS credentials file /etc/app.creds: No such file or directory \
             (os error 2)",
        ),
        (
            Error::Absent {
                what: "the directory /srv/elections".into(),
            },
            "the directory /srv/elections does not exist: no election has run there",
        ),
        (
            Error::opening(election_postgres::PassfileError::new(
                "/etc/app.pass",
                "others may read it (mode 0644)",
            )),
            "cannot use the password file /etc/app.pass: others may read it (mode 0644)",
        ),
        (
            Error::from(election_file::Error::NotADirectory {
                path: PathBuf::from("/srv/file"),
            }),
            "the file backend: /srv/file is not a directory",
        ),
        (
            Error::from(election_sqlite::Error::FileReplaced {
                path: PathBuf::from("/srv/app.db"),
            }),
            "the SQLite backend: the database file /srv/app.db was deleted or replaced after it \
             was opened; reopen it (epochs in a replaced file can repeat)",
        ),
        (
            Error::from(election_nats::Error::NoBucket {
                bucket: "elections".into(),
            }),
            "the NATS backend: bucket elections does not exist (yet): no election has run in it",
        ),
        (
            Error::from(election_postgres::Error::TimedOut {
                after: std::time::Duration::from_secs(2),
            }),
            "the PostgreSQL backend: a read from PostgreSQL did not answer within 2s",
        ),
    ];
    assert_chains(cases);
    // A backend error with a source below it: named once.
    let e = Error::from(election_file::Error::PermissionDenied {
        path: PathBuf::from("/srv/e"),
        source: std::io::Error::from_raw_os_error(13),
    });
    assert_eq!(
        chain(&e),
        "the file backend: permission denied: /srv/e; give this process read and write access: \
         Permission denied (os error 13)"
    );
}
