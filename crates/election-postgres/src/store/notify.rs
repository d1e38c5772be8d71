//! Wake-ups by `LISTEN`/`NOTIFY`: every statement that wins or releases a
//! lease row calls `pg_notify('election:<schema>', <name>)`, which the
//! server delivers at commit to every session listening on the channel.
//! One listener task per [`PostgresStore`](crate::store::context::PostgresStore) fans the
//! names out to the waiters of this process (candidates, lease sets,
//! observers). Notifications only wake a waiter early: every waiter also
//! polls, and a lost notification (the listener's connection dropped, the
//! waiter lagged) wakes everyone once.
//!
//! The listener uses a connection of its own (a one-connection pool with
//! the same connect options as the election's pool), so it never takes a
//! connection of the application's pool. It starts on the first wait,
//! not at open, so a process that never waits never listens.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// What a waiter is woken for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The lease row of this name was won or released.
    Name(Arc<str>),
    /// Notifications may have been missed (the listener (re)started or
    /// lost its connection): look at everything again.
    All,
}

impl Wake {
    /// Whether a waiter for names matching `wanted` should look again.
    pub(crate) fn concerns(&self, wanted: impl Fn(&str) -> bool) -> bool {
        match self {
            Wake::Name(n) => wanted(n),
            Wake::All => true,
        }
    }
}

/// How many wake-ups a slow waiter may fall behind before it is woken once
/// for all of them.
const CAPACITY: usize = 1024;
/// The pause before the listener connects again after a failure.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
/// How long a listener that nobody of this process subscribes to any more
/// stays open before it closes (ADR 0094): past the start of the term
/// whose win left it unused (its command starts within a few
/// milliseconds), so that the exit of its connection's server process is
/// not on that start's path either; long before a term of any length
/// ends.
pub(crate) const UNUSED_GRACE: Duration = Duration::from_millis(100);

/// The listener of one database's channel, and its subscribers.
#[derive(Debug)]
pub(crate) struct Notifier {
    tx: broadcast::Sender<Wake>,
    pool: PgPool,
    channel: Arc<str>,
    /// `None` once stopped for good: no listener starts again. The task,
    /// and the one-connection pool it listens on. Shared with the task
    /// that closes an unused listener after [`UNUSED_GRACE`].
    task: Arc<Mutex<Option<Option<Listening>>>>,
}

/// A running listener: its task, and the one-connection pool it listens on.
type Listening = (JoinHandle<()>, PgPool);

impl Notifier {
    pub(crate) fn new(pool: PgPool, channel: Arc<str>) -> Self {
        Notifier {
            tx: broadcast::channel(CAPACITY).0,
            pool,
            channel,
            task: Arc::new(Mutex::new(Some(None))),
        }
    }

    /// A receiver of every wake-up from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Wake> {
        self.tx.subscribe()
    }

    /// Starts the listener task if it does not run (on the current tokio
    /// runtime; without one, waiters only poll). Once it listens it wakes
    /// every subscriber, so none misses a notification sent before.
    pub(crate) fn start(&self) {
        let mut slot = self.task.lock().unwrap_or_else(|p| p.into_inner());
        let Some(task) = slot.as_mut() else {
            return;
        };
        if task.as_ref().is_some_and(|(t, _)| !t.is_finished()) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let options = (*self.pool.connect_options()).clone();
        let (tx, channel) = (self.tx.clone(), self.channel.clone());
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_lazy_with(options);
        let listening = pool.clone();
        *task = Some((
            rt.spawn(async move { listen(listening, &channel, &tx).await }),
            pool,
        ));
    }

    /// Stops the listener while nobody in this process subscribes (ADR
    /// 0071): a process that won and waits for nothing else closes its
    /// listener connection during its term, so that the exit of that
    /// connection's server process is not on the path of the handover
    /// that ends the term. It closes [`UNUSED_GRACE`] from now, not at
    /// once, so that the exit is not on the path of the term's start
    /// either (ADR 0094), and only if nobody subscribed meanwhile (such a
    /// subscriber keeps the running listener). The next
    /// [`start`](Self::start) listens again (and wakes every subscriber
    /// once it does). Every user subscribes before it starts the listener,
    /// so a subscriber that comes while this runs finds the listener
    /// running or starts it again. Without a runtime it closes at once.
    pub(crate) fn pause_if_unused(&self) {
        let mut slot = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if self.tx.receiver_count() > 0 {
            return;
        }
        let Some(Some((running, _))) = slot.as_ref() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            if let Some(task) = slot.as_mut().and_then(Option::take) {
                shut(task);
            }
            return;
        };
        let (id, later, tx) = (running.id(), Arc::clone(&self.task), self.tx.clone());
        rt.spawn(async move {
            tokio::time::sleep(UNUSED_GRACE).await;
            let mut slot = later.lock().unwrap_or_else(|p| p.into_inner());
            if tx.receiver_count() > 0 {
                return;
            }
            // The same listener: not one started again since, nor stopped.
            if let Some(listening) = slot.as_mut()
                && listening.as_ref().is_some_and(|(t, _)| t.id() == id)
                && let Some(task) = listening.take()
            {
                shut(task);
            }
        });
    }

    /// Stops the listener task for good (waiters poll from then on).
    pub(crate) fn stop(&self) {
        if let Some(Some(task)) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            shut(task);
        }
    }
}

