//! The [`Fence`] trait, its one rule [`Advance::decide`], and [`WriteFn`].

use std::future::Future;

use crate::{Error, ResourceName, Token};

/// The check-and-advance of a resource's high-water mark, done atomically
/// with the write it guards.
///
/// Every resource has a high-water mark: the highest [`Token`] it has
/// accepted, or none yet. A token lower than the mark is refused with
/// [`Error::Stale`]; a token equal to it is accepted (all writes of one term
/// share its token); a higher one is accepted and raises the mark. The mark
/// never goes down, so once a newer term has written, no write of an older
/// term gets in.
///
/// The methods return `Send` futures (so stores backed by SQLite or NATS
/// can implement the trait with `async fn`); a `Fence` is not dyn-compatible.
///
/// # Implementing
///
/// A store must:
/// - decide with [`Advance::decide`], under one lock or transaction that
///   also covers the write of [`fenced`](Fence::fenced), so that no other
///   writer of the resource (in any process) can get in between;
/// - persist a raised mark durably *before* running the write: a write that
///   lands while its mark is lost in a crash would let an older term
///   overwrite it afterwards;
/// - report a stored mark it cannot read as [`Error::Corrupt`], never as "no
///   mark".
///
/// ```
/// use election_core::Epoch;
/// use fencing::{Error, Fence, MemoryFence, ResourceName, Token};
///
/// async fn save(fence: &impl Fence, token: Token, text: &str) -> Result<usize, Error> {
///     let doc = ResourceName::new("doc")?;
///     fence.fenced(&doc, token, || async { text.len() /* the real write */ }).await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// let fence = MemoryFence::new();
/// let t = |n| Token::from_epoch(Epoch::new(n).unwrap_or(Epoch::MAX));
/// assert_eq!(save(&fence, t(2), "new leader").await?, 10);
/// assert_eq!(save(&fence, t(2), "same term").await?, 9);
/// assert!(matches!(save(&fence, t(1), "deposed").await, Err(Error::Stale { .. })));
/// # Ok(()) }
/// ```
pub trait Fence: Send + Sync {
    /// Checks `token` against the high-water mark of `resource` and raises
    /// the mark to it, atomically; nothing else is written.
    ///
    /// Use it to fence a resource off ahead of writes (a new leader raising
    /// the mark before it starts), or in front of a store whose own writes
    /// cannot run under the fence's lock. Presenting the same token again
    /// is harmless.
    ///
    /// Failure model: [`Error::Stale`] if `token` is lower than the mark
    /// (the mark is unchanged); [`Error::Corrupt`] if the stored mark cannot
    /// be read; [`Error::Unavailable`] if the store failed, in which case
    /// the mark may or may not have been raised.
    ///
    /// Cancel safety: dropping the future leaves the mark unchanged or
    /// raised to `token`, never anything else, and releases whatever lock
    /// it held (a store may finish a step already begun in the background);
    /// calling again with the same token is the way to find out.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Fence, MemoryFence, ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), fencing::Error> {
    /// let fence = MemoryFence::new();
    /// let queue = ResourceName::new("queue")?;
    /// let token = Token::from_epoch(Epoch::new(5).unwrap());
    /// assert_eq!(fence.advance(&queue, token).await?.previous, None);
    /// assert_eq!(fence.advance(&queue, token).await?.previous, Some(token));
    /// # Ok(()) }
    /// ```
    fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> impl Future<Output = Result<Advance, Error>> + Send;

