//! One [`LeaseSet`](election_core::LeaseSet) in a process of its own (the
//! `lease-set-node` binary of this crate), reporting every change of what it
//! holds on stdout, so that tests can run several such processes over one
//! backend, kill some, and check from the reports that no key ever had two
//! holders and that a dead process's keys moved to the others in time.
//!
//! ```text
//! lease-set-node --backend URL [--identity ID] [--keys N]
//!     [--ttl-ms N] [--renew-ms N] [--grace-ms N] [--poll-ms N] [--sweep-ms N]
//! ```
//!
//! `URL` is any backend URL of `election-url`: `file:///abs/dir`,
//! `sqlite:///abs/path.db`, `postgres://user@host:port/db` or
//! `nats://host:port[,host:port...][?replicas=3]`. The keys are `key-0000`,
//! `key-0001`, ... (`--keys`, default 1,000). A setting the backend does
//! not have is ignored (with a `note` line).
//!
//! The process asks about every key, then samples
//! [`LeaseSet::held`](election_core::LeaseSet::held) for all keys every
//! `--sweep-ms` (default 1 ms) and prints each change, one [`Event`] per
//! line (`<mono_ns>` is `CLOCK_MONOTONIC` in nanoseconds, the same clock
//! in every process of the host):
//!
//! - `held <key> <epoch> <mono_ns>`: the sweep saw the key held;
//! - `free <key> <mono_ns>`: the sweep saw it not held any more;
//! - `ready <mono_ns>`: every key has been answered once;
//! - `closing <mono_ns>`: `close` begins, `held` is false from here on;
//! - `closed <mono_ns>`: `close` returned; the process exits 0;
//! - `note <text>`: information (an ignored setting, a failed first ask);
//! - `error <message>`: the process could not run; it exits with code 2.
//!
//! A change is stamped with the clock read right before the `held` call
//! that saw it, and a `free` line carries the read right after the last
//! call that saw the key held, so a hold's interval contains every moment
//! this process was seen holding the key. A call whose two reads are more
//! than a millisecond apart is made again ([`Sweep`]).
//!
//! Commands on stdin: `close` (or end of input) closes the set and exits.
//!
//! The [`Timeline`] collects these events from several processes and
//! checks them.
mod args;
mod event;
mod sweep;
mod timeline;

pub use args::Args;
pub use event::Event;
pub use sweep::{MAX_ASKS, Sweep, TIGHT_NS};
pub use timeline::{Interval, Timeline, Violation, check_intervals};

/// The name of key number `i`: `key-0000`, `key-0001`, ...
pub fn key_name(i: usize) -> String {
    format!("key-{i:04}")
}
