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
//! naming its attempt ([`head_wake`]), and only that attempt wakes
//! ([`woken_as`]); a release that passed the term to it (ADR 0120) says
//! so in that payload. So a release wakes one waiter of one process, whatever
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

/// What a release told the head of a name's line (ADR 0108, ADR 0120).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeadWake {
    /// Look at the name: it was released (the payload `<nonce> <name>`), or
    /// notifications may have been missed.
    Look,
    /// The release passed the term to the attempt (the payload
    /// `<nonce>:<epoch>:<ticket> <name>`): the term's epoch, and the
    /// number of the attempt's waiter-row write that the release saw.
    Passed { epoch: i64, ticket: i64 },
}

/// What `payload`, heard on a process's own channel, tells attempt
/// `nonce` waiting for `name`: `None` if it is for another attempt or name
/// (or malformed). A nonce holds neither a space nor a colon, and the name
/// is everything after the first space.
pub(crate) fn head_wake(payload: &str, nonce: i64, name: &str) -> Option<HeadWake> {
    let (head, rest) = payload.split_once(' ')?;
    if rest != name {
        return None;
    }
    let mut parts = head.split(':');
    if parts.next()?.parse::<i64>().ok()? != nonce {
        return None;
    }
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => Some(HeadWake::Look),
        (Some(epoch), Some(ticket), None) => Some(HeadWake::Passed {
            epoch: epoch.parse().ok()?,
            ticket: ticket.parse().ok()?,
        }),
        _ => None,
    }
}

/// Waits until `wakes` receives on `channel` a head's wake-up for attempt
/// `nonce` of `name` ([`head_wake`]), or a wake-up of everything (the
/// session listened again or lost its connection), or lags behind (both:
/// [`HeadWake::Look`]). Never returns if the notifier is gone: bound it
/// with the poll.
///
/// Cancel safety: cancel safe, as [`woken`]; a pass this misses by being
/// cancelled stays in `wakes` for [`take_pass`].
pub(crate) async fn woken_as(wakes: &mut Wakes, channel: &str, nonce: i64, name: &str) -> HeadWake {
    loop {
        match wakes.rx.recv().await {
            Ok(h) if h.wake == Wake::All => return HeadWake::Look,
            Ok(Heard {
                channel: heard,
                wake: Wake::Name(payload),
            }) if *heard == *channel => {
                if let Some(wake) = head_wake(&payload, nonce, name) {
                    return wake;
                }
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return HeadWake::Look,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// Empties `wakes` of what it received so far, as [`drain`], and returns
/// the last pass among them to attempt `nonce` of `name` on `channel`
/// (ADR 0120), if any: its epoch and ticket.
pub(crate) fn take_pass(
    wakes: &mut Wakes,
    channel: &str,
    nonce: i64,
    name: &str,
) -> Option<(i64, i64)> {
    let mut passed = None;
    loop {
        match wakes.rx.try_recv() {
            Ok(Heard {
                channel: heard,
                wake: Wake::Name(payload),
            }) if *heard == *channel => {
                if let Some(HeadWake::Passed { epoch, ticket }) = head_wake(&payload, nonce, name) {
                    passed = Some((epoch, ticket));
                }
            }
            Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return passed,
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_head_wake_names_its_attempt_and_name() {
        assert_eq!(head_wake("-7 jobs", -7, "jobs"), Some(HeadWake::Look));
        assert_eq!(
            head_wake("-7:12:3 jobs a b", -7, "jobs a b"),
            Some(HeadWake::Passed {
                epoch: 12,
                ticket: 3
            })
        );
        assert_eq!(head_wake("-7 jobs", 7, "jobs"), None);
        assert_eq!(head_wake("-7:12:3 jobs", -7, "job"), None);
        assert_eq!(head_wake("-7:12 jobs", -7, "jobs"), None);
        assert_eq!(head_wake("-7:12:3:4 jobs", -7, "jobs"), None);
        assert_eq!(head_wake("-7:x:3 jobs", -7, "jobs"), None);
    }

    proptest! {
        /// A pass's payload, as `release_one` writes it, is read back
        /// whatever the name; any other text is read without a panic.
        #[test]
        fn a_pass_reads_back(nonce in any::<i64>(), epoch in any::<i64>(), ticket in any::<i64>(),
                             name in "\\PC{1,40}", other in "\\PC{0,60}") {
            let payload = format!("{nonce}:{epoch}:{ticket} {name}");
            prop_assert_eq!(head_wake(&payload, nonce, &name), Some(HeadWake::Passed { epoch, ticket }));
            prop_assert_eq!(head_wake(&format!("{nonce} {name}"), nonce, &name), Some(HeadWake::Look));
            let _ = head_wake(&other, nonce, &name);
        }
    }
}
