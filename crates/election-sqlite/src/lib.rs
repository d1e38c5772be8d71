//! Leader election in any SQLite database: a lease row with a TTL and an
//! epoch, safe against wall-clock jumps, with a fence that runs inside the
//! application's own transaction.
//!
//! ```
//! use election_sqlite::{SqliteElection, SqliteOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
//! let candidate = election.candidate("dispatcher", "host-a/1")?;
//! let term = candidate.campaign().await?;
//! assert_eq!(candidate.leader().await?.unwrap().epoch, term.epoch());
//! term.resign().await?;
//! # Ok(()) }
//! ```
//!
//! One limit comes from SQLite itself: every renewal and claim takes the
//! database's single write lock. A process stopped (`SIGSTOP`, a debugger)
//! inside a write transaction keeps that lock, so no candidate can renew or
//! win anything until it runs again or dies. That is safe (every other term
//! ends as its lease runs out, and nobody wins meanwhile) but not live.
#![deny(missing_docs, unreachable_pub)]
#![warn(rust_2018_idioms)]

mod clock;
mod election;
mod error;
mod fence;
mod lease_set;
mod options;
mod renewal;
mod row;
pub mod schema;

pub use clock::{Clock, SystemClock};
pub use election::{SqliteAttempt, SqliteClaim, SqliteElection};
pub use election_core::{LeaseSet, PerKeyClaims, WriteToken};
pub use error::Error;
pub use fence::SqliteFence;
pub use lease_set::SqliteLeases;
pub use options::{DEFAULT_BUSY_TIMEOUT, DEFAULT_RENEW_INTERVAL, DEFAULT_TTL, SqliteOptions};

/// The README's examples, compiled as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