    /// Runs `write` if and only if `token` is not older than the
    /// high-water mark of `resource`, with the mark raised to `token`, while
    /// holding the resource's lock: no other writer of the resource gets in
    /// between the check and the end of `write`. Returns what `write`'s
    /// future returned.
    ///
    /// `write` is a closure returning the write's future, `|| async { .. }`
    /// (any `FnOnce() -> impl Future + Send` with a `Send` output, see
    /// [`WriteFn`]). It is called only after the check, so a refused write
    /// is never even started.
    ///
    /// In order: wait for the resource's lock; check `token` with
    /// [`Advance::decide`]; persist the raised mark durably; run `write` to
    /// completion; release the lock. Do not call `fenced` for the same
    /// resource from inside `write` (it would wait for itself), and take
    /// the locks of several resources in one fixed order.
    ///
    /// Failure model: on [`Error::Stale`], [`Error::Corrupt`] and
    /// [`Error::Unavailable`], `write` has not run (after `Unavailable` the
    /// mark may or may not have been raised). Once `write` runs, its outcome
    /// is returned as it is, and the mark stays raised even if the write
    /// failed: an older term stays fenced off.
    ///
    /// Cancel safety: dropped before `write` starts, `write` never runs and
    /// the mark is unchanged or raised to `token`. Dropped while `write`
    /// runs, the write's future is dropped at its current await point
    /// (whatever it did so far stays done) and the lock is released.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Error, Fence, MemoryFence, ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let fence = MemoryFence::new();
    /// let ledger = ResourceName::new("ledger")?;
    /// let mut rows = Vec::new();
    /// let t = |n| Token::from_epoch(Epoch::new(n).unwrap());
    ///
    /// fence.fenced(&ledger, t(3), || async { rows.push("from term 3") }).await?;
    /// let late = fence.fenced(&ledger, t(2), || async { rows.push("from term 2") }).await;
    /// assert!(matches!(late, Err(Error::Stale { .. })));
    /// assert_eq!(rows, ["from term 3"]);
    /// # Ok(()) }
    /// ```
    fn fenced<W>(
        &self,
        resource: &ResourceName,
        token: Token,
        write: W,
    ) -> impl Future<Output = Result<W::Outcome, Error>> + Send
    where
        W: WriteFn + FnOnce() -> <W as WriteFn>::Future;

    /// The high-water mark of `resource`: the highest token it has
    /// accepted, or `None` if it has accepted none.
    ///
    /// It does not wait for a running [`fenced`](Fence::fenced) write; the
    /// mark may be raised the moment after it was read.
    ///
    /// Failure model: [`Error::Corrupt`] if the stored mark cannot be
    /// read, [`Error::Unavailable`] if the store failed.
    ///
    /// Cancel safety: it only reads; dropping it is harmless.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Fence, MemoryFence, ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), fencing::Error> {
    /// let fence = MemoryFence::new();
    /// let cache = ResourceName::new("cache")?;
    /// assert_eq!(fence.high_water_mark(&cache).await?, None);
    /// let token = Token::from_epoch(Epoch::new(8).unwrap());
    /// fence.advance(&cache, token).await?;
    /// assert_eq!(fence.high_water_mark(&cache).await?, Some(token));
    /// # Ok(()) }
    /// ```
    fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> impl Future<Output = Result<Option<Token>, Error>> + Send;
}

/// The write [`Fence::fenced`] runs: a closure that, once called, returns
/// the write's future, such as `|| async { .. }`.
///
/// It is implemented for every `FnOnce() -> Fut + Send` whose `Fut` is a
/// `Send` future with a `Send` output, and cannot be implemented otherwise.
///
/// Why not plain `F: FnOnce() -> Fut` generics: with those, a caller that
/// is generic over `impl Fence` and must be `Send` (for example inside
/// `tokio::spawn`) fails to compile ("one type is more general than the
/// other") as soon as the write's future borrows anything, a limitation of
/// the compiler's reasoning about higher-ranked lifetimes in `Send` bounds.
/// Naming the future through this trait avoids it.
///
/// ```
/// use election_core::Epoch;
/// use fencing::{Fence, MemoryFence, ResourceName, Token};
///
/// // Generic over the store, borrowing `log` in the write, spawned.
/// async fn append(fence: &impl Fence, log: &std::sync::Mutex<Vec<u64>>) -> Result<(), fencing::Error> {
///     let r = ResourceName::new("log")?;
///     let token = Token::from_epoch(Epoch::new(1).unwrap());
///     fence
///         .fenced(&r, token, || async {
///             tokio::task::yield_now().await;
///             log.lock().unwrap().push(1);
///         })
///         .await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let task = tokio::spawn(async {
///     let log = std::sync::Mutex::new(Vec::new());
///     append(&MemoryFence::new(), &log).await.unwrap();
///     log.into_inner().unwrap()
/// });
/// assert_eq!(task.await.unwrap(), [1]);
/// # }
/// ```
pub trait WriteFn: Send + sealed::Sealed {
    /// What the write's future returns.
    type Outcome: Send;
    /// The write's future.
    type Future: Future<Output = Self::Outcome> + Send;
}

