//! Leader election for Rust services: the core.
//!
//! A *candidate* campaigns for the *claim* of a named election; the one that
//! wins it holds a *term*, numbered by an *epoch* that grows with every
//! term. The term ends when its holder resigns or drops it, or when it is
//! *lost* (the backend took the claim away). Terms are *leases* that
//! [fencing](https://docs.rs/fencing) turns into tokens.
//!
//! This crate has no I/O of its own. A backend implements the [`Claim`]
//! steps (see its four rules); [`Candidate`] runs the campaign over any
//! backend; [`Term`] is what the winner holds; [`Term::lead`] runs the
//! leader's work so that it stops the moment the term is lost.
//!
//! - [`memory`]: an in-memory backend for tests and examples.
//! - [`conformance`]: the suite every backend runs against itself.
//!
//! ```
//! use election_core::{memory::MemoryBackend, Candidate, Lease};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), election_core::Error> {
//! let backend = MemoryBackend::new();
//! let term = Candidate::new(backend.claim("nightly-report", "worker-1")?).campaign().await?;
//! tokio::select! {
//!     lost = term.lost() => eprintln!("stop: {lost}"),
//!     () = async { /* the singleton job */ } => term.resign().await?,
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs, unreachable_pub)]
#![warn(rust_2018_idioms)]

mod campaign;
mod claim;
pub mod conformance;
mod epoch;
mod error;
mod lead;
mod lease;
pub mod memory;
mod name;
mod nonce;
mod term;

pub use campaign::{Candidate, DEFAULT_POLL_INTERVAL};
pub use claim::{Claim, End, Leader, Watch, Won};
pub use epoch::{Epoch, ParseEpochError};
pub use error::{ConfigError, Error, LeaseLost, LossReason, Source};
pub use lead::{DEFAULT_DRAIN_TIMEOUT, LeadOptions, Leadership};
pub use lease::Lease;
pub use name::{ElectionName, Identity, MAX_NAME_LEN, check_key_name};
pub use nonce::attempt_nonce;
pub use term::{LossReporter, Term, TermLease};
