//! Leader election on one host, with zero infrastructure: an OS file lock
//! plus a durable epoch file.
//!
//! Candidates that share a directory compete for a claim file's lock (an
//! open file description lock, freed by the kernel when the holder exits,
//! even on `SIGKILL`). The winner durably records the next epoch while it
//! holds the lock, so epochs only grow, across crashes and restarts.
//! Waiting candidates wake the moment the lock is freed: no polling.
//!
//! # What an operator must never touch
//!
//! For each election `name` the directory holds `name.lock` (the claim
//! file) and `name.epoch` (the epoch record: the highest epoch handed out).
//! Never delete or edit the epoch record: epochs would start again and
//! fencing tokens would go backwards. Once an election has had a term, a
//! missing record is refused as corrupt ([`Error::CorruptEpoch`]), and the
//! way out of a damaged or lost record is
//! [`FileElection::repair_epoch`] (`elect repair-epoch`), which sets it to
//! an epoch you give, at least the highest fencing token your resources
//! hold, and refuses a lower one than it can still see. Deleting the claim
//! file while a term runs is noticed by the holder's tamper watch (the term
//! is lost).
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
#![deny(missing_docs, unreachable_pub)]
#![warn(rust_2018_idioms)]

mod changes;
mod claimfile;
mod election;
mod error;
mod fstype;
mod lock;
mod record;
mod repair;
mod waiter;

pub use changes::Changes;
pub use election::{
    DEFAULT_TAMPER_CHECK_INTERVAL, FileAttempt, FileClaim, FileElection, FileOptions,
};
pub use election_core::{LeaseSet, PerKeyClaims, WriteToken};
pub use error::Error;
pub use repair::EpochRepair;
