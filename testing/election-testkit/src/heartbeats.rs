//! The takeover of a crashed lease set by its heartbeat (ADR 0110), as two
//! scenarios any backend with heartbeats runs over two keyed-claims instances
//! `a` and `b` of one store, on one clock moved by hand (`advance`), with
//! the steps called by hand (nothing renews on its own):
//!
//! - `b` holds a key, so it renews and lists the heartbeats all along; `a`
//!   holds two keys. [`taken_over_a_ttl_after_the_last_heartbeat`]: `a` stops,
//!   and `b`'s first look at `a`'s rows, a full TTL after it first saw
//!   `a`'s last heartbeat, takes them at once (a per-row count would wait a TTL
//!   of its own from that look).
//! - [`never_taken_over_while_renewing`]: `a` renews in between; `b` takes
//!   nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use election_core::{Claimed, Clock, ElectionName, Epoch, KeyedClaims, SystemClock};
use tokio::time::Instant;

/// A monotonic clock moved by hand ([`advance`](HandClock::advance)); the
/// wall clock is the system's.
#[derive(Debug)]
pub struct HandClock {
    base: Instant,
    ms: AtomicU64,
}

impl HandClock {
    /// A clock at now, shared.
    ///
    /// ```
    /// use election_core::Clock;
    /// use election_testkit::heartbeats::HandClock;
    ///
    /// let clock = HandClock::new();
    /// let t0 = clock.now();
    /// assert_eq!(clock.now(), t0); // still until moved
    /// ```
    pub fn new() -> Arc<Self> {
        Arc::new(HandClock {
            base: Instant::now(),
            ms: AtomicU64::new(0),
        })
    }

    /// Moves the clock `by` forward.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Clock;
    /// use election_testkit::heartbeats::HandClock;
    ///
    /// let clock = HandClock::new();
    /// let t0 = clock.now();
    /// clock.advance(Duration::from_secs(3));
    /// assert_eq!(clock.now() - t0, Duration::from_secs(3));
    /// ```
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// `advance` as the boxed closure [`HeartbeatCase`] takes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Clock;
    /// use election_testkit::heartbeats::HandClock;
    ///
    /// let clock = HandClock::new();
    /// let (t0, advance) = (clock.now(), clock.advancer());
    /// advance(Duration::from_millis(500));
    /// assert_eq!(clock.now() - t0, Duration::from_millis(500));
    /// ```
    pub fn advancer(self: &Arc<Self>) -> Box<dyn Fn(Duration) + Send + Sync> {
        let clock = self.clone();
        Box::new(move |by| clock.advance(by))
    }
}

impl Clock for HandClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_millis(self.ms.load(Ordering::SeqCst))
    }

    fn wall_unix_ms(&self) -> i64 {
        SystemClock.wall_unix_ms()
    }
}

/// Two sets over one store, and how to move their clock.
pub struct HeartbeatCase<K> {
    /// The set that stops (or renews).
    pub a: K,
    /// The set that watches `a`'s heartbeat and takes `a`'s keys.
    pub b: K,
    /// Moves both sets' monotonic clock forward.
    pub advance: Box<dyn Fn(Duration) + Send + Sync>,
    /// The TTL of both sets.
    pub ttl: Duration,
}

impl<K> std::fmt::Debug for HeartbeatCase<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeartbeatCase")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn keys(names: &[&str]) -> Vec<ElectionName> {
    names
        .iter()
        .map(|n| ElectionName::new(*n).expect("a name"))
        .collect()
}

/// The keys of `names` `set` won, with their epochs.
async fn claim<K: KeyedClaims>(set: &K, names: &[&str]) -> Vec<(ElectionName, Epoch)> {
    let asked = keys(names);
    let answers = set.claim(&asked).await;
    asked
        .into_iter()
        .zip(answers)
        .filter_map(|(key, a)| match a.expect("answered") {
            Claimed::Won(w) => Some((key, w.epoch)),
            Claimed::HeldBy(_) => None,
        })
        .collect()
}

/// One renewal of `held` by `set`, every key renewed.
async fn renew<K: KeyedClaims>(set: &K, held: &[(ElectionName, Epoch)]) {
    let refused = set.renew(held).await.expect("renewed");
    assert!(refused.is_empty(), "refused: {refused:?}");
}

