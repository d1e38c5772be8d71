//! `NatsFence` against a real nats-server: refusals, equal tokens, the
//! fenced write and its race check, corrupt and deleted marks, bucket
//! settings, marks across reconnects and a killed server, and concurrent
//! writers with random tokens.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use election_core::Epoch;
use election_nats::NatsFence;
use fencing::{Advance, Error, Fence, ResourceName, Token};
use futures::StreamExt;
use nats_testkit::Server;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tokio::time::Instant;

const BUCKET: &str = "fences";

fn t(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).expect("epochs start at 1"))
}

/// `result` is [`Error::Stale`] for `resource`, with `presented` refused
/// below `high_water_mark`.
fn assert_stale<T: std::fmt::Debug>(
    result: Result<T, Error>,
    resource: &ResourceName,
    presented: Token,
    high_water_mark: Token,
) {
    match result {
        Err(Error::Stale {
            resource: r,
            presented: p,
            high_water_mark: m,
        }) => assert_eq!((&r, p, m), (resource, presented, high_water_mark)),
        other => panic!("expected Stale, got {other:?}"),
    }
}

fn resource(name: &str) -> ResourceName {
    ResourceName::new(name).expect("resource name")
}

fn start() -> Server {
    Server::start().expect("nats-server (see nats-testkit)")
}

async fn connect(server: &Server) -> async_nats::Client {
    async_nats::connect(server.url()).await.expect("connect")
}

async fn fence(server: &Server) -> NatsFence {
    NatsFence::open(connect(server).await, BUCKET, 1)
        .await
        .expect("open the fence bucket")
}

/// The bucket as a plain KV store, to look at or tamper with the raw keys.
async fn raw(server: &Server, bucket: &str) -> kv::Store {
    jetstream::new(connect(server).await)
        .get_key_value(bucket)
        .await
        .expect("the bucket")
}

async fn raw_value(store: &kv::Store, key: &str) -> Option<String> {
    store
        .get(key)
        .await
        .expect("get")
        .map(|v| String::from_utf8(v.to_vec()).expect("utf-8"))
}

#[tokio::test]
async fn stale_is_refused_with_both_tokens_and_equal_is_accepted() {
    let server = start();
    let fence = fence(&server).await;
    let ledger = resource("ledger");

    assert_eq!(fence.high_water_mark(&ledger).await.unwrap(), None);
    let first = fence.advance(&ledger, t(5)).await.unwrap();
    assert_eq!((first.previous, first.current), (None, t(5)));
    assert!(first.raised());

    let again = fence.advance(&ledger, t(5)).await.unwrap();
    assert_eq!((again.previous, again.current), (Some(t(5)), t(5)));
    assert!(!again.raised());

    let up = fence.advance(&ledger, t(7)).await.unwrap();
    assert_eq!((up.previous, up.current), (Some(t(5)), t(7)));

    assert_stale(fence.advance(&ledger, t(6)).await, &ledger, t(6), t(7));
    let err = fence.advance(&ledger, t(1)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "resource ledger: token 1 is older than the high-water mark 7"
    );
    assert!(err.is_permanent());
    assert_eq!(fence.high_water_mark(&ledger).await.unwrap(), Some(t(7)));

    // Another handle on another connection sees the same mark.
    let other = self::fence(&server).await;
    assert_eq!(other.high_water_mark(&ledger).await.unwrap(), Some(t(7)));
    assert!(matches!(
        other.advance(&ledger, t(6)).await,
        Err(Error::Stale { .. })
    ));
}

