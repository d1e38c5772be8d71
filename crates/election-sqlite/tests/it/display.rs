//! Issue 26 item 7: every error kind of the SQLite backend says what
//! happened and why in its `Display`; a chain printer shows each message
//! once.

use std::path::PathBuf;
use std::time::Duration;

use election_core::ConfigError;
use election_sqlite::Error;
use election_testkit::display::assert_chains;

#[test]
fn every_error_kind_says_what_and_why() {
    let sqlx = || sqlx::Error::Protocol("database is locked".into());
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::Busy(sqlx()),
            "the database is busy (locked by another connection past the busy timeout): \
             encountered unexpected or invalid data: database is locked",
        ),
        (
            Error::ReadOnly(sqlx()),
            "the database is read-only for this process: encountered unexpected or invalid \
             data: database is locked",
        ),
        (
            Error::NotAFile {
                path: PathBuf::from("/srv/app.db"),
                source: None,
            },
            "/srv/app.db is not a usable database file",
        ),
        (
            Error::PathUnresolvable {
                path: PathBuf::from("/srv/x/app.db"),
                source: std::io::Error::other("No such file or directory (os error 2)"),
            },
            "cannot resolve the database path /srv/x/app.db: No such file or directory (os error 2)",
        ),
        (
            Error::SchemaTooNew {
                found: 9,
                supported: 2,
            },
            "the election schema is version 9, newer than the 2 this version supports; upgrade",
        ),
        (
            Error::FileReplaced {
                path: PathBuf::from("/srv/app.db"),
            },
            "the database file /srv/app.db was deleted or replaced after it was opened; reopen \
             it (epochs in a replaced file can repeat)",
        ),
        (
            Error::CorruptRow {
                name: "jobs".into(),
                detail: "ttl_ms 0".into(),
            },
            "corrupt lease row for jobs: ttl_ms 0",
        ),
        (
            Error::Unusable(sqlx()),
            "the database file is not a usable election database: encountered unexpected or \
             invalid data: database is locked",
        ),
        (
            Error::Database(sqlx::Error::RowNotFound),
            "a database statement failed: no rows returned by a query that expected to return at \
             least one row",
        ),
        (
            Error::OutcomeUnknown {
                after: Duration::from_secs(1),
            },
            "a database statement timed out after 1s; its outcome is unknown",
        ),
        (
            Error::Config(ConfigError::BadSetting {
                setting: "busy_timeout",
                reason: "0ns is below 1ms".into(),
            }),
            "bad setting busy_timeout: 0ns is below 1ms",
        ),
    ];
    assert_chains(cases);
    let second = Error::SecondName {
        path: PathBuf::from("/data/app.db"),
        hard_links: 2,
        own_mount: false,
    };
    assert!(
        second.to_string().starts_with(
            "/data/app.db has 2 hard links: SQLite keeps a -wal and -shm file per name"
        ) && second
            .to_string()
            .ends_with("(keep one name for the database file)"),
        "{second}"
    );
}
