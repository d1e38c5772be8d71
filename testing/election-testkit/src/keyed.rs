//! The lease-set conformance suite: what the single suite checks of a
//! [`Claim`](election_core::Claim), checked per key of a [`LeaseSet`] over a
//! backend's [`KeyedClaims`].
//!
//! A backend crate implements [`KeyedBackend`] for a factory of its keyed
//! claims and calls [`keyed_conformance_tests!`](crate::keyed_conformance_tests)
//! in one of its integration tests; that expands to one `#[tokio::test]`
//! per case below. Waits are bounded by [`PATIENCE`](crate::conformance::PATIENCE), a generous bound for
//! events, not a timing goal.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use election_core::{
    Election, Epoch, Error, Identity, KeyEvent, KeyEvents, KeyedClaims, LeaseSet, Membership,
    SetMember,
};

use crate::conformance::{answered, cancel_after, until, within};

/// A backend under test: makes lease sets for the cases.
pub trait KeyedBackend: Send + Sync {
    /// The backend's keyed claims.
    type Keys: KeyedClaims;

    /// Keyed claims for a set with `identity`. Each call opens the backend
    /// afresh (a new handle on the same stored state), so epochs must carry
    /// over between sets made by different calls.
    ///
    /// ```
    /// use election_core::LeaseSet;
    /// use election_testkit::keyed::KeyedBackend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(KeyedBackend::keys(&backend, "node-a").await?);
    /// assert!(set.ask("shard-1").await?);
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    fn keys(&self, identity: &str) -> impl Future<Output = Result<Self::Keys, Error>> + Send;

    /// Takes `key` away from its holder the way this backend loses one
    /// within rule 2: the holder's loss is reported before another set
    /// could win the key (a checker asserts that no key is ever held by
    /// two sets). Returns false if the backend has no such way, e.g. only
    /// a tamper that rule 2 does not cover (the cases then only check that
    /// nothing is lost).
    ///
    /// ```
    /// use election_core::LeaseSet;
    /// use election_testkit::keyed::KeyedBackend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(KeyedBackend::keys(&backend, "node-a").await?);
    /// assert!(set.ask("shard-1").await?);
    /// if backend.take_away("shard-1").await {
    ///     assert!(!set.held("shard-1")); // reported before anyone else could win it
    /// }
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    fn take_away(&self, key: &str) -> impl Future<Output = bool> + Send;
}

/// The keyed claims of `identity`, waiting for a server that does not
/// answer yet ([`answered`]); any other error fails the test.
async fn set<B: KeyedBackend>(b: &B, identity: &str) -> Arc<LeaseSet<B::Keys>> {
    let keys = answered(&format!("keyed claims for {identity}"), || b.keys(identity)).await;
    Arc::new(LeaseSet::new(keys))
}

/// Waits until `set` holds `key` (it keeps asking); its epoch.
async fn win<K: KeyedClaims>(set: &LeaseSet<K>, key: &str) -> Epoch {
    until(&format!("{} to win {key}", set.identity()), || {
        set.held(key)
    })
    .await;
    set.epoch(key).expect("held, so an epoch")
}

/// A task asserting, over and over until stopped, that no key of `keys` is
/// held by both sets.
fn checker<K: KeyedClaims>(
    a: &Arc<LeaseSet<K>>,
    b: &Arc<LeaseSet<K>>,
    keys: &[&str],
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (a, b, s) = (a.clone(), b.clone(), stop.clone());
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let task = tokio::spawn(async move {
        while !s.load(Ordering::Acquire) {
            for k in &keys {
                // b first: a key moving from a to b can only make b true later.
                let by_b = b.held(k);
                assert!(!(a.held(k) && by_b), "{k} is held by both sets");
            }
            tokio::task::yield_now().await;
        }
    });
    (stop, task)
}

/// A lone set wins a key at once with a term's epoch; `holder` and the
/// guard's token show it.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_win_with_epoch(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_win_with_epoch<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    assert!(
        within("ask", a.ask("win")).await.expect("ask"),
        "a lone set wins"
    );
    let epoch = a.epoch("win").expect("held");
    assert!(epoch.is_term(), "epoch {epoch} is not a term's epoch");
    assert_eq!(a.holder("win").expect("known").identity.as_str(), "node-a");
    let (seen, key) = a
        .guard("win", async |t| (t.epoch(), t.key().to_string()))
        .await
        .expect("guard");
    assert_eq!((seen, key.as_str()), (epoch, "win"));
    assert_eq!(a.held_keys().len(), 1);
    a.close().await;
}