#[tokio::test]
async fn keys_are_encoded_and_values_are_decimal_text() {
    let server = start();
    let fence = fence(&server).await;
    let store = raw(&server, BUCKET).await;

    fence.advance(&resource("orders.v2 €"), t(3)).await.unwrap();
    fence
        .advance(&resource("plain_name-1"), t(12))
        .await
        .unwrap();
    assert_eq!(
        raw_value(&store, "orders=2Ev2=20=E2=82=AC")
            .await
            .as_deref(),
        Some("3")
    );
    assert_eq!(
        raw_value(&store, "plain_name-1").await.as_deref(),
        Some("12")
    );

    // The bucket keeps marks forever, in files, one value per key.
    let config = store.status().await.unwrap().info.config;
    assert_eq!(config.max_age, Duration::ZERO);
    assert_eq!(config.storage, jetstream::stream::StorageType::File);
    assert_eq!(config.max_messages_per_subject, 1);
    assert_eq!(fence.bucket(), BUCKET);
}

#[tokio::test]
async fn fenced_runs_the_write_refuses_stale_and_reports_a_race() {
    let server = start();
    let fence = fence(&server).await;
    let other = self::fence(&server).await;
    let report = resource("report");

    // Accepted: the write runs and its outcome comes back.
    let out = fence
        .fenced(&report, t(3), || async { "written" })
        .await
        .unwrap();
    assert_eq!(out, "written");
    assert_eq!(fence.high_water_mark(&report).await.unwrap(), Some(t(3)));

    // Stale: refused before the write, which never runs.
    let mut ran = false;
    let late = fence.fenced(&report, t(2), || async { ran = true }).await;
    assert!(
        matches!(late, Err(Error::Stale { presented, high_water_mark, .. })
            if (presented, high_water_mark) == (t(2), t(3))),
        "{late:?}"
    );
    assert!(!ran);

    // A writer with the same token moving the key meanwhile is no race.
    let same = fence
        .fenced(&report, t(3), || async {
            other.advance(&report, t(3)).await.unwrap();
            1
        })
        .await;
    assert_eq!(same.unwrap(), 1);

    // A newer token accepted while the write runs: the write has run, and
    // the confirmation reports it raced, with both tokens.
    let mut ran = false;
    let raced = fence
        .fenced(&report, t(4), || async {
            ran = true;
            other.advance(&report, t(5)).await.unwrap();
        })
        .await;
    assert!(ran);
    assert_stale(raced, &report, t(4), t(5));
    assert_eq!(fence.high_water_mark(&report).await.unwrap(), Some(t(5)));

    // The mark deleted while the write runs: reported, not confirmed.
    let store = raw(&server, BUCKET).await;
    let deleted = fence
        .fenced(&report, t(6), || async {
            store.delete("report").await.unwrap();
        })
        .await;
    assert!(
        matches!(&deleted, Err(Error::Corrupt { detail, .. }) if detail.contains("removed")),
        "{deleted:?}"
    );
}

