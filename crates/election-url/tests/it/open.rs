//! Every backend opens from its URL and offers the same `Election`.

use std::time::Duration;

use election_core::Election;
use election_url::{Backend, BackendUrl, Error, Settings};
use futures::StreamExt;

/// One term on `backend` seen through the trait: claim, leader, observe,
/// lease set.
async fn one_term(backend: &Backend) {
    assert!(backend.leader("jobs").await.unwrap().is_none());
    let mut changes = Box::pin(
        backend
            .observe("jobs", Duration::from_millis(20))
            .await
            .unwrap(),
    );
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    let term = backend
        .candidate("jobs", "a")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let leader = backend.leader("jobs").await.unwrap().expect("a leads");
    assert_eq!(
        (leader.identity.as_str(), leader.epoch),
        ("a", term.epoch())
    );
    let seen = tokio::time::timeout(Duration::from_secs(30), changes.next())
        .await
        .expect("observe reports the term")
        .unwrap()
        .unwrap()
        .expect("a leader");
    assert_eq!(seen.epoch, term.epoch());
    // A contender trying once finds the claim held.
    let b = backend.candidate("jobs", "b").unwrap();
    assert!(b.try_campaign().await.unwrap().is_none());
    term.resign().await.unwrap();
    let set = backend.lease_set("node-a").await.unwrap();
    assert!(set.ask("shard-1").await.unwrap());
    assert!(set.held("shard-1"));
    assert!(set.epoch("shard-1").is_some());
    set.close().await;
    assert!(!set.held("shard-1"));
}

#[tokio::test]
async fn file_and_sqlite_open_from_their_urls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fb");
    let db = tmp.path().join("app.db");
    for (url, kind, path) in [
        (format!("file://{}", dir.display()), "file", &dir),
        (format!("sqlite://{}", db.display()), "sqlite", &db),
    ] {
        let url = BackendUrl::parse(&url).unwrap();
        // An observer creates nothing.
        let observer = Settings {
            observer: true,
            ..Settings::default()
        };
        assert!(
            matches!(url.open(&observer).await, Err(Error::Absent { .. })),
            "{url}"
        );
        assert!(!path.exists(), "{url}: created");
        let settings = Settings {
            ttl: Some(Duration::from_secs(3)),
            ..Settings::default()
        };
        let backend = url.open(&settings).await.unwrap();
        assert_eq!(backend.kind(), kind);
        one_term(&backend).await;
    }
}

#[tokio::test]
async fn settings_a_backend_has_no_use_for_are_named() {
    let s = Settings {
        ttl: Some(Duration::from_secs(3)),
        grace: Some(Duration::from_secs(1)),
        ..Settings::default()
    };
    let url = |u: &str| BackendUrl::parse(u).unwrap();
    assert_eq!(url("file:///d").unused_settings(&s), ["ttl", "grace"]);
    assert_eq!(url("sqlite:///d.db").unused_settings(&s), ["grace"]);
    assert!(url("nats://h:1").unused_settings(&s).is_empty());
    assert_eq!(url("postgres://h/db").unused_settings(&s), ["grace"]);
    // Settings the backend refuses are a configuration error.
    let short = Settings {
        ttl: Some(Duration::from_millis(1)),
        ..Settings::default()
    };
    let e = url("sqlite:///nowhere/d.db")
        .open(&short)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
}

#[tokio::test]
async fn nats_opens_from_its_url() {
    let server = nats_testkit::Server::start().unwrap();
    let url = BackendUrl::parse(&format!("{}?bucket=url-test&replicas=1", server.url())).unwrap();
    let observer = Settings {
        observer: true,
        ..Settings::default()
    };
    assert!(matches!(
        url.open(&observer).await,
        Err(Error::Absent { .. })
    ));
    let backend = url.open(&Settings::default()).await.unwrap();
    assert_eq!(backend.kind(), "nats");
    one_term(&backend).await;
    // A server that is not there.
    let gone = BackendUrl::parse("nats://127.0.0.1:1").unwrap();
    let e = gone
        .open(&Settings {
            connect_timeout: Some(Duration::from_millis(500)),
            ..Settings::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Opening(_)), "{e:?}");
    assert!(
        e.to_string().starts_with("cannot connect to NATS at"),
        "{e}"
    );
}