/// Epochs of a key strictly grow, also across reopening the backend over
/// the same store.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_epochs_grow_across_reopen(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_epochs_grow_across_reopen<B: KeyedBackend>(b: &B) {
    let mut last: Option<Epoch> = None;
    for _ in 0..3 {
        let a = set(b, "node-a").await;
        let epoch = win(&a, "epochs").await;
        assert!(
            last.is_none_or(|l| epoch > l),
            "epoch {epoch} after {last:?}"
        );
        last = Some(epoch);
        a.close().await;
    }
}

/// A key taken away reads not held in its old set before another set holds
/// it (rule 2), and the new holder's epoch is higher.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_loss_before_grant(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_loss_before_grant<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    let c = set(b, "node-b").await;
    let first = win(&a, "loss").await;
    assert!(!within("b asks", c.ask("loss")).await.expect("ask"));
    let (stop, task) = checker(&a, &c, &["loss"]);
    if b.take_away("loss").await {
        // Either set may win it next (a tries again at once), in a newer
        // term; the checker asserts that never both hold it.
        until("a new term of the key", || {
            c.held("loss") || a.epoch("loss").is_some_and(|e| e != first)
        })
        .await;
        let second = c.epoch("loss").or(a.epoch("loss")).expect("held");
        assert!(second > first, "epoch {second} after {first}");
    } else {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(a.epoch("loss"), Some(first), "lost with nothing taken away");
    }
    stop.store(true, Ordering::Release);
    task.await.expect("no key was held by both sets");
    a.close().await;
    c.close().await;
}

/// Dropping `ask`, `guard` and `close` at any await point leaves nothing
/// held once the set is closed: another set then wins the key.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_cancellation_at_any_await(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_cancellation_at_any_await<B: KeyedBackend>(b: &B) {
    let mut budget = 1;
    loop {
        let a = set(b, "node-a").await;
        let asked = cancel_after(a.ask("cancel"), budget).await.is_some();
        let guarded = cancel_after(a.guard("cancel", async |t| t.epoch()), budget)
            .await
            .is_some();
        if cancel_after(a.close(), budget).await.is_none() {
            a.close().await;
        }
        assert!(!a.held("cancel"), "held after close");
        let c = set(b, "node-c").await;
        win(&c, "cancel").await;
        c.close().await;
        if asked && guarded {
            break;
        }
        budget += 1;
        assert!(budget < 1000, "ask and guard never finished");
    }
}

/// A set that lost a key does not release it (rule 3): the next holder
/// keeps it when the old set closes.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_no_release_after_loss(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_no_release_after_loss<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    let first = win(&a, "rule3").await;
    let c = set(b, "node-b").await;
    assert!(!within("b asks", c.ask("rule3")).await.expect("ask"));
    // Take it from a until b wins it (a tries again at once, so it may win
    // every race: then its own newer term is what it holds and releases).
    // Each take waits for a term newer than the one just taken (a's view of
    // the older one may lag): the next take then takes a's newer term, never
    // one b has just won.
    let mut taken = first;
    for _ in 0..20 {
        if !b.take_away("rule3").await {
            break;
        }
        until("a new holder", || {
            c.held("rule3") || a.epoch("rule3").is_some_and(|e| e > taken)
        })
        .await;
        if c.held("rule3") {
            break;
        }
        taken = a.epoch("rule3").unwrap_or(taken);
    }
    let by_c = c.epoch("rule3");
    a.close().await;
    if let Some(epoch) = by_c {
        assert!(epoch > first);
        assert_eq!(c.epoch("rule3"), Some(epoch), "the new holder lost the key");
        let seen = c
            .guard("rule3", async |t| t.epoch())
            .await
            .expect("the new holder's guard");
        assert_eq!(seen, epoch);
    } else {
        assert!(win(&c, "rule3").await > first);
    }
    c.close().await;
}

