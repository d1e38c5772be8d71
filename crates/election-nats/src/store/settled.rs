//! A compare-and-set sent again while the key is busy.
//!
//! A clustered stream's leader refuses a write that expects a key's last
//! revision while another write of that key is still being proposed (not
//! yet applied): the server's own age-out marker of a handover, a
//! renewal racing a handover, any write that names the key in its
//! expectation. It answers with the constant form of "wrong last
//! sequence" (10164) without looking at the revision, so the refusal
//! says nothing of where the key is, and nothing was written. Taken for a
//! refusal, it made a release report `NotHeld` over the term's own live
//! record, a renewal or a commit-point check report a loss, and a claim
//! over a clean vacancy give up its attempts and wait the failover grace.
//!
//! [`settled`] sends such a write again after short pauses (at most
//! [`PAUSES`], about 160 ms in all, well inside the request timeout
//! around it). A refusal that outlasts them is returned as it came: the
//! callers count it refused (nothing was written), the safe answer.

use std::future::Future;
use std::time::Duration;

/// The pauses before each new send of a write refused while its key was
/// busy: a proposal is applied within a round of the stream's Raft group,
/// milliseconds on a healthy cluster.
pub(crate) const PAUSES: [Duration; 8] = [
    Duration::from_millis(1),
    Duration::from_millis(2),
    Duration::from_millis(4),
    Duration::from_millis(8),
    Duration::from_millis(16),
    Duration::from_millis(32),
    Duration::from_millis(50),
    Duration::from_millis(50),
];

/// Runs `write` (one compare-and-set) and, while the server answers that
/// another write of the key is being proposed
/// ([`in_flight`](crate::error::in_flight)), runs it again after each of
/// [`PAUSES`]; returns the first other answer, or the last refusal.
///
/// Cancel safety: cancel safe when `write` is: a dropped call has sent at
/// most the writes whose answers it was waiting for, each a
/// compare-and-set that may or may not have landed, as a single write.
pub(crate) async fn settled<T, K, F, Fut>(mut write: F) -> Result<T, async_nats::error::Error<K>>
where
    K: PartialEq + Clone + std::fmt::Debug + std::fmt::Display + 'static,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, async_nats::error::Error<K>>>,
{
    for pause in PAUSES {
        match write().await {
            Err(e) if crate::error::in_flight(&e) => {
                tracing::debug!(
                    ?pause,
                    "a write of the key is being proposed; sending again"
                );
                tokio::time::sleep(pause).await;
            }
            done => return done,
        }
    }
    write().await
}