#[tokio::test]
async fn a_corrupt_mark_is_reported_and_a_deleted_one_is_no_mark() {
    let server = start();
    let fence = fence(&server).await;
    let store = raw(&server, BUCKET).await;
    let queue = resource("queue");

    store.put("queue", "not a token".into()).await.unwrap();
    for result in [
        fence.high_water_mark(&queue).await.map(|_| ()),
        fence.advance(&queue, t(9)).await.map(|_| ()),
        fence.fenced(&queue, t(9), || async {}).await,
    ] {
        match result {
            Err(Error::Corrupt { location, detail }) => {
                assert_eq!(location, "fences/queue");
                assert!(detail.contains("not a token"), "{detail}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }
    store.put("queue", "0".into()).await.unwrap();
    assert!(matches!(
        fence.advance(&queue, t(1)).await,
        Err(Error::Corrupt { .. })
    ));

    // Deleting (or purging) a key removes its mark, like deleting a mark
    // file: the next token is accepted from "no mark", by compare-and-set
    // on the delete marker.
    store.put("queue", "4".into()).await.unwrap();
    store.delete("queue").await.unwrap();
    assert_eq!(fence.high_water_mark(&queue).await.unwrap(), None);
    let a = fence.advance(&queue, t(2)).await.unwrap();
    assert_eq!(a.previous, None);
    store.purge("queue").await.unwrap();
    assert_eq!(fence.high_water_mark(&queue).await.unwrap(), None);
    assert_eq!(fence.advance(&queue, t(1)).await.unwrap().previous, None);
}

#[tokio::test]
async fn open_refuses_buckets_that_lose_marks_and_bad_settings() {
    let server = start();
    let client = connect(&server).await;
    let js = jetstream::new(client.clone());
    js.create_key_value(kv::Config {
        bucket: "expiring".into(),
        max_age: Duration::from_secs(30),
        ..Default::default()
    })
    .await
    .unwrap();
    js.create_key_value(kv::Config {
        bucket: "volatile".into(),
        storage: jetstream::stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .unwrap();

    let err = NatsFence::open(client.clone(), "expiring", 1)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, election_nats::Error::BucketMismatch { bucket, found, .. }
            if bucket == "expiring" && found.contains("max age")),
        "{err:?}"
    );
    let err = NatsFence::open(client.clone(), "volatile", 1)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, election_nats::Error::BucketMismatch { found, .. } if found.contains("memory")),
        "{err:?}"
    );
    for (bucket, replicas) in [("bad.name", 1), ("", 1), ("fine", 0), ("fine", 6)] {
        let err = NatsFence::open(client.clone(), bucket, replicas)
            .await
            .unwrap_err();
        assert!(
            matches!(err, election_nats::Error::Config(_)),
            "{bucket:?} {replicas}: {err:?}"
        );
    }
    let err = NatsFence::open_with_timeout(client.clone(), "fine", 1, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, election_nats::Error::Config(_)), "{err:?}");

    // Opening twice (as many processes do) uses the same bucket.
    let a = NatsFence::open(client.clone(), "shared", 1).await.unwrap();
    let b = NatsFence::open(client, "shared", 1).await.unwrap();
    a.advance(&resource("x"), t(4)).await.unwrap();
    assert_eq!(b.high_water_mark(&resource("x")).await.unwrap(), Some(t(4)));
}

/// Runs blocking server control off the runtime's worker.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_survive_reconnects_and_a_killed_server() {
    let mut server = blocking(start);
    let jobs = resource("jobs");
    {
        let fence = fence(&server).await;
        fence.advance(&jobs, t(9)).await.unwrap();
    }

    // A new connection, a new handle: the mark is there.
    let fence = fence(&server).await;
    assert_eq!(fence.high_water_mark(&jobs).await.unwrap(), Some(t(9)));
    assert!(matches!(
        fence.advance(&jobs, t(8)).await,
        Err(Error::Stale { .. })
    ));

    // A handle with a short bound, to see the outage as it happens.
    let quick = NatsFence::open_with_timeout(
        connect(&server).await,
        BUCKET,
        1,
        Duration::from_millis(500),
    )
    .await
    .unwrap();
    assert_eq!(quick.request_timeout(), Duration::from_millis(500));

    // SIGKILL right after the write was acknowledged.
    blocking(|| server.kill()).expect("kill");
    let err = quick.advance(&jobs, t(10)).await.unwrap_err();
    assert!(
        matches!(err, Error::Unavailable { ref location, .. } if location == "fences/jobs"),
        "{err:?}"
    );
    assert!(!err.is_permanent());
    assert!(
        matches!(&err, Error::Unavailable { source, .. } if source.downcast_ref::<election_nats::Error>().is_some()),
        "the source is an election_nats::Error: {err:?}"
    );
    blocking(|| server.restart()).expect("restart");

    // The old clients reconnect by themselves; the mark survived.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match fence.high_water_mark(&jobs).await {
            Ok(mark) => {
                assert_eq!(mark, Some(t(9)));
                break;
            }
            Err(e) if Instant::now() < deadline => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no reconnect within 30 s: {e:?}"),
        }
    }
    assert!(matches!(
        fence.advance(&jobs, t(8)).await,
        Err(Error::Stale { .. })
    ));
    assert_eq!(
        fence.advance(&jobs, t(10)).await.unwrap().previous,
        Some(t(9))
    );

    // And a fresh client after the restart agrees.
    let fresh = self::fence(&server).await;
    assert_eq!(fresh.high_water_mark(&jobs).await.unwrap(), Some(t(10)));
    assert_eq!(
        raw_value(&raw(&server, BUCKET).await, "jobs")
            .await
            .as_deref(),
        Some("10")
    );
}