/// Closing gives up every key whatever its end (held, lost, never won),
/// and dropping a set gives its keys up too (rule 4).
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_close_after_every_end(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_close_after_every_end<B: KeyedBackend>(b: &B) {
    let other = set(b, "node-b").await;
    win(&other, "elsewhere").await;
    let a = set(b, "node-a").await;
    win(&a, "kept").await;
    win(&a, "taken").await;
    assert!(!within("ask", a.ask("elsewhere")).await.expect("ask"));
    let taken = b.take_away("taken").await;
    a.close().await;
    drop(other);
    let c = set(b, "node-c").await;
    for key in ["kept", "elsewhere"] {
        win(&c, key).await;
    }
    if taken {
        win(&c, "taken").await;
    }
    c.close().await;
}

/// Once a set is closed, every key reads not held: no epoch, no held keys,
/// `ask` and `guard` refused with [`Error::NotHeld`] and nothing written.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_ended_reads_lost(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_ended_reads_lost<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    win(&a, "ended").await;
    a.close().await;
    assert!(!a.held("ended"));
    assert_eq!(a.epoch("ended"), None);
    assert!(a.held_keys().is_empty());
    assert!(matches!(a.ask("ended").await, Err(Error::NotHeld { .. })));
    let mut ran = false;
    let refused = a.guard("ended", async |_t| ran = true).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert!(!ran, "a closed set's guard ran its write");
}

