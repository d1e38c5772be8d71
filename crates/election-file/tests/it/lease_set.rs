//! Lease sets over a real directory: many keys shared by two sets of one
//! process, guard, and guarded writes through a file fence.

use std::sync::Arc;
use std::time::Duration;

use election_core::{Epoch, unguarded};
use election_file::{FileClaim, FileElection, LeaseSet, PerKeyClaims};
use fencing::{Fence, FileFence, ResourceName, Token};

const PATIENCE: Duration = Duration::from_secs(60);

fn election(dir: &tempfile::TempDir) -> FileElection {
    FileElection::new(dir.path().join("elections")).expect("election")
}

/// Waits, polling, until `f` holds; panics after `PATIENCE`.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    tokio::time::timeout(PATIENCE, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

/// Who holds `key`, as the lock and the epoch record say.
async fn leader(e: &FileElection, key: &str) -> Option<(String, Epoch)> {
    e.candidate(key, "observer")
        .expect("candidate")
        .leader()
        .await
        .expect("leader")
        .map(|l| (l.identity.to_string(), l.epoch))
}

/// A term of `key` won and resigned by another node first, so the next
/// term's epoch is 3 (the first term's, 2, would hide a token stuck at
/// `Epoch::FIRST`).
async fn earlier_term(e: &FileElection, key: &str) {
    let term = e
        .candidate(key, "node-old")
        .expect("candidate")
        .campaign()
        .await
        .expect("old wins");
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sets_share_fifty_keys_and_closing_one_hands_its_keys_to_the_other() {
    let dir = tempfile::tempdir().expect("dir");
    let e = election(&dir);
    // Two openings of one directory, as two services of one process would.
    let a = Arc::new(election(&dir).lease_set("node-a").await.expect("a"));
    let b = Arc::new(election(&dir).lease_set("node-b").await.expect("b"));
    let keys: Vec<String> = (0..50).map(|i| format!("shard-{i:02}")).collect();
    // A second of both sets waiting for every key.
    let held_before = election_testkit::conformance::lease_sets_share_keys(
        a,
        b.clone(),
        &keys,
        Duration::from_secs(1),
    )
    .await;
    let first = &keys[..keys.len() / 2];

    // The locks and epoch records agree: b holds every key, a's keys in a
    // later term.
    for (k, before) in first.iter().zip(&held_before) {
        let (holder, epoch) = leader(&e, k).await.expect("held");
        assert_eq!(holder, "node-b", "{k}");
        assert_eq!(b.epoch(k), Some(epoch));
        assert!(epoch > before.expect("held"), "{k}: a later term");
    }
    b.close().await;
    // a's cancelled waits may still take a freed lock for an instant (and
    // drop it at once, see the waiter), so poll for the vacancy.
    for k in &keys {
        tokio::time::timeout(PATIENCE, async {
            while leader(&e, k).await.is_some() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{k} still locked after close"));
    }
}

#[tokio::test]
async fn guard_runs_the_write_in_the_holders_term_and_names_the_holder_elsewhere() {
    let dir = tempfile::tempdir().expect("dir");
    let e = election(&dir);
    earlier_term(&e, "k").await;
    let a = e.lease_set("node-a").await.expect("a");
    let b = e.lease_set("node-b").await.expect("b");
    assert!(a.ask("k").await.expect("ask"));
    assert!(!b.ask("k").await.expect("ask"));

    let epoch = election_testkit::conformance::guard_names_the_holder(&a, &b, "k").await;
    assert_eq!(epoch.get(), 3, "the term after the earlier one");
    assert_eq!(leader(&e, "k").await, Some(("node-a".into(), epoch)));
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn guarded_writes_pass_the_fence_and_a_deposed_holders_token_does_not() {
    let dir = tempfile::tempdir().expect("dir");
    let e = election(&dir);
    let fence = FileFence::open(dir.path().join("fences")).expect("fence");
    let log = std::sync::Mutex::new(Vec::new());
    let write = |who: &'static str| {
        let log = &log;
        move || async move { log.lock().unwrap().push(who) }
    };
    let a = e.lease_set("node-a").await.expect("a");
    let b = e.lease_set("node-b").await.expect("b");
    assert!(a.ask("k").await.expect("ask"));
    assert!(!b.ask("k").await.expect("ask"));

    // A write of `who` through the fence under the key's own resource, in
    // `set`'s term of k; the token it used outlives the guard, as a delayed
    // write's would.
    let guarded_write = async |set: &LeaseSet<PerKeyClaims<FileClaim>>, who| -> Token {
        set.guard("k", async |t| {
            let token = Token::from(&t);
            fence
                .fenced(&ResourceName::for_key(t.key()), token, write(who))
                .await
                .map(|()| token)
        })
        .await
        .expect("guard")
        .unwrap_or_else(|e| panic!("{who}'s write is refused: {e:?}"))
    };
    let late = guarded_write(&a, "a").await;

    a.close().await;
    until("b to take k", || b.held("k")).await;
    let b_token = guarded_write(&b, "b").await;
    assert!(b_token > late, "b's term is later");
    assert_eq!(Some(b_token.epoch()), b.epoch("k"));

    let k = ResourceName::new("k").expect("name");
    // a's delayed write arrives now: refused before it runs.
    match fence.fenced(&k, late, write("a, late")).await {
        Err(fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        }) => {
            assert_eq!(presented, late);
            assert_eq!(high_water_mark, b_token);
        }
        other => panic!("expected Stale, got {other:?}"),
    }
    // So is an unguarded write: its token is epoch 1.
    let unguarded_write = unguarded("k", "test: no coordinator", async |t| {
        assert_eq!(t.epoch(), Epoch::UNGUARDED);
        fence
            .fenced(
                &ResourceName::for_key(t.key()),
                Token::from(&t),
                write("unguarded"),
            )
            .await
    })
    .await
    .expect("valid key");
    assert!(
        matches!(unguarded_write, Err(fencing::Error::Stale { .. })),
        "{unguarded_write:?}"
    );
    assert_eq!(
        *log.lock().unwrap(),
        ["a", "b"],
        "only the guarded writes ran"
    );
    assert_eq!(
        fence.high_water_mark(&k).await.expect("mark"),
        Some(b_token)
    );
    b.close().await;
}

/// Polls `future` once with a waker that does nothing.
fn poll_once<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

#[test]
fn lease_set_refuses_a_bad_identity_and_a_missing_runtime() {
    let dir = tempfile::tempdir().expect("dir");
    let e = election(&dir);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let bad = rt.block_on(async { e.lease_set("line\nbreak").await.map(|_| ()) });
    assert!(
        matches!(bad, Err(election_file::Error::Config(_))),
        "{bad:?}"
    );
    // Outside a runtime (polled once, by hand: it decides before any await).
    let outside = poll_once(e.lease_set("node-a"))
        .expect("answers at once")
        .map(|_| ());
    assert!(
        matches!(outside, Err(election_file::Error::Config(_))),
        "{outside:?}"
    );
}

/// A claim file replaced behind the holder's back (renamed over): another
/// candidate could lock the new file, so the commit point refuses at once,
/// whether or not the tamper watch (its interval an hour here; its
/// directory event may come first, ADR 0074) has reported the loss yet.
#[tokio::test]
async fn a_guard_whose_claim_file_was_replaced_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let elections = dir.path().join("elections");
    let options =
        election_file::FileOptions::default().tamper_check_interval(Duration::from_secs(3600));
    let e = FileElection::with_options(&elections, options).expect("election");
    let set = e.lease_set("node-a").await.expect("set");
    assert!(set.ask("k").await.expect("ask"));
    let before = set
        .guard("k", async |t| t.epoch())
        .await
        .expect("held: guard runs");

    let fresh = elections.join("k.lock.new");
    std::fs::write(&fresh, b"").expect("write");
    std::fs::rename(&fresh, elections.join("k.lock")).expect("rename over");

    let mut ran = false;
    let refused = set.guard("k", async |_t| ran = true).await;
    assert!(
        matches!(
            refused,
            Err(election_core::Error::Lost(_) | election_core::Error::NotHeld { .. })
        ),
        "expected Lost or NotHeld, got {refused:?}"
    );
    assert!(!ran, "the write must not run");
    // The term is over; the key's campaign may win the new file at once,
    // in a later term.
    until("the term to end", || set.epoch("k") != Some(before)).await;
    if let Some(later) = set.epoch("k") {
        assert!(later > before, "{later} after {before}");
    }
    set.close().await;
}
