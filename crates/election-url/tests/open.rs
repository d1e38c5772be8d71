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
    assert_eq!(s.unused_by(&url("file:///d")), ["ttl", "grace"]);
    assert_eq!(s.unused_by(&url("sqlite:///d.db")), ["grace"]);
    assert!(s.unused_by(&url("nats://h:1")).is_empty());
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
    assert!(matches!(e, Error::Connect { .. }), "{e:?}");
}

#[test]
fn nats_options_accept_a_short_renewal_and_a_grace_above_the_default_renewal() {
    let url = election_url::NatsUrl::default();
    let ms = Duration::from_millis;
    let mut s = Settings {
        ttl: Some(ms(3000)),
        renew: Some(ms(500)),
        ..Settings::default()
    };
    let o = s.nats_options(&url).unwrap();
    assert_eq!(o.renew_every(), ms(500));
    assert!(o.grace() <= o.renew_every());
    s.grace = Some(ms(200));
    assert_eq!(s.nats_options(&url).unwrap().grace(), ms(200));
    // A grace above the default renewal (a third of the TTL) under a
    // longer renewal given with it: the renewal is set first.
    let s = Settings {
        ttl: Some(ms(15_000)),
        renew: Some(ms(6_500)),
        grace: Some(ms(6_000)),
        ..Settings::default()
    };
    let o = s.nats_options(&url).unwrap();
    assert_eq!((o.renew_every(), o.grace()), (ms(6_500), ms(6_000)));
}