/// A guard runs its write only at a confirmed commit point: refused with
/// [`Error::HeldElsewhere`] naming the holder while another set holds the
/// key, and after the key was taken away it either is refused or writes in
/// a newer term it won.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_guard_at_commit_point(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_guard_at_commit_point<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    let c = set(b, "node-b").await;
    let epoch = crate::conformance::guard_names_the_holder(&a, &c, "commit").await;
    c.close().await;
    if b.take_away("commit").await {
        match a.guard("commit", async |t| t.epoch()).await {
            Ok(seen) => assert!(seen > epoch, "wrote in the lost term {seen}"),
            Err(Error::NotHeld { .. } | Error::Lost(_) | Error::HeldElsewhere { .. }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    a.close().await;
}

/// Two sets share keys: each wins the half it asks about first, nothing
/// moves while both want every key, and when one closes the other takes
/// every key in later terms; no key is ever held by both
/// ([`lease_sets_share_keys`](crate::conformance::lease_sets_share_keys)).
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (keyed_conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::keyed::keyed_sets_share_keys_and_hand_over_on_close(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_sets_share_keys_and_hand_over_on_close<B: KeyedBackend>(b: &B) {
    let (a, c) = (set(b, "node-a").await, set(b, "node-b").await);
    let keys: Vec<String> = (0..4).map(|i| format!("shard-{i}")).collect();
    let before =
        crate::conformance::lease_sets_share_keys(a, c.clone(), &keys, Duration::from_millis(300))
            .await;
    for (k, epoch) in keys.iter().zip(before) {
        let epoch = epoch.expect("a held its half");
        assert!(c.epoch(k) > Some(epoch), "{k}: b's term after a's {epoch}");
    }
    c.close().await;
}

/// Reads the events queued now, checking the rules of a set's events as it
/// goes: per key, `Won` in a term, then `Lost` or `Released` in that term,
/// then `Won` in a higher one. `open` carries each key's term won and not
/// yet ended across calls.
fn drain_events(
    events: &mut KeyEvents,
    open: &mut std::collections::HashMap<String, Epoch>,
    last: &mut std::collections::HashMap<String, Epoch>,
) -> Vec<KeyEvent> {
    let mut seen = Vec::new();
    while let Some(event) = events.try_next() {
        let key = event.key().as_str().to_owned();
        match &event {
            KeyEvent::Won { epoch, .. } => {
                assert!(
                    !open.contains_key(&key),
                    "{key} won in {epoch} while held in {:?}",
                    open.get(&key)
                );
                assert!(
                    last.get(&key).is_none_or(|l| epoch > l),
                    "{key} won in {epoch}, not after its last term {:?}",
                    last.get(&key)
                );
                open.insert(key.clone(), *epoch);
                last.insert(key, *epoch);
            }
            KeyEvent::Lost { epoch, .. } | KeyEvent::Released { epoch, .. } => {
                assert_eq!(
                    open.remove(&key),
                    Some(*epoch),
                    "{key}: an end of a term not won ({event:?})"
                );
            }
            other => panic!("an unknown event {other:?}"),
        }
        seen.push(event);
    }
    seen
}

/// `release(key)` gives one held key back while the set runs: the key
/// reads not held, is won by another set in a higher term, and the set
/// keeps its other keys; `held` does not ask a released key again, `ask`
/// does. The events say `Won` and then `Released` in the same term.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::keyed::keyed_release_gives_one_key_back(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_release_gives_one_key_back<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    let mut events = a.events();
    let first = win(&a, "given").await;
    let kept = win(&a, "kept").await;
    let c = set(b, "node-b").await;
    assert!(!within("b asks", c.ask("given")).await.expect("ask"));
    let (stop, task) = checker(&a, &c, &["given", "kept"]);
    within("release", a.release("given"))
        .await
        .expect("release");
    assert!(!a.held("given"), "held after its release");
    let taken = win(&c, "given").await;
    assert!(taken > first, "epoch {taken} after {first}");
    // The other key stays in its term, unless its own renewal failed (a
    // machine too busy for the backend's short test timings): then the
    // set must have reported it lost, never released (checked below).
    let kept_now = a.epoch("kept");
    assert!(
        kept_now.is_none_or(|e| e == kept),
        "the other key moved: {kept_now:?} after {kept}"
    );
    assert!(!a.held("given"), "held asks a released key again");
    stop.store(true, Ordering::Release);
    task.await.expect("no key was held by both sets");
    let (mut open, mut last) = Default::default();
    let seen = drain_events(&mut events, &mut open, &mut last);
    let given: Vec<_> = seen
        .iter()
        .filter(|e| e.key().as_str() == "given")
        .cloned()
        .collect();
    assert!(
        matches!(&given[..], [KeyEvent::Won { epoch: w, .. }, KeyEvent::Released { epoch: r, .. }] if *w == first && *r == first),
        "events of the given key: {given:?}"
    );
    if kept_now.is_none() {
        assert!(
            seen.iter().any(|e| matches!(e, KeyEvent::Lost { key, epoch, .. } if key.as_str() == "kept" && *epoch == kept)),
            "the other key ended without a loss reported: {seen:?}"
        );
    }
    // Asked again: b holds it now.
    assert!(!within("a asks again", a.ask("given")).await.expect("ask"));
    c.close().await;
    let again = win(&a, "given").await;
    assert!(again > taken, "epoch {again} after {taken}");
    a.close().await;
}

/// `release(key)` waits for the guards running under the key: no other
/// set wins it while a guarded write runs; once the write finished the key
/// is given back and another set wins it.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::keyed::keyed_release_waits_for_running_guards(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_release_waits_for_running_guards<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    let first = win(&a, "busy").await;
    let c = set(b, "node-b").await;
    assert!(!within("b asks", c.ask("busy")).await.expect("ask"));
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let writer = {
        let a = a.clone();
        tokio::spawn(async move {
            a.guard("busy", async |t| {
                let _ = started_tx.send(());
                let _ = finish_rx.await;
                t.epoch()
            })
            .await
        })
    };
    within("the write starts", started_rx)
        .await
        .expect("started");
    let release = {
        let a = a.clone();
        tokio::spawn(async move { a.release("busy").await })
    };
    // While the write runs the key is not given back.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !release.is_finished(),
            "release returned under a running guard"
        );
        assert!(!c.held("busy"), "won elsewhere under a running guard");
    }
    let _ = finish_tx.send(());
    let wrote = within("the write", writer)
        .await
        .expect("join")
        .expect("guard");
    assert_eq!(wrote, first);
    within("release", release)
        .await
        .expect("join")
        .expect("release");
    assert!(!a.held("busy"));
    let taken = win(&c, "busy").await;
    assert!(taken > first);
    a.close().await;
    c.close().await;
}

