//! Backend URLs: one grammar to name a backend, parsed and printed in one
//! place, and [`Backend`], the backend a URL names, opened.
//!
//! The tools (`elect`, `lease-set-node`, `torture`, the candidate binary
//! of `candidate-testkit`, the benchmarks) take a backend as a URL and
//! depend on this crate, and name no backend: each backend implements
//! [`election_driver`]'s traits in its own crate (its scheme's parsing,
//! opening, and what only it has), and this crate's table of schemes
//! (`src/table.rs`) is the one place that lists them, one line and one
//! cargo feature (`file`, `sqlite`, `nats`, `postgres`; all by default)
//! each. The backends stay independent of each other and of this crate.
//!
//! # The grammar
//!
//! ```text
//! file:///dir[?option=value&...]
//!     options: volatile_ok=1|0  unknown_fs_ok=1|0
//! sqlite:///path/to/app.db
//! nats://[user:password@]host:port[,host:port...][?option=value&...]
//!     options: bucket=NAME  replicas=N  creds=FILE  token=T
//!              single_replica_ok=1|0
//! postgres://[user[:password]@]host[:port][/database][?option=value&...]
//!     (postgresql:// is the same; printed as postgres://)
//!     options: schema=NAME  ttl=DURATION  renew=DURATION
//!              passfile=/ABSOLUTE/PATH  sslmode=MODE
//!     DURATION: a number and a unit as 500ms, 1.5s, 2m or 1h, at least
//!               1ms (the grammar of `elect`'s flags: [`parse_duration`])
//! ```
//!
//! A PostgreSQL password need never be on a command line: without one in
//! the URL it comes from `PGPASSWORD`, then the `?passfile=` file, then
//! `PGPASSFILE` or `~/.pgpass`, as libpq looks for it.
//!
//! - `file` and `sqlite` take an absolute path (three slashes: the
//!   authority is empty). `sqlite` takes no options; `file` takes two
//!   that accept, by name, a directory the file backend refuses
//!   otherwise (`election_file::FileUrl`): `volatile_ok=1` one on tmpfs or ramfs
//!   (a reboot empties it, and epochs start again), `unknown_fs_ok=1` one
//!   on a filesystem of a type not known to be local.
//! - Paths, the user, the password and option values are percent-decoded
//!   (`%3F` is `?`, `%25` is `%`); `+` stays `+`. A decoded NUL byte, and
//!   a `%` not followed by two hex digits, are refused.
//! - Strict: an unknown option ([`ParseError::UnknownOption`], naming it
//!   and the options the scheme knows), an option given twice, an empty
//!   option (`?&`), an option without `=` and a `#` fragment are refused.
//!   A server list entry may repeat the `nats://` prefix
//!   (`nats://h1:4222,nats://h2:4222`).
//! - Printing ([`Display`](std::fmt::Display)) gives a URL that parses
//!   back to the same value, with every byte the grammar gives a meaning
//!   percent-encoded — except that passwords and tokens print as
//!   [`REDACTED`]: `Display` and `Debug` never show a secret.
//!   [`BackendUrl::with_secrets`] prints them, for handing the URL to a
//!   child process (never to a log). Errors never quote a secret; a tool
//!   that quotes what the user typed uses [`redact`].
//!
//! # Opening
//!
//! [`BackendUrl::open`] opens the backend with [`Settings`] (lease timing,
//! observer); the [`Backend`] it returns implements
//! [`election_core::Election`] over any backend, each step forwarded to
//! the backend's own type: its claim is [`AnyClaim`], its lease set
//! [`AnyLeaseSet`].
//!
//! ```no_run
//! use election_core::Election;
//! use election_url::{BackendUrl, Settings};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let url: BackendUrl = "sqlite:///srv/app.db".parse()?;
//! let backend = url.open(&Settings::default()).await?;
//! let term = backend.candidate("nightly-report", "host-a/4711")?.campaign().await?;
//! println!("leading in term {}", term.epoch());
//! term.resign().await?;
//! # Ok(()) }
//! ```
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod backend;
mod error;
mod table;
mod url;

pub use backend::{AnyLeaseSet, Backend, Opening, Pending};
/// The clock [`Backend::with_clock`] takes, and the system's.
pub use election_core::{Clock, SystemClock};
pub use election_driver::{
    AnyAttempt, AnyClaim, Changes, Credentials, DurationError, EpochRepair, Holder, LeaseCheck,
    LeaseTiming, MAX_DURATION, REDACTED, Secret, Settings, Warning, Watch, format_duration,
    parse_duration, redact,
};
pub use error::{Error, ParseError, classify};
pub use url::{BackendUrl, WithSecrets};

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot. (The workspace README's
/// examples are compiled in `election-testkit`, which is not published.)
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
