//! What the tests share: the one etcd member, a fresh prefix per test,
//! short timings.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use election_core::{Candidate, Term};
use election_etcd::{EtcdClaim, EtcdElection, EtcdOptions};
use tokio::task::JoinHandle;

/// The shared member's address.
pub(crate) fn shared() -> String {
    etcd_testkit::Member::shared()
        .expect("etcd must be available (see etcd-testkit)")
        .endpoint()
}

/// A prefix no other test in this process uses.
pub(crate) fn prefix(what: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}/{what}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// TTL 2 s (etcd's smallest by default), renewal every 600 ms.
pub(crate) fn fast(prefix: &str) -> EtcdOptions {
    EtcdOptions::new(Duration::from_secs(2))
        .and_then(|o| o.renew_interval(Duration::from_millis(600)))
        .and_then(|o| o.request_timeout(Duration::from_millis(500)))
        .and_then(|o| o.prefix(prefix))
        .expect("options")
}

/// An election at `endpoints` under `prefix` with the short timings.
pub(crate) async fn open(endpoints: &str, prefix: &str) -> EtcdElection {
    EtcdElection::connect(endpoints, fast(prefix))
        .await
        .expect("connect to etcd")
}

/// Waits for `f` within a generous bound.
pub(crate) async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 30 s"))
}

/// `who` campaigns for `jobs` and wins (the name must be free).
pub(crate) async fn leads(election: &EtcdElection, who: &str) -> Term<EtcdClaim> {
    election
        .candidate("jobs", who)
        .unwrap()
        .campaign()
        .await
        .unwrap()
}

/// A campaign of `who` for `jobs` in the background, polling every `poll`.
pub(crate) fn waits(
    election: &EtcdElection,
    who: &str,
    poll: Duration,
) -> JoinHandle<Result<Term<EtcdClaim>, election_core::Error>> {
    let candidate = Candidate::new(election.claim("jobs", who).unwrap())
        .with_poll_interval(poll)
        .unwrap();
    tokio::spawn(async move { candidate.campaign().await })
}