// ---------------------------------------------------------------------------
// Concurrent writers with random tokens.

/// One call a writer made, and what came of it.
#[derive(Debug)]
struct Call {
    token: Token,
    fenced: bool,
    start: Instant,
    end: Instant,
    /// `Some` for an accepted `advance`.
    advance: Option<Advance>,
    result: Result<(), Error>,
    /// The fenced write ran.
    wrote: bool,
}

impl Call {
    /// Its compare-and-set to `token` landed: accepted, or a fenced write
    /// that ran and then found it had raced.
    fn landed(&self) -> bool {
        self.result.is_ok() || self.wrote
    }
}

static CASE: AtomicU64 = AtomicU64::new(0);

/// One writer: its own client and handle, its calls in order.
async fn writer(
    url: String,
    resource: ResourceName,
    ops: Vec<(u64, bool)>,
    log: Arc<Mutex<Vec<(usize, Token)>>>,
    first_id: usize,
) -> Vec<(usize, Call)> {
    let client = async_nats::connect(url).await.expect("connect");
    let fence = NatsFence::open(client, BUCKET, 1).await.expect("open");
    let mut calls = Vec::new();
    for (i, (n, fenced)) in ops.into_iter().enumerate() {
        let id = first_id + i;
        let token = t(n);
        let start = Instant::now();
        let (advance, result, wrote) = if fenced {
            let wrote = Mutex::new(false);
            let result = fence
                .fenced(&resource, token, || async {
                    *wrote.lock().unwrap() = true;
                    // A pause before the write lands leaves room for a
                    // newer writer to get in first, so races happen.
                    tokio::time::sleep(Duration::from_micros(700 * (n % 4))).await;
                    log.lock().unwrap().push((id, token));
                })
                .await;
            (None, result, wrote.into_inner().unwrap())
        } else {
            match fence.advance(&resource, token).await {
                Ok(a) => (Some(a), Ok(()), false),
                Err(e) => (None, Err(e), false),
            }
        };
        calls.push((
            id,
            Call {
                token,
                fenced,
                start,
                end: Instant::now(),
                advance,
                result,
                wrote,
            },
        ));
    }
    calls
}