impl<F, Fut> WriteFn for F
where
    F: FnOnce() -> Fut + Send,
    Fut: Future + Send,
    Fut::Output: Send,
{
    type Outcome = Fut::Output;
    type Future = Fut;
}

mod sealed {
    pub trait Sealed {}
    impl<F, Fut> Sealed for F
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future + Send,
        Fut::Output: Send,
    {
    }
}

/// Stale tokens refused, by every store ([`Advance::decide`] is the rule
/// each applies).
pub(crate) const REFUSALS: &str = "election_fence_refusals_total";

/// Registers the help text of the metric fencing records
/// (`election_fence_refusals_total`, a counter: stale tokens refused by
/// any fence of this process) with the installed recorder. Call it once
/// after installing one; without one it does nothing. The table of every
/// metric is in the repository's `docs/metrics.md`.
///
/// ```
/// fencing::describe_metrics();
/// ```
pub fn describe_metrics() {
    metrics::describe_counter!(
        REFUSALS,
        "Stale tokens refused by a fence of this process (any store)."
    );
}

/// An accepted token: the high-water mark before and after.
///
/// Made only by [`Advance::decide`], the rule every store applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Advance {
    /// The mark before: `None` if the resource had accepted no token yet.
    pub previous: Option<Token>,
    /// The mark now: the token presented.
    pub current: Token,
}

impl Advance {
    /// The rule: `presented` is accepted unless it is lower than `stored`,
    /// the resource's current mark; then it is the new mark. A store calls
    /// this under its lock, and persists `current` if
    /// [`raised`](Advance::raised).
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Advance, Error, ResourceName, Token};
    ///
    /// let r = ResourceName::new("r").unwrap();
    /// let t = |n| Token::from_epoch(Epoch::new(n).unwrap());
    /// assert!(Advance::decide(&r, None, t(1)).unwrap().raised());
    /// assert!(!Advance::decide(&r, Some(t(4)), t(4)).unwrap().raised());
    /// assert!(matches!(Advance::decide(&r, Some(t(4)), t(3)), Err(Error::Stale { .. })));
    /// ```
    pub fn decide(
        resource: &ResourceName,
        stored: Option<Token>,
        presented: Token,
    ) -> Result<Advance, Error> {
        match stored {
            Some(mark) if presented < mark => {
                metrics::counter!(REFUSALS).increment(1);
                Err(Error::Stale {
                    resource: resource.clone(),
                    presented,
                    high_water_mark: mark,
                })
            }
            _ => Ok(Advance {
                previous: stored,
                current: presented,
            }),
        }
    }

    /// True if the mark went up (from none, or from a lower token): the
    /// store must persist the new mark.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Advance, ResourceName, Token};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let resource = ResourceName::new("ledger")?;
    /// let stored = Some(Token::from_epoch(Epoch::FIRST)); // read under the store's lock
    /// let presented: Token = "3".parse()?;
    /// let advance = Advance::decide(&resource, stored, presented)?;
    /// if advance.raised() {
    ///     // persist `advance.current` durably before running the write
    /// }
    /// assert!(advance.raised());
    /// # Ok(()) }
    /// ```
    pub fn raised(&self) -> bool {
        self.previous != Some(self.current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::t;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn decide_refuses_exactly_the_lower_tokens(stored in proptest::option::of(1u64..50), presented in 1u64..50) {
            let r = ResourceName::new("r").unwrap();
            match Advance::decide(&r, stored.map(t), t(presented)) {
                Ok(a) => {
                    prop_assert!(stored.is_none_or(|s| presented >= s));
                    prop_assert_eq!(a.previous, stored.map(t));
                    prop_assert_eq!(a.current, t(presented));
                    prop_assert_eq!(a.raised(), stored != Some(presented));
                }
                Err(Error::Stale { resource, presented: p, high_water_mark }) => {
                    prop_assert_eq!(resource, r);
                    prop_assert_eq!(p, t(presented));
                    prop_assert_eq!(Some(high_water_mark), stored.map(t));
                    prop_assert!(p < high_water_mark);
                }
                Err(other) => prop_assert!(false, "unexpected {other:?}"),
            }
        }
    }
}
