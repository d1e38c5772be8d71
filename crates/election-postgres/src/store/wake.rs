//! What a waiter is woken for, as the process's session hears it on a
//! channel, and the bounds of that fan-out.

use std::sync::Arc;
use std::time::Duration;

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
pub(crate) const CAPACITY: usize = 1024;
/// How long a listener that nobody of this process subscribes to any more
/// keeps listening (ADR 0094): past the start of the term whose win left
/// it unused (its command starts within a few milliseconds), so that the
/// `UNLISTEN` is not on that start's path either; long before a term of
/// any length ends.
pub(crate) const UNUSED_GRACE: Duration = Duration::from_millis(100);

/// A wake-up as the session hears it: on which channel (empty for
/// [`Wake::All`], which concerns every channel).
#[derive(Clone, Debug)]
pub(crate) struct Heard {
    pub(crate) channel: Arc<str>,
    pub(crate) wake: Wake,
}