/// `a` wins `k1` and `k2` and renews once (its rows then name its
/// heartbeat), `b` wins `k0` and renews once (its first listing of the
/// heartbeats): what each holds.
async fn set_up<K: KeyedClaims>(
    c: &HeartbeatCase<K>,
) -> (Vec<(ElectionName, Epoch)>, Vec<(ElectionName, Epoch)>) {
    let a = claim(&c.a, &["k1", "k2"]).await;
    assert_eq!(a.len(), 2, "a won {a:?}");
    // Its first renewal names its heartbeat in its rows (a claim names none).
    renew(&c.a, &a).await;
    let b = claim(&c.b, &["k0"]).await;
    assert_eq!(b.len(), 1, "b won {b:?}");
    renew(&c.b, &b).await;
    (a, b)
}

/// `a` stops renewing; `b`, renewing on, takes `a`'s keys at its first
/// look a TTL after it first saw `a`'s last heartbeat.
///
/// ```no_run
/// use std::time::Duration;
/// use election_core::KeyedClaims;
/// use election_testkit::heartbeats::{self, HandClock, HeartbeatCase};
///
/// // `a` and `b`: two keyed claims over one store, both on `clock`.
/// async fn run<K: KeyedClaims>(a: K, b: K, clock: std::sync::Arc<HandClock>) {
///     let case = HeartbeatCase { a, b, advance: clock.advancer(), ttl: Duration::from_secs(3) };
///     heartbeats::taken_over_a_ttl_after_the_last_heartbeat(case).await;
/// }
/// ```
pub async fn taken_over_a_ttl_after_the_last_heartbeat<K: KeyedClaims>(c: HeartbeatCase<K>) {
    let (_, b) = set_up(&c).await;
    (c.advance)(c.ttl);
    renew(&c.b, &b).await;
    let taken = claim(&c.b, &["k1", "k2"]).await;
    assert_eq!(
        taken.len(),
        2,
        "b's first look at a's rows came a TTL after a's last heartbeat, and it took {taken:?}: \
         it waited for a TTL of its own on each row"
    );
}

/// `a` renews half a TTL in: its heartbeat moves on, and `b` takes nothing a
/// TTL after its first sight of the old heartbeat.
///
/// ```no_run
/// use std::time::Duration;
/// use election_core::KeyedClaims;
/// use election_testkit::heartbeats::{self, HandClock, HeartbeatCase};
///
/// // `a` and `b`: two keyed claims over one store, both on `clock`.
/// async fn run<K: KeyedClaims>(a: K, b: K, clock: std::sync::Arc<HandClock>) {
///     let case = HeartbeatCase { a, b, advance: clock.advancer(), ttl: Duration::from_secs(3) };
///     heartbeats::never_taken_over_while_renewing(case).await;
/// }
/// ```
pub async fn never_taken_over_while_renewing<K: KeyedClaims>(c: HeartbeatCase<K>) {
    let (a, b) = set_up(&c).await;
    (c.advance)(c.ttl / 2);
    renew(&c.a, &a).await;
    renew(&c.b, &b).await;
    (c.advance)(c.ttl / 2);
    renew(&c.b, &b).await;
    let taken = claim(&c.b, &["k1", "k2"]).await;
    assert!(taken.is_empty(), "b took {taken:?} from a live holder");
}

/// `a` stops; its heartbeat is deleted by hand after `b`'s last listing:
/// `b`'s look finds no heartbeat, and takes nothing (the rows are held
/// for a full TTL of `b`'s own). `delete` deletes the heartbeat of the id
/// it is given.
///
/// ```no_run
/// use std::time::Duration;
/// use election_core::KeyedClaims;
/// use election_testkit::heartbeats::{self, HandClock, HeartbeatCase};
///
/// async fn run<K: KeyedClaims>(a: K, b: K, clock: std::sync::Arc<HandClock>) {
///     let case = HeartbeatCase { a, b, advance: clock.advancer(), ttl: Duration::from_secs(3) };
///     heartbeats::deleted_by_hand_takes_nothing_over(case, 17, async |_id| { /* DELETE it */ }).await;
/// }
/// ```
pub async fn deleted_by_hand_takes_nothing_over<K: KeyedClaims>(
    c: HeartbeatCase<K>,
    a_heartbeat: i64,
    delete: impl AsyncFnOnce(i64),
) {
    let (_, b) = set_up(&c).await;
    (c.advance)(c.ttl);
    renew(&c.b, &b).await;
    delete(a_heartbeat).await;
    let taken = claim(&c.b, &["k1", "k2"]).await;
    assert!(
        taken.is_empty(),
        "b took {taken:?} by a heartbeat deleted by hand"
    );
}