/// Ends a listener task and closes its connection (in the background, on
/// the current runtime if there is one; else the connection closes when
/// its pool is dropped).
fn shut((task, pool): Listening) {
    task.abort();
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move { pool.close().await });
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Listens on `channel` forever, reconnecting after failures.
async fn listen(pool: PgPool, channel: &str, tx: &broadcast::Sender<Wake>) {
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => {
                listener.ignore_pool_close_event(true);
                match listener.listen(channel).await {
                    Ok(()) => {
                        let _ = tx.send(Wake::All);
                        loop {
                            match listener.try_recv().await {
                                Ok(Some(n)) => {
                                    let _ = tx.send(Wake::Name(n.payload().into()));
                                }
                                // The connection dropped: notifications may
                                // be lost until it is back.
                                Ok(None) => {
                                    let _ = tx.send(Wake::All);
                                }
                                Err(e) => {
                                    tracing::debug!(error = %e, "notification listener failed; reconnecting");
                                    break;
                                }
                            }
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "LISTEN failed; retrying"),
                }
            }
            Err(e) => tracing::debug!(error = %e, "notification listener cannot connect; retrying"),
        }
        let _ = tx.send(Wake::All);
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// Empties `rx` of what it received so far (a look at the rows follows).
pub(crate) fn drain(rx: &mut broadcast::Receiver<Wake>) {
    loop {
        match rx.try_recv() {
            Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return,
        }
    }
}

/// Waits until `rx` receives a wake-up that concerns `wanted` (or lags
/// behind). Never returns if the notifier is gone: bound it with the poll.
///
/// Cancel safety: cancel safe (a wake-up received is consumed only when
/// it is looked at).
pub(crate) async fn woken(rx: &mut broadcast::Receiver<Wake>, wanted: impl Fn(&str) -> bool) {
    loop {
        match rx.recv().await {
            Ok(w) if w.concerns(&wanted) => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A notifier whose listener runs (it cannot connect: nothing listens
    /// on port 1, so it keeps trying).
    fn listening() -> Notifier {
        let pool = PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        let notifier = Notifier::new(pool, "election:test".into());
        notifier.start();
        notifier
    }

    fn runs(notifier: &Notifier) -> bool {
        notifier
            .task
            .lock()
            .expect("lock")
            .as_ref()
            .is_some_and(|t| t.as_ref().is_some_and(|(t, _)| !t.is_finished()))
    }

    /// An unused listener closes after the grace, not at once (ADR 0094):
    /// its connection's end is off the path of the term that left it
    /// unused. Before, `pause_if_unused` emptied the slot at once.
    #[tokio::test(start_paused = true)]
    async fn an_unused_listener_closes_after_the_grace_not_at_once() {
        let notifier = listening();
        assert!(runs(&notifier), "started");
        notifier.pause_if_unused();
        assert!(runs(&notifier), "closed at once, within the term's start");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while runs(&notifier) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "still listening 30 s after the grace"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The next wait listens again.
        let _wakes = notifier.subscribe();
        notifier.start();
        assert!(runs(&notifier), "listening again");
    }

    /// A subscriber that comes within the grace keeps the listener, and a
    /// listener still subscribed to is not paused at all.
    #[tokio::test(start_paused = true)]
    async fn a_subscriber_within_the_grace_keeps_the_listener() {
        let notifier = listening();
        notifier.pause_if_unused();
        let wakes = notifier.subscribe();
        tokio::time::sleep(UNUSED_GRACE * 3).await;
        assert!(runs(&notifier), "closed under a subscriber");
        notifier.pause_if_unused();
        tokio::time::sleep(UNUSED_GRACE * 3).await;
        assert!(runs(&notifier), "paused while subscribed to");
        drop(wakes);
        notifier.stop();
        assert!(!runs(&notifier), "stopped for good");
    }
}
