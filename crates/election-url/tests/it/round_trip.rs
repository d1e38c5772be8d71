//! Printing a backend URL and parsing it back gives the same URL.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use std::time::Duration;

use election_file::FileUrl;
use election_nats::NatsUrl;
use election_postgres::PostgresUrl;
use election_sqlite::SqliteUrl;
use election_url::{BackendUrl, REDACTED, Secret};
use proptest::prelude::*;

/// Any absolute path without NUL bytes.
fn path() -> impl Strategy<Value = PathBuf> {
    prop::collection::vec(prop::collection::vec(1u8..=255, 1..8), 1..4).prop_map(|parts| {
        let mut bytes = Vec::new();
        for p in parts {
            bytes.push(b'/');
            bytes.extend(p);
        }
        PathBuf::from(OsString::from_vec(bytes))
    })
}

/// Any text without NUL characters.
fn text() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,12}"
}

fn host() -> impl Strategy<Value = String> {
    ("[a-z0-9][a-z0-9.-]{0,10}", any::<u16>()).prop_map(|(h, p)| format!("{h}:{p}"))
}

fn nats() -> impl Strategy<Value = NatsUrl> {
    (
        prop::collection::vec(host(), 1..4),
        prop::option::of((text(), text())),
        prop::option::of(text()),
        prop::option::of(0usize..10),
        prop::option::of(path()),
        prop::option::of(text()),
        any::<bool>(),
    )
        .prop_map(|(servers, user, bucket, replicas, creds, token, ok)| {
            let mut n = NatsUrl::default();
            n.servers = servers;
            n.user = user.map(|(u, p)| (u, Secret::new(p)));
            n.bucket = bucket;
            n.replicas = replicas;
            // `?creds=` values are text.
            n.creds = creds.map(|c| PathBuf::from(c.to_string_lossy().into_owned()));
            n.token = token.map(Secret::new);
            n.single_replica_ok = ok;
            n
        })
}

fn duration() -> impl Strategy<Value = Duration> {
    (1u64..100_000_000).prop_map(Duration::from_millis)
}

fn pg_host() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9][a-z0-9._-]{0,10}",
        Just("[::1]".to_owned()),
        // A unix socket directory.
        path().prop_map(|p| format!("/{}", p.to_string_lossy().trim_start_matches('/'))),
    ]
}

fn postgres() -> impl Strategy<Value = PostgresUrl> {
    (
        (
            prop::option::of(("[^\u{0}]{1,12}", prop::option::of(text()))),
            pg_host(),
            prop::option::of(1u16..),
            prop::option::of("[^\u{0}]{1,12}"),
        ),
        (
            prop::option::of("[a-z_][a-z0-9_]{0,20}"),
            prop::option::of(duration()),
            prop::option::of(duration()),
            prop::option::of(path()),
            prop::option::of(prop::sample::select(vec![
                "disable",
                "require",
                "verify-full",
            ])),
        ),
    )
        .prop_filter("not a pg_ schema", |(_, (s, ..))| {
            s.as_deref().is_none_or(|s| !s.starts_with("pg_"))
        })
        .prop_map(
            |((user, host, port, database), (schema, ttl, renew, passfile, sslmode))| {
                let mut p = PostgresUrl::default();
                if let Some((u, pw)) = user {
                    p.user = Some(u);
                    p.password = pw.map(Secret::new);
                }
                p.host = host;
                p.port = port;
                p.database = database;
                p.schema = schema;
                p.ttl = ttl;
                p.renew = renew;
                p.passfile = passfile.map(|c| PathBuf::from(c.to_string_lossy().into_owned()));
                p.sslmode = sslmode.map(str::to_owned);
                p
            },
        )
}

fn url() -> impl Strategy<Value = BackendUrl> {
    prop_oneof![
        (path(), any::<bool>(), any::<bool>()).prop_map(|(dir, volatile_ok, unknown_fs_ok)| {
            let mut file = FileUrl::new(dir);
            file.volatile_ok = volatile_ok;
            file.unknown_fs_ok = unknown_fs_ok;
            BackendUrl::new(file)
        }),
        path().prop_map(|p| BackendUrl::new(SqliteUrl::new(p))),
        nats().prop_map(BackendUrl::new),
        postgres().prop_map(BackendUrl::new),
    ]
}

proptest! {
    #[test]
    fn print_then_parse_is_the_same_url(url in url()) {
        let whole = url.with_secrets().to_string();
        prop_assert_eq!(BackendUrl::parse(&whole), Ok(url.clone()), "{}", whole);
    }

    #[test]
    fn the_redacted_form_parses_and_hides_every_secret(url in url()) {
        let shown = url.to_string();
        let parsed = BackendUrl::parse(&shown);
        prop_assert!(parsed.is_ok(), "{}", shown);
        // Every secret the URL carries is hidden, whatever its backend.
        let creds = url.credentials();
        for secret in creds.password.iter().chain(creds.token.iter()) {
            if secret.expose().len() > REDACTED.len() {
                prop_assert!(!shown.contains(secret.expose()), "{}", shown);
            }
        }
        let parsed_creds = parsed.as_ref().map(BackendUrl::credentials).unwrap_or_default();
        prop_assert!(parsed_creds.password.iter().chain(parsed_creds.token.iter()).all(|t| t.expose() == REDACTED));
        if let Some(n) = url.downcast_ref::<NatsUrl>() {
            for secret in n.user.iter().map(|(_, p)| p).chain(n.token.iter()) {
                if secret.expose().len() > REDACTED.len() {
                    prop_assert!(!shown.contains(secret.expose()), "{}", shown);
                }
            }
            let p = parsed.as_ref().ok().and_then(|p| p.downcast_ref::<NatsUrl>()).expect("a NATS URL");
            prop_assert_eq!(&p.servers, &n.servers);
            prop_assert_eq!(&p.bucket, &n.bucket);
            prop_assert!(p.token.iter().all(|t| t.expose() == REDACTED));
        }
        if let Some(pg) = url.downcast_ref::<PostgresUrl>() {
            if let Some(secret) = &pg.password
                && secret.expose().len() > REDACTED.len()
            {
                prop_assert!(!shown.contains(secret.expose()), "{}", shown);
            }
            let p = parsed.as_ref().ok().and_then(|p| p.downcast_ref::<PostgresUrl>()).expect("a PostgreSQL URL");
            prop_assert_eq!(&p.host, &pg.host);
            prop_assert_eq!(&p.database, &pg.database);
            prop_assert!(p.password.iter().all(|t| t.expose() == REDACTED));
        }
    }

    #[test]
    fn any_text_parses_or_is_an_error(text in "\\PC{0,40}") {
        let _ = BackendUrl::parse(&text);
        let _ = election_url::redact(&text);
    }
}