/// The events report every loss, in the term lost, before any later win
/// of the key; never a win of a lost term; on close a `Released` for each
/// key still held, and then the stream ends.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::keyed::keyed_events_report_every_loss(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_events_report_every_loss<B: KeyedBackend>(b: &B) {
    let a = set(b, "node-a").await;
    let (mut open, mut last) = Default::default();
    win(&a, "before").await;
    // A late subscriber first hears of what is held.
    let mut events = a.events();
    let seen = drain_events(&mut events, &mut open, &mut last);
    assert!(
        matches!(&seen[..], [KeyEvent::Won { key, .. }] if key.as_str() == "before"),
        "{seen:?}"
    );
    let first = win(&a, "lossy").await;
    if b.take_away("lossy").await {
        // a tries again at once: a loss of `first`, then maybe a new win.
        until("the loss of lossy reported", || {
            for e in drain_events(&mut events, &mut open, &mut last) {
                if let KeyEvent::Lost { key, epoch, .. } = &e
                    && key.as_str() == "lossy"
                {
                    assert_eq!(*epoch, first);
                    return true;
                }
            }
            false
        })
        .await;
    }
    drain_events(&mut events, &mut open, &mut last);
    let held: Vec<String> = open.keys().cloned().collect();
    a.close().await;
    let rest = within("the stream ends", async {
        let mut rest = Vec::new();
        while let Some(e) = events.next().await {
            rest.push(e);
        }
        rest
    })
    .await;
    for e in &rest {
        let key = e.key().as_str().to_owned();
        match e {
            KeyEvent::Released { epoch, .. } | KeyEvent::Lost { epoch, .. } => {
                assert_eq!(open.remove(&key), Some(*epoch), "{e:?}");
            }
            KeyEvent::Won { epoch, .. } => {
                assert!(open.insert(key, *epoch).is_none(), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        open.is_empty(),
        "held at the end without an end event: {open:?} (held before close: {held:?})"
    );
}

/// A task asserting, over and over until stopped, that no key of `keys` is
/// held by two of `sets` at once, whichever way keys move: a set that reads
/// held in the same term before and after another set reads held held it
/// throughout (a term that ended never reads held again), so both held it
/// at that moment.
fn balance_checker<K: KeyedClaims>(
    sets: &[&Arc<LeaseSet<K>>],
    keys: &[&str],
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let sets: Vec<Arc<LeaseSet<K>>> = sets.iter().map(|s| (*s).clone()).collect();
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let task = tokio::spawn(async move {
        while !s.load(Ordering::Acquire) {
            for k in &keys {
                for (i, x) in sets.iter().enumerate() {
                    for y in &sets[i + 1..] {
                        let before = x.epoch(k);
                        let other = y.epoch(k);
                        let after = x.epoch(k);
                        assert!(
                            !(before.is_some() && before == after && other.is_some()),
                            "{k} is held by {} (term {before:?}) and {} (term {other:?}) at once",
                            x.identity(),
                            y.identity()
                        );
                    }
                }
            }
            tokio::task::yield_now().await;
        }
    });
    (stop, task)
}

/// Waits until each of `sets` holds exactly its share in `shares` of
/// `keys` and every key is held by one of them.
async fn shares<K: KeyedClaims>(
    what: &str,
    sets: &[&Arc<LeaseSet<K>>],
    keys: &[String],
    shares: &[usize],
) {
    until(what, || {
        let counts: Vec<usize> = sets
            .iter()
            .map(|s| keys.iter().filter(|k| s.held(k)).count())
            .collect();
        counts == shares
    })
    .await;
}

/// The view every member is given: these identities, each offering `n`
/// keys.
fn view(ids: &[&str], n: usize) -> Vec<SetMember> {
    ids.iter()
        .map(|id| SetMember::new(Identity::new(*id).expect("identity"), n))
        .collect()
}

/// Balanced sets share their keys fairly (⌊K/P⌋ or ⌈K/P⌉ each), and when
/// one leaves only its keys move, each won in a higher term; a member
/// that joins takes its share from the others, which give keys back
/// (`Released` events); no key is ever held by two sets.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::keyed::keyed_balance_fair_shares(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_balance_fair_shares<B: KeyedBackend>(b: &B) {
    let keys: Vec<String> = (0..12).map(|i| format!("bal-{i}")).collect();
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    let (a, c, d) = (
        set(b, "node-a").await,
        set(b, "node-b").await,
        set(b, "node-c").await,
    );
    let three = view(&["node-a", "node-b", "node-c"], keys.len());
    for s in [&a, &c, &d] {
        s.balance_among(&three);
        for k in &keys {
            s.held(k);
        }
    }
    let (stop, task) = balance_checker(&[&a, &c], &names);
    let (stop2, task2) = balance_checker(&[&a, &c, &d], &names);
    shares("shares of 12 over 3", &[&a, &c, &d], &keys, &[4, 4, 4]).await;
    let before: Vec<(String, Epoch)> = keys
        .iter()
        .filter_map(|k| a.epoch(k).or(c.epoch(k)).map(|e| (k.clone(), e)))
        .collect();
    // node-c leaves cleanly: only its keys move.
    let leaving: Vec<String> = keys.iter().filter(|k| d.held(k)).cloned().collect();
    stop2.store(true, Ordering::Release);
    task2.await.expect("no key held by two sets");
    d.close().await;
    let two = view(&["node-a", "node-b"], keys.len());
    a.balance_among(&two);
    c.balance_among(&two);
    shares("shares of 12 over 2", &[&a, &c], &keys, &[6, 6]).await;
    for (k, e) in &before {
        assert_eq!(
            a.epoch(k).or(c.epoch(k)),
            Some(*e),
            "{k} moved though its holder stayed"
        );
    }
    for k in &leaving {
        assert!(a.held(k) || c.held(k), "{k} not taken over");
    }
    // node-d joins: a and b give keys back to it.
    let mut a_events = a.events();
    let e = set(b, "node-d").await;
    let (stop3, task3) = balance_checker(&[&a, &c, &e], &names);
    let joined = view(&["node-a", "node-b", "node-d"], keys.len());
    e.balance_among(&joined);
    for k in &keys {
        e.held(k);
    }
    a.balance_among(&joined);
    c.balance_among(&joined);
    shares(
        "shares of 12 over 3 after a join",
        &[&a, &c, &e],
        &keys,
        &[4, 4, 4],
    )
    .await;
    let (mut open, mut last) = Default::default();
    let seen = drain_events(&mut a_events, &mut open, &mut last);
    let given = seen
        .iter()
        .filter(|e| matches!(e, KeyEvent::Released { .. }))
        .count();
    assert_eq!(given, 2, "a gave back 2 keys: {seen:?}");
    stop.store(true, Ordering::Release);
    task.await.expect("no key held by a and b");
    stop3.store(true, Ordering::Release);
    task3.await.expect("no key held by two sets");
    for s in [&a, &c, &e] {
        s.close().await;
    }
}

/// A backend whose [`Election`] keeps the membership records of balanced
/// sets ([`Membership`]): the membership cases run over it.
pub trait MembershipBackend: KeyedBackend {
    /// The backend's election façade.
    type Election: Election + 'static;

    /// The backend's election over the same store as
    /// [`keys`](KeyedBackend::keys).
    ///
    /// ```
    /// use election_testkit::keyed::MembershipBackend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let backend = MemoryBackend::new();
    /// let _election = MembershipBackend::election(&backend).await;
    /// # }
    /// ```
    fn election(&self) -> impl Future<Output = Self::Election> + Send;
}

/// Balanced sets that keep membership records ([`Membership`]) share the
/// keys fairly; when a member leaves (its membership stopped, its set
/// closed) the others take only its keys, each in a higher term; a new
/// member gets its share. No key is ever held by two sets.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::keyed::keyed_membership_rebalances(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_membership_rebalances<B: MembershipBackend>(b: &B) {
    let every = Duration::from_millis(50);
    let keys: Vec<String> = (0..9).map(|i| format!("mem-{i}")).collect();
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    let (a, c) = (set(b, "node-a").await, set(b, "node-b").await);
    let mut members = Vec::new();
    for s in [&a, &c] {
        for k in &keys {
            s.held(k);
        }
        members.push(Membership::start(b.election().await, "mem", s.clone(), every).expect("join"));
    }
    let (stop, task) = balance_checker(&[&a, &c], &names);
    shares("shares of 9 over 2", &[&a, &c], &keys, &[5, 4]).await;
    // node-c joins.
    let d = set(b, "node-c").await;
    for k in &keys {
        d.held(k);
    }
    let (stop3, task3) = balance_checker(&[&a, &c, &d], &names);
    let joined = Membership::start(b.election().await, "mem", d.clone(), every).expect("join");
    shares("shares of 9 over 3", &[&a, &c, &d], &keys, &[3, 3, 3]).await;
    let before: Vec<(String, Epoch)> = keys
        .iter()
        .filter_map(|k| a.epoch(k).or(c.epoch(k)).map(|e| (k.clone(), e)))
        .collect();
    // node-c leaves: only its keys move.
    stop3.store(true, Ordering::Release);
    task3.await.expect("no key held by two sets");
    joined.stop().await;
    d.close().await;
    shares("shares of 9 over 2 again", &[&a, &c], &keys, &[5, 4]).await;
    for (k, e) in &before {
        assert_eq!(
            a.epoch(k).or(c.epoch(k)),
            Some(*e),
            "{k} moved though its holder stayed"
        );
    }
    stop.store(true, Ordering::Release);
    task.await.expect("no key held by a and b");
    for m in &members {
        m.stop().await;
    }
    a.close().await;
    c.close().await;
}

