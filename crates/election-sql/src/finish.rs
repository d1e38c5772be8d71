//! [`FinishOnDrop`]: a future that is run to its end even when its caller
//! drops it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// A future that, dropped before it is done, is finished in a task of its
/// own (on the current tokio runtime, if any) and its output dropped.
///
/// Both SQL backends begin fenced transactions through it: a `BEGIN`
/// whose future sqlx drops in flight can leave its pooled connection
/// inside the transaction (sqlx 0.9 counts the transaction only once the
/// reply is read: transact-rs/sqlx#4393), and on SQLite a connection left
/// in `BEGIN IMMEDIATE` would keep the database's write lock. Finished to
/// its end instead, the transaction nobody awaits any more is dropped,
/// which rolls it back.
///
/// Outside a tokio runtime a dropped, unfinished future is dropped as is.
///
/// ```
/// use election_sql::FinishOnDrop;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (tx, rx) = tokio::sync::oneshot::channel();
/// let step = FinishOnDrop::new(async move {
///     tokio::task::yield_now().await;
///     let _ = tx.send("finished");
/// });
/// drop(step); // dropped before its first poll: still run to its end
/// assert_eq!(rx.await.unwrap(), "finished");
/// # }
/// ```
pub struct FinishOnDrop<T: Send + 'static>(Option<Pin<Box<dyn Future<Output = T> + Send>>>);

impl<T: Send + 'static> FinishOnDrop<T> {
    /// Wraps `future`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(election_sql::FinishOnDrop::new(async { 7 }).await, 7);
    /// # }
    /// ```
    pub fn new(future: impl Future<Output = T> + Send + 'static) -> Self {
        FinishOnDrop(Some(Box::pin(future)))
    }
}

impl<T: Send + 'static> Future for FinishOnDrop<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(inner) = self.0.as_mut() else {
            return Poll::Pending; // polled after it was done: never again ready
        };
        let out = ready!(inner.as_mut().poll(cx));
        self.0 = None;
        Poll::Ready(out)
    }
}

impl<T: Send + 'static> Drop for FinishOnDrop<T> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                drop(inner.await);
            });
        }
    }
}

impl<T: Send + 'static> std::fmt::Debug for FinishOnDrop<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinishOnDrop")
            .field("done", &self.0.is_none())
            .finish()
    }
}