async fn concurrent_case(url: &str, writers: Vec<Vec<(u64, bool)>>) -> Result<(), TestCaseError> {
    let name = format!("case-{}", CASE.fetch_add(1, Ordering::Relaxed));
    let resource = resource(&name);
    let observer = jetstream::new(async_nats::connect(url).await.expect("connect"))
        .get_key_value(BUCKET)
        .await
        .expect("bucket");
    // Every value the key takes, in revision order (the order the
    // compare-and-sets landed). With history 1 a slow watcher may miss
    // some, never reorder them.
    let mut watch = observer.watch(&name).await.expect("watch");

    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let mut first_id = 0;
    for ops in writers {
        let len = ops.len();
        tasks.push(tokio::spawn(writer(
            url.to_owned(),
            resource.clone(),
            ops,
            log.clone(),
            first_id,
        )));
        first_id += len;
    }
    let mut calls = Vec::new();
    for task in tasks {
        calls.extend(task.await.expect("writer task"));
    }
    calls.sort_by_key(|(id, _)| *id);
    let calls: Vec<Call> = calls.into_iter().map(|(_, c)| c).collect();

    let checker = NatsFence::open(async_nats::connect(url).await.expect("connect"), BUCKET, 1)
        .await
        .expect("open");
    let last = checker
        .high_water_mark(&resource)
        .await
        .expect("final mark");

    // Outcomes are accepted or stale; nothing else under plain contention.
    let presented: BTreeSet<Token> = calls.iter().map(|c| c.token).collect();
    for c in &calls {
        match &c.result {
            Ok(()) => {
                if let Some(a) = c.advance {
                    prop_assert_eq!(a.current, c.token);
                    prop_assert!(a.previous.is_none_or(|p| p <= c.token), "{:?}", c);
                }
                prop_assert_eq!(c.wrote, c.fenced);
            }
            Err(Error::Stale {
                presented: p,
                high_water_mark,
                ..
            }) => {
                prop_assert_eq!(*p, c.token);
                prop_assert!(*high_water_mark > c.token, "{:?}", c);
                prop_assert!(presented.contains(high_water_mark), "{:?}", c);
                prop_assert!(Some(*high_water_mark) <= last, "{:?}", c);
            }
            Err(e) => prop_assert!(false, "unexpected failure {e:?} in {c:?}"),
        }
    }

    // The final mark is the highest accepted token.
    let accepted_max = calls
        .iter()
        .filter(|c| c.result.is_ok())
        .map(|c| c.token)
        .max();
    prop_assert!(accepted_max.is_some());
    prop_assert_eq!(last, accepted_max);
    let landed_max = calls.iter().filter(|c| c.landed()).map(|c| c.token).max();
    prop_assert_eq!(last, landed_max);

    // In real time: once a token has landed, every later call with a lower
    // token is refused without writing, and every later accepted call saw
    // a mark at least that high.
    for a in calls.iter().filter(|c| c.landed()) {
        for b in calls.iter().filter(|b| b.start > a.end) {
            if b.token < a.token {
                prop_assert!(
                    matches!(b.result, Err(Error::Stale { .. })) && !b.wrote,
                    "{b:?} got in after {a:?}"
                );
            }
            if let Some(adv) = b.advance {
                prop_assert!(adv.previous >= Some(a.token), "{b:?} after {a:?}");
            }
        }
    }

    // Fenced writes that were confirmed ran in token order: while one ran,
    // the mark was its token throughout.
    let confirmed: Vec<Token> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _)| calls[*id].result.is_ok())
        .map(|(_, token)| *token)
        .collect();
    prop_assert!(
        confirmed.windows(2).all(|w| w[0] <= w[1]),
        "confirmed writes out of order: {confirmed:?}"
    );

    // The values the key took, in the order the compare-and-sets landed,
    // never go down, and end at the final mark.
    let last_revision = observer
        .entry(&name)
        .await
        .expect("entry")
        .expect("the key exists")
        .revision;
    let landed: BTreeSet<Token> = calls
        .iter()
        .filter(|c| c.landed())
        .map(|c| c.token)
        .collect();
    let mut seen: Vec<(u64, Token)> = Vec::new();
    while seen.last().is_none_or(|(rev, _)| *rev < last_revision) {
        let entry = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("the watch keeps up")
            .expect("the watch goes on")
            .expect("a watched entry");
        prop_assert_eq!(entry.operation, kv::Operation::Put);
        let token: Token = std::str::from_utf8(&entry.value)
            .expect("utf-8")
            .parse()
            .expect("a token");
        prop_assert!(
            landed.contains(&token),
            "{token} was never presented and landed"
        );
        seen.push((entry.revision, token));
    }
    prop_assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
        "the mark went down: {seen:?}"
    );
    prop_assert_eq!(seen.last().map(|(_, token)| *token), last);
    Ok(())
}

/// Several tasks, each with its own client, present random tokens with
/// `advance` and `fenced` at once. Eight cases share one server (started
/// here, and stopped when the test ends), each on a fresh resource.
#[test]
fn concurrent_writers_never_lower_the_mark() {
    let server = start();
    let url = server.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    // Create the bucket once, before the writers race to.
    rt.block_on(async {
        fence(&server).await;
    });

    let mut runner = TestRunner::new(Config {
        cases: 8,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..Config::default()
    });
    let writers = proptest::collection::vec(
        proptest::collection::vec((1u64..=12, any::<bool>()), 1..=6),
        2..=4,
    );
    let result = runner.run(&writers, |writers| {
        rt.block_on(concurrent_case(&url, writers))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