/// An operator's revoke (ADR 0111) of a key a lease set holds, through the
/// backend's [`Election`]: it names the set's term as the one deposed and
/// takes an epoch above it; the set reports the key lost; the key's next
/// term (the set asks again) is above the revocation. Every backend
/// revokes a set's keys (NATS since its keyed revoke: until then it
/// answered [`ConfigError::Unsupported`](election_core::ConfigError::Unsupported),
/// which this case now fails).
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::keyed::keyed_revoke_is_fenced(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn keyed_revoke_is_fenced<B: MembershipBackend>(b: &B) {
    let key = "revoked-key";
    let a = set(b, "node-a").await;
    a.held(key);
    let _ = a.ask(key).await;
    let held = win(&a, key).await;
    let by = Identity::new("ops/alice").expect("identity");
    let election = b.election().await;
    let revoked = match within("the revoke", election.revoke(key, &by)).await {
        Ok(Some(revoked)) => revoked,
        other => panic!("revoke of {key}, held by node-a in term {held}: {other:?}"),
    };
    assert_eq!(revoked.deposed.epoch, held, "the deposed term");
    assert_eq!(revoked.deposed.identity.as_str(), "node-a");
    assert_eq!(revoked.revocation.by, by);
    assert!(
        revoked.revocation.epoch > held,
        "the revocation's epoch {} is not above the deposed term's {held}",
        revoked.revocation.epoch
    );
    // Lost, and maybe won again at once (the file backend's next term
    // begins when the deposed one closes): the term held is not `held`.
    until("node-a to lose the revoked term", || {
        a.epoch(key) != Some(held)
    })
    .await;
    let next = win(&a, key).await;
    assert!(
        next > revoked.revocation.epoch,
        "the key's next term {next} is not above the revocation's epoch {}",
        revoked.revocation.epoch
    );
    a.close().await;
}

/// Expands to one `#[tokio::test]` per membership case
/// ([`MembershipBackend`]), each with a backend made by `$factory`.
///
/// ```
/// // tests/keyed_conformance.rs (needs tokio with `macros` and `rt-multi-thread`):
/// election_testkit::keyed_membership_tests!(election_testkit::memory::MemoryBackend::new());
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! keyed_membership_tests {
    ($factory:expr) => {
        $crate::__cases!(keyed, $factory; keyed_membership_rebalances, keyed_revoke_is_fenced);
    };
}

/// Expands to one `#[tokio::test]` per lease-set conformance case, each
/// with a backend made by `$factory` (an expression evaluated per test).
///
/// ```
/// // tests/keyed_conformance.rs (needs tokio with `macros` and `rt-multi-thread`):
/// election_testkit::keyed_conformance_tests!(election_testkit::memory::MemoryBackend::new());
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! keyed_conformance_tests {
    ($factory:expr) => {
        $crate::keyed_conformance_tests!(@case $factory;
            keyed_win_with_epoch,
            keyed_epochs_grow_across_reopen,
            keyed_loss_before_grant,
            keyed_cancellation_at_any_await,
            keyed_no_release_after_loss,
            keyed_close_after_every_end,
            keyed_ended_reads_lost,
            keyed_guard_at_commit_point,
            keyed_sets_share_keys_and_hand_over_on_close,
            keyed_release_gives_one_key_back,
            keyed_release_waits_for_running_guards,
            keyed_events_report_every_loss,
            keyed_balance_fair_shares
        );
    };
    (@case $factory:expr; $($case:ident),*) => {
        $crate::__cases!(keyed, $factory; $($case),*);
    };
}

/// The memory backend, as a [`KeyedBackend`].
impl KeyedBackend for crate::memory::MemoryBackend {
    type Keys = crate::memory::MemoryKeys;

    async fn keys(&self, identity: &str) -> Result<Self::Keys, Error> {
        crate::memory::MemoryBackend::keys(self, identity)
    }

    async fn take_away(&self, key: &str) -> bool {
        self.revoke(key)
    }
}

/// The memory backend, as a [`MembershipBackend`].
impl MembershipBackend for crate::memory::MemoryBackend {
    type Election = crate::memory::MemoryBackend;

    async fn election(&self) -> Self::Election {
        self.clone()
    }
}