#[test]
fn nats_options_accept_a_short_renewal_and_a_grace_above_the_default_renewal() {
    let url = election_nats::NatsUrl::default();
    let ms = Duration::from_millis;
    let mut s = Settings {
        ttl: Some(ms(3000)),
        renew: Some(ms(500)),
        ..Settings::default()
    };
    let o = election_nats::nats_options(&s, &url).unwrap();
    assert_eq!(o.renew_every(), ms(500));
    assert!(o.grace() <= o.renew_every());
    s.grace = Some(ms(200));
    assert_eq!(
        election_nats::nats_options(&s, &url).unwrap().grace(),
        ms(200)
    );
    // A grace above the default renewal (a third of the TTL) under a
    // longer renewal given with it: the renewal is set first.
    let s = Settings {
        ttl: Some(ms(15_000)),
        renew: Some(ms(6_500)),
        grace: Some(ms(6_000)),
        ..Settings::default()
    };
    let o = election_nats::nats_options(&s, &url).unwrap();
    assert_eq!((o.renew_every(), o.grace()), (ms(6_500), ms(6_000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_opens_from_its_url() {
    let server = postgres_testkit::Server::start().expect("a PostgreSQL server");
    let url = BackendUrl::parse(&format!("{}?schema=url_test&ttl=3s", server.url())).unwrap();
    // An observer creates nothing.
    let observer = Settings {
        observer: true,
        ..Settings::default()
    };
    let e = url.open(&observer).await.unwrap_err();
    assert!(matches!(e, Error::Absent { .. }), "{e:?}");
    assert_eq!(
        server
            .sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'url_test'")
            .unwrap()
            .trim(),
        "0"
    );
    let backend = url.open(&Settings::default()).await.unwrap();
    assert_eq!(backend.kind(), "postgres");
    let e = backend
        .downcast_ref::<election_postgres::PostgresElection>()
        .expect("a PostgreSQL election");
    assert_eq!(e.options().ttl(), Duration::from_secs(3));
    assert_eq!(e.options().schema(), "url_test");
    one_term(&backend).await;
    // Now the observer finds the schema.
    let watcher = url.open(&observer).await.unwrap();
    assert!(watcher.leader("jobs").await.unwrap().is_none());
    // A TTL given twice, differently, is refused.
    let twice = Settings {
        ttl: Some(Duration::from_secs(4)),
        ..Settings::default()
    };
    assert!(matches!(url.open(&twice).await, Err(Error::Config(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passwords_come_from_the_url_or_a_passfile() {
    use std::os::unix::fs::PermissionsExt;
    let server = postgres_testkit::Server::start_with_password("pa:ss@w%rd").expect("a server");
    let settings = Settings::default();
    // In the URL (percent-encoded by the kit).
    let url = BackendUrl::parse(&server.url()).unwrap();
    assert!(!url.to_string().contains("pa:ss"));
    one_term(&url.open(&settings).await.unwrap()).await;
    // From a passfile (libpq's format, `:` escaped), never in the URL.
    let tmp = tempfile::tempdir().unwrap();
    let passfile = tmp.path().join("pgpass");
    std::fs::write(
        &passfile,
        format!(
            "# a comment\n127.0.0.1:{}:postgres:postgres:pa\\:ss@w%rd\n",
            server.port()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let bare = format!(
        "{}?passfile={}",
        server.url_without_password(),
        passfile.display()
    );
    let url = BackendUrl::parse(&bare).unwrap();
    let backend = url.open(&settings).await.unwrap();
    assert!(backend.leader("jobs").await.unwrap().is_none());
    // A passfile others may read is refused, saying why.
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = url.open(&settings).await.unwrap_err();
    assert!(
        e.downcast_ref::<election_postgres::PassfileError>()
            .is_some(),
        "{e:?}"
    );
    // A wrong password: the database cannot be used (fix, not retry), and
    // the error does not show the password.
    let wrong = format!(
        "postgres://postgres:wr0ngpw@127.0.0.1:{}/postgres",
        server.port()
    );
    let e = BackendUrl::parse(&wrong)
        .unwrap()
        .open(&settings)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.downcast_ref::<election_postgres::Error>(),
            Some(election_postgres::Error::Unusable { .. })
        ),
        "{e:?}"
    );
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains("wr0ngpw"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_postgres_server_is_unavailable() {
    // A port nothing listens on: a free port from a listener just closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = BackendUrl::parse(&format!("postgres://u@127.0.0.1:{port}/db")).unwrap();
    let e = url.open(&Settings::default()).await.unwrap_err();
    assert!(
        matches!(
            e.downcast_ref::<election_postgres::Error>(),
            Some(
                election_postgres::Error::Unavailable(_)
                    | election_postgres::Error::TimedOut { .. }
            )
        ),
        "{e:?}"
    );
}
