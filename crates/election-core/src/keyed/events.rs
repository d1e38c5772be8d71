//! [`KeyEvent`] and [`KeyEvents`]: what a lease set won, lost and gave
//! back, per key and term, in the order its book decided it (ADR 0060).

use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;

use crate::{ElectionName, Epoch, LossReason, lock};

/// One change of a lease set's holds: a key won, lost or given back, with
/// the epoch of the term it concerns.
///
/// Per key, a set's events alternate: `Won` in a term, then exactly one of
/// `Lost` or `Released` in that same term, then possibly `Won` in a later
/// (higher) term. `Won` is never reported for a term whose loss was
/// reported, and every loss of a term reported won is reported.
///
/// ```
/// use election_core::KeyEvent;
///
/// fn describe(event: &KeyEvent) -> String {
///     match event {
///         KeyEvent::Won { key, epoch } => format!("start the worker of {key} (term {epoch})"),
///         KeyEvent::Lost { key, epoch, reason } => format!("stop {key} now (term {epoch}): {reason}"),
///         KeyEvent::Released { key, .. } => format!("{key} given back"),
///         _ => String::from("a newer kind of event"),
///     }
/// }
/// # let _ = describe;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum KeyEvent {
    /// This set won `key` in term `epoch`: the win is recorded, `held`
    /// reads true.
    Won {
        /// The key.
        key: ElectionName,
        /// The term won (its fencing token).
        epoch: Epoch,
    },
    /// This set lost `key` in term `epoch` (rule 2: before another
    /// candidate could win it; `held` already reads false). Work under the
    /// key must stop; a fence refuses its late writes.
    Lost {
        /// The key.
        key: ElectionName,
        /// The term lost.
        epoch: Epoch,
        /// Why.
        reason: LossReason,
    },
    /// This set gave `key` back in term `epoch` ([`release`](crate::LeaseSet::release),
    /// balancing, or [`close`](crate::LeaseSet::close)), after the guards
    /// that ran under it finished. Reported as the release is sent.
    Released {
        /// The key.
        key: ElectionName,
        /// The term given back.
        epoch: Epoch,
    },
}

impl KeyEvent {
    /// The key the event is about.
    ///
    /// ```
    /// use election_core::{ElectionName, Epoch, KeyEvent};
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let key = ElectionName::new("shard-1")?;
    /// let won = KeyEvent::Won { key: key.clone(), epoch: Epoch::FIRST };
    /// assert_eq!(won.key(), &key);
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &ElectionName {
        match self {
            KeyEvent::Won { key, .. }
            | KeyEvent::Lost { key, .. }
            | KeyEvent::Released { key, .. } => key,
        }
    }

    /// The epoch of the term the event is about.
    ///
    /// ```
    /// use election_core::{ElectionName, Epoch, KeyEvent};
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let event = KeyEvent::Released { key: ElectionName::new("shard-1")?, epoch: Epoch::FIRST };
    /// assert_eq!(event.epoch(), Epoch::FIRST);
    /// # Ok(()) }
    /// ```
    pub fn epoch(&self) -> Epoch {
        match self {
            KeyEvent::Won { epoch, .. }
            | KeyEvent::Lost { epoch, .. }
            | KeyEvent::Released { epoch, .. } => *epoch,
        }
    }
}

/// A stream of one lease set's [`KeyEvent`]s, from
/// [`LeaseSet::events`](crate::LeaseSet::events): first a `Won` for each
/// key held when it was made, then every change in order. Nothing is
/// dropped (the queue is unbounded: read it). It ends once the set has
/// closed and given its keys up.
pub struct KeyEvents {
    rx: mpsc::UnboundedReceiver<KeyEvent>,
}

impl std::fmt::Debug for KeyEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyEvents")
            .field("queued", &self.rx.len())
            .finish()
    }
}

impl KeyEvents {
    /// The next event; `None` once the set has closed and every event was
    /// read.
    ///
    /// Cancel safety: cancel safe (an event is taken only when returned).
    ///
    /// Failure model: none; the stream only ends.
    ///
    /// ```
    /// # use election_core::{KeyEvent, LeaseSet};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// let mut events = set.events();
    /// set.ask("shard-1").await?;
    /// assert!(matches!(events.next().await, Some(KeyEvent::Won { .. })));
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Option<KeyEvent> {
        self.rx.recv().await
    }

    /// The next event if one is queued now, without waiting.
    ///
    /// ```
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// let mut events = set.events();
    /// assert!(events.try_next().is_none()); // nothing happened yet
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn try_next(&mut self) -> Option<KeyEvent> {
        self.rx.try_recv().ok()
    }
}

impl Stream for KeyEvents {
    type Item = KeyEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<KeyEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// The subscribers of one set's events. Published to with the holds lock
/// held, in the decision that made the change, so every subscriber sees
/// the book's order.
#[derive(Debug, Default)]
pub(crate) struct Subscribers {
    senders: Mutex<Option<Vec<mpsc::UnboundedSender<KeyEvent>>>>,
}

impl Subscribers {
    pub(crate) fn new() -> Self {
        Subscribers {
            senders: Mutex::new(Some(Vec::new())),
        }
    }

    /// A new subscriber, first told `held` (the keys held now); a stream
    /// that ends at once if the set has ended.
    pub(crate) fn subscribe(&self, held: impl IntoIterator<Item = KeyEvent>) -> KeyEvents {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut senders = lock(&self.senders);
        if let Some(senders) = senders.as_mut() {
            for event in held {
                let _ = tx.send(event);
            }
            senders.push(tx);
        }
        KeyEvents { rx }
    }

    /// Sends `events` to every subscriber still reading.
    pub(crate) fn publish(&self, events: Vec<KeyEvent>) {
        if events.is_empty() {
            return;
        }
        let mut senders = lock(&self.senders);
        if let Some(senders) = senders.as_mut() {
            senders.retain(|tx| events.iter().all(|e| tx.send(e.clone()).is_ok()));
        }
    }

    /// The set has ended: every stream ends after what it queued.
    pub(crate) fn end(&self) {
        lock(&self.senders).take();
    }
}
