//! Fencing tokens: stop a deposed leader's late writes.
//!
//! A leader can lose its term and not know it yet (a long pause, a
//! partition); its writes may then still reach a resource after a newer
//! leader's. Fencing makes the *resource* refuse them: every write carries a
//! [`Token`] made from the writer's term ([`Token::issue`]), and the store
//! beside the resource keeps the highest token it has accepted, its
//! *high-water mark*. A token lower than the mark is refused with
//! [`Error::Stale`]; an equal or higher one is accepted and raises the mark.
//!
//! [`Fence`] is that check-and-advance, done atomically with the write:
//! [`Fence::fenced`] checks the token, persists the raised mark, runs the
//! write and only then lets the next writer of the resource in, so a stale
//! write cannot slip in between the check and the write.
//!
//! A lease set's guarded write feeds a fence too: `Token::from(&write_token)`
//! is the epoch the key was held in at the commit point, and
//! [`ResourceName::for_key`] names the key's own resource.
//!
//! - [`MemoryFence`]: for the tasks of one process.
//! - [`FileFence`]: mark files in a directory, safe across processes (Linux).
//!
//! ```
//! use election_core::{Candidate};
//! use election_testkit::memory::MemoryBackend;
//! use fencing::{Fence, FileFence, ResourceName, Token};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let backend = MemoryBackend::new();
//! let term = Candidate::new(backend.claim("nightly-report", "worker-1")?).campaign().await?;
//!
//! let fence = FileFence::open(dir.path().join("fences"))?;
//! let report = ResourceName::new("report")?;
//! let token = Token::issue(&term)?;
//! let written = fence
//!     .fenced(&report, token, || async { /* write the report */ "done" })
//!     .await?;
//! assert_eq!(written, "done");
//! assert_eq!(fence.high_water_mark(&report).await?, Some(token));
//! # Ok(()) }
//! ```
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod error;
mod fence;
#[cfg(target_os = "linux")]
mod file;
mod issue;
mod memory;
pub mod mono;
mod resource;
#[cfg(test)]
mod test_support;
mod token;

pub use error::Error;
pub use fence::{Advance, Fence, WriteFn, describe_metrics};
#[cfg(target_os = "linux")]
pub use file::FileFence;
pub use memory::MemoryFence;
pub use resource::{MAX_RESOURCE_LEN, ResourceName};
pub use token::Token;

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
