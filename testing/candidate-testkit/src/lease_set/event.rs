//! The lines `lease-set-node` prints.

use std::fmt;

/// One line of `lease-set-node`'s output.
///
/// ```
/// use candidate_testkit::lease_set::Event;
///
/// let e = Event::parse("held key-0007 12 345").unwrap();
/// assert_eq!(e, Event::Held { key: "key-0007".into(), epoch: 12, at: 345 });
/// assert_eq!(e.to_string(), "held key-0007 12 345");
/// assert!(Event::parse("held key-0007 twelve 345").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `ready <mono_ns>`: every key has been answered once.
    Ready {
        /// When.
        at: u64,
    },
    /// `held <key> <epoch> <mono_ns>`: a sweep saw `key` held in term
    /// `epoch`.
    Held {
        /// The key.
        key: String,
        /// The epoch of the hold.
        epoch: u64,
        /// The clock read right before the `held` call that saw it.
        at: u64,
    },
    /// `free <key> <mono_ns> <held_until_ns>`: a sweep saw `key` not held
    /// any more.
    Free {
        /// The key.
        key: String,
        /// The clock read right before the `held` call that saw it.
        at: u64,
        /// The clock read right after the last call that saw it held: every
        /// "held" answer came before it. It ends the hold, so a process
        /// that was paused (and answered nothing) is not counted as holding
        /// through its pause.
        held_until: u64,
    },
    /// `closing <mono_ns>`: the set is closing; nothing is held from here
    /// on.
    Closing {
        /// Read right before the set was closed.
        at: u64,
    },
    /// `closed <mono_ns>`: `close` returned; the process exits 0.
    Closed {
        /// When.
        at: u64,
    },
    /// `note <text>`: information only.
    Note(String),
    /// `error <message>`: the process failed and exits non-zero.
    Error(String),
}

impl Event {
    /// Parses one line.
    pub fn parse(line: &str) -> Result<Event, String> {
        let bad = || format!("bad line {line:?}");
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let fields: Vec<&str> = rest.split(' ').filter(|f| !f.is_empty()).collect();
        let ns = |f: &str| f.parse::<u64>().map_err(|_| bad());
        Ok(match (word, fields.as_slice()) {
            ("ready", [at]) => Event::Ready { at: ns(at)? },
            ("held", [key, epoch, at]) => Event::Held {
                key: (*key).to_owned(),
                epoch: epoch.parse().map_err(|_| bad())?,
                at: ns(at)?,
            },
            ("free", [key, at, held_until]) => Event::Free {
                key: (*key).to_owned(),
                at: ns(at)?,
                held_until: ns(held_until)?,
            },
            ("closing", [at]) => Event::Closing { at: ns(at)? },
            ("closed", [at]) => Event::Closed { at: ns(at)? },
            ("note", _) => Event::Note(rest.to_owned()),
            ("error", _) => Event::Error(rest.to_owned()),
            _ => return Err(bad()),
        })
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Ready { at } => write!(f, "ready {at}"),
            Event::Held { key, epoch, at } => write!(f, "held {key} {epoch} {at}"),
            Event::Free {
                key,
                at,
                held_until,
            } => write!(f, "free {key} {at} {held_until}"),
            Event::Closing { at } => write!(f, "closing {at}"),
            Event::Closed { at } => write!(f, "closed {at}"),
            Event::Note(text) => write!(f, "note {text}"),
            Event::Error(message) => write!(f, "error {message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_round_trips() {
        for e in [
            Event::Ready { at: 1 },
            Event::Held {
                key: "key-0001".into(),
                epoch: 3,
                at: 2,
            },
            Event::Free {
                key: "key-0001".into(),
                at: 4,
                held_until: 3,
            },
            Event::Closing { at: 5 },
            Event::Closed { at: 6 },
            Event::Note("ignored --ttl-ms".into()),
            Event::Error("bad: worse".into()),
        ] {
            assert_eq!(Event::parse(&e.to_string()), Ok(e));
        }
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in [
            "",
            "held",
            "held k 1",
            "free k",
            "free k 1",
            "ready x",
            "closed 1 2",
            "won 3",
        ] {
            assert!(Event::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
