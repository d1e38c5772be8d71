//! Leader election on one host, with zero infrastructure: an OS file lock
//! plus a durable epoch file.
//!
//! Candidates that share a directory compete for a claim file's lock (an
//! open file description lock, freed by the kernel when the holder exits,
//! even on `SIGKILL`). The winner records the next epoch while it holds
//! the lock, so epochs only grow, across process crashes, OS crashes and
//! power loss. Waiting candidates wake the moment the lock is freed: no
//! polling.
//!
//! # Epochs without an fsync per term
//!
//! A term's epoch record is rewritten in place through the page cache,
//! without an fsync (with a checksum line, so a reader that catches a
//! rewrite reads again, and the record is never read as a mix of two). What survives a power cut is a durable *ceiling*: a bound on every
//! epoch handed out, reserved a block of 1024 epochs at a time (one
//! durable write per block) together with the kernel's boot id
//! (`/proc/sys/kernel/random/boot_id`). While the boot id is unchanged the
//! page cache was not lost and the record is exact; after an OS restart the
//! next epoch is past the ceiling, whatever the record still shows (it may
//! be stale, torn or missing), and a new block is reserved. So epochs
//! still strictly grow across power loss, and may jump by up to a block
//! after each restart of the OS. Without a readable boot id every term
//! writes its ceiling durably (the old cost: two fsyncs per term), and a
//! warning is logged. One case is not covered: a writeback error that the
//! kernel drops from the page cache within one boot (a failing disk) could
//! let the record go back to an older version without a restart; see ADR
//! 0025.
//!
//! # What an operator must never touch
//!
//! For each election `name` the directory holds `name.lock` (the claim
//! file), `name.epoch` (the epoch record: the highest epoch handed out)
//! and `name.epoch-ceiling` (the durable bound above); beside them
//! `name.value` (a term's value) and `name.transfer` (a request to hand a
//! term over), which are display and requests only. Never delete or
//! edit the epoch record or the ceiling: epochs would start again and
//! fencing tokens would go backwards. Once an election has had a term, a
//! missing record (within one boot of the OS) or a damaged ceiling is
//! refused as corrupt ([`Error::CorruptEpoch`]), and the
//! way out of a damaged or lost record is
//! [`FileElection::repair_epoch`] (`elect repair-epoch`), which sets it to
//! an epoch you give, at least the highest fencing token your resources
//! hold, and refuses one lower than any that may have been handed out (what
//! the record shows, and the epoch ceiling whenever the record cannot be
//! trusted, as after an OS restart: ADR 0048). Deleting the claim
//! file while a term runs is noticed by the holder's tamper watch (the term
//! is lost).
//!
//! # Handing a term to a successor
//!
//! [`Term::transfer`](election_core::Term::transfer) (ADR 0112) ends the
//! term in the lock hold that held it: under the epoch record's own lock,
//! with the claim file still locked and the record still showing the term,
//! the record is rewritten in place with a handover (`handover_to`,
//! `handover_window_ms`, the holder's wall clock and the kernel's boot id;
//! no new epoch), then the claim file is unlocked. A candidate other than
//! the successor that finds the handover answers "held" until it has seen
//! that handover for its window on its own monotonic clock, counted from
//! when its attempt first read it; meanwhile its wait does not take the
//! free lock again: it sleeps until the window ends or the record is
//! written (inotify on the directory: the successor's term began). The
//! successor wins at once, with the next epoch, and its record ends the
//! reservation. A handover does not outlive the boot of the OS it was
//! written in. If the holder dies part way, the record shows either its
//! term (the next claim wins, as after any crash) or the handover
//! (reserved for its window).
//!
//! [`FileElection::request_transfer`] asks the holder to hand over: the
//! request, with the term's epoch, goes to `name.transfer` (a temporary
//! file renamed over it, under the record's lock, only while a term holds
//! the claim). The holder's tamper watch reads it at the rename's event
//! and reports it to the term of that epoch only; it is not tampering.
//! [`FileElection::handover`] shows a handover no term has followed yet.
//!
//! # `flock(1)` does not exclude this crate
//!
//! The claim is an open file description lock (`fcntl(F_OFD_SETLK)`).
//! Linux keeps those apart from `flock(2)` locks, which `flock(1)` takes:
//! `flock name.lock cmd` and a leader of this crate do not exclude each
//! other. Use this crate (or `elect run`) on every side of an election.
//!
//! # Errors: permanent or transient
//!
//! A full disk or quota ([`Error::NoSpace`]) and other I/O errors
//! ([`Error::Io`]) are transient: a waiting campaign retries them (a
//! temporary record left by a failed write is removed first). A file that
//! cannot be used whatever the retries ([`Error::Unusable`]: a directory
//! where a file belongs, a write past the process's file size limit) ends
//! the campaign as a configuration error.
//!
//! ```
//! use election_file::FileElection;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let election = FileElection::new(tmp.path())?;
//! let candidate = election.candidate("dispatcher", "host-a/1")?;
//! let term = candidate.campaign().await?;
//! assert_eq!(candidate.leader().await?.unwrap().epoch, term.epoch());
//! term.resign().await?;
//! # Ok(()) }
//! ```
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

// The one layout of every backend (ADR 0059): the façade, the claim,
// options, errors, and the store layer underneath; beside them this
// backend's own public parts (`changes`, `repair`). No keyed claims of its
// own (a lease set is the core's `PerKeyClaims` over `FileClaim`), no
// renewal (an OS lock has no deadline), no fence (`fencing::FileFence`).
mod changes;
mod claim;
mod driver;
mod election;
mod error;
mod options;
mod repair;
mod store;
mod tamper;

pub use changes::Changes;
pub use claim::{FileAttempt, FileClaim};
pub use driver::{FILE_OPTIONS, FileDriver, FileUrl};
pub use election::FileElection;
pub use error::Error;
pub use options::{DEFAULT_TAMPER_CHECK_INTERVAL, FileOptions};
pub use repair::EpochRepair;

pub use election_core::{LeaseSet, PerKeyClaims, WriteToken};

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
