//! A process with two tokio runtimes (ADR 0114): an election opened on the
//! second keeps working after the first was shut down, whatever the
//! backend shares between the elections of one process.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use election_core::Election;

/// Opens an election with `open` on each of two runtimes, campaigns and
/// resigns on the first, shuts the first down, then campaigns and resigns
/// on the second. Panics (the calling test fails) if the second runtime's
/// election does not win within 30 s or fails: what a connection shared
/// across the runtimes, its tasks gone with the first, does.
///
/// ```no_run
/// use election_nats::{NatsElection, NatsOptions};
///
/// let options = NatsOptions::default().single_replica_ok(true);
/// election_testkit::runtimes::a_second_runtime_outlives_the_first(|| {
///     let options = options.clone();
///     async move {
///         NatsElection::connect("127.0.0.1:4222", options)
///             .await
///             .expect("connect")
///     }
/// });
/// ```
pub fn a_second_runtime_outlives_the_first<E, F, Fut>(open: F)
where
    E: Election,
    E::Error: Debug,
    F: Fn() -> Fut,
    Fut: Future<Output = E>,
{
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime")
    };
    let (first, second) = (runtime(), runtime());
    let one = first.block_on(open());
    let two = second.block_on(open());
    first.block_on(async {
        let candidate = one.candidate("a", "one").expect("candidate");
        candidate
            .campaign()
            .await
            .expect("a campaign on the first runtime")
            .resign()
            .await
            .expect("resign on the first runtime");
    });
    drop(first);
    second.block_on(async {
        let candidate = two.candidate("b", "two").expect("candidate");
        let term = tokio::time::timeout(Duration::from_secs(30), candidate.campaign())
            .await
            .expect("the second runtime's election answers")
            .expect("the second runtime's election works");
        term.resign().await.expect("resign on the second runtime");
    });
    drop(one);
}
