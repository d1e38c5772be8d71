//! Wake-ups by `LISTEN`/`NOTIFY`: every statement that wins or releases a
//! lease row calls `pg_notify('election:<schema>', <name>)`, which the
//! server delivers at commit to every session listening on the channel.
//! The process's session with the server ([`Session`], ADR 0105) listens
//! on the channels of its elections between their statements and fans the
//! names out to the subscribers of this process (lease sets, observers,
//! and waiting candidates not in the waiters' queue).
//!
//! A waiting candidate in the queue (ADR 0108) does not listen on that
//! channel: a release also notifies the head of the name's queue on the
//! channel of its process's session (`election:wake:<id>`, see
//! [`wake_channel`](crate::store::session::wake_channel)), the payload
//! naming its attempt ([`head_payload`]), and only that attempt wakes
//! ([`woken_as`]). So a release wakes one waiter of one process, whatever
//! the number of waiters; a process listens on its channel while one of
//! its waiters is in line.
//!
//! Notifications only wake a waiter early: every waiter also polls, and a
//! lost notification (the session's connection dropped, the waiter lagged)
//! wakes everyone once.
//!
//! It listens from the first wait, not at open, so a process that never
//! waits never listens; it never takes a connection of the application's
//! pool.

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::store::session::Session;
use crate::store::wake::{Heard, Wake};

/// The wake-ups of one channel, as one subscriber receives them.
#[derive(Debug)]
pub(crate) struct Wakes {
    rx: broadcast::Receiver<Heard>,
    channel: Arc<str>,
}

/// The wake-ups of one database's channel for this process: the channel's
/// subscribers, over the process's session with the server
/// ([`Session`]), which listens on it while anyone subscribes.
#[derive(Debug)]
pub(crate) struct Notifier {
    session: Arc<Session>,
    channel: Arc<str>,
}

impl Notifier {
    pub(crate) fn new(session: Arc<Session>, channel: Arc<str>) -> Self {
        Notifier { session, channel }
    }

    /// A receiver of every wake-up from now on.
    pub(crate) fn subscribe(&self) -> Wakes {
        Wakes {
            rx: self.session.subscribe(),
            channel: self.channel.clone(),
        }
    }

    /// Listens on the channel if the session does not yet (without a
    /// connection, the session connects). Once it listens it wakes every
    /// subscriber, so none misses a notification sent before.
    pub(crate) fn start(&self) {
        self.session.listen(self.channel.clone());
    }

    /// Stops listening while nobody in this process subscribes (ADR 0071):
    /// a process that won and waits for nothing else does not listen
    /// during its term. It stops [`UNUSED_GRACE`] from now, not at once
    /// (ADR 0094), and only if nobody subscribes then. The connection
    /// stays: it carries the term's renewals (ADR 0105). The next
    /// [`start`](Self::start) listens again (and wakes every subscriber
    /// once it does). Every user subscribes before it starts the listener.
    pub(crate) fn pause_if_unused(&self) {
        self.session.pause_if_unused();
    }
}

/// What a release sends on the channel of the process whose waiter heads
/// the queue of `name` (ADR 0108): that waiter's attempt `nonce`, then the
/// name (`<nonce> <name>`; a nonce holds no space).
pub(crate) fn head_payload(nonce: i64, name: &str) -> String {
    format!("{nonce} {name}")
}

/// Waits until `wakes` receives exactly `payload` on `channel` (a head's
/// wake-up, ADR 0108), or a wake-up of everything (the session listened
/// again or lost its connection), or lags behind. Never returns if the
/// notifier is gone: bound it with the poll.
///
/// Cancel safety: cancel safe, as [`woken`].
pub(crate) async fn woken_as(wakes: &mut Wakes, channel: &str, payload: &str) {
    loop {
        match wakes.rx.recv().await {
            Ok(h) if h.wake == Wake::All => return,
            Ok(h) if *h.channel == *channel && h.wake.concerns(|p| p == payload) => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// Empties `rx` of what it received so far (a look at the rows follows).
pub(crate) fn drain(wakes: &mut Wakes) {
    loop {
        match wakes.rx.try_recv() {
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
pub(crate) async fn woken(wakes: &mut Wakes, wanted: impl Fn(&str) -> bool) {
    loop {
        match wakes.rx.recv().await {
            Ok(h) if h.wake == Wake::All => return,
            Ok(h) if *h.channel == *wakes.channel && h.wake.concerns(&wanted) => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}
