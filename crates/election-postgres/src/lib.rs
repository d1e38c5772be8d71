//! Leader election in the PostgreSQL database a service already runs: a
//! lease row per name in a schema of its own, epochs from a sequence, expiry
//! judged on each contender's own monotonic clock, wake-ups by
//! `LISTEN`/`NOTIFY`, and a fence inside the application's transaction.
//!
//! ```no_run
//! use election_postgres::{PostgresElection, PostgresOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The password comes from PGPASSWORD or ~/.pgpass, never the URL on argv.
//! let election = PostgresElection::connect("postgres://app@db.internal:5432/app", PostgresOptions::default()).await?;
//! let candidate = election.candidate("dispatcher", "host-a/1")?;
//! let term = candidate.campaign().await?;
//! assert_eq!(candidate.leader().await?.unwrap().epoch, term.epoch());
//! term.resign().await?;
//! # Ok(()) }
//! ```
//!
//! # Where it writes
//!
//! Only in its own schema (default `election`,
//! [`PostgresOptions::with_schema`]), created and migrated by
//! [`PostgresElection::connect`] or [`PostgresElection::with_pool`] under a
//! transaction-scoped advisory lock (see [`schema`]). The application's
//! tables are never touched. A pool of its own ([`PostgresElection::connect`])
//! or the application's ([`PostgresElection::with_pool`]); the
//! notification listener always uses one connection of its own.
//!
//! # Epochs (rule 1)
//!
//! Every epoch is drawn from the sequence `epoch_seq` by `nextval` *in the
//! statement that wins the term*, never below one above every epoch the
//! name's row and epoch record show, so an epoch is handed out at most once
//! and every term of a name gets a higher one than every earlier term of
//! that name, also after its lease row (or its epoch record) was deleted by
//! hand, and across server restarts. The range is
//! [`Epoch::FIRST`](election_core::Epoch::FIRST) to
//! [`Epoch::MAX`](election_core::Epoch::MAX) (`i64::MAX`); past it a claim
//! is refused with
//! [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted)
//! and writes nothing.
//!
//! Durability: a session with `synchronous_commit = off` is refused at
//! open ([`Error::UnsafeSetting`]): the server could acknowledge a claim
//! and then lose it, and the sequence value with it, in a crash, so the
//! same epoch could be handed out twice. A failover to an asynchronous
//! replica can lose acknowledged commits the same way: where the database
//! fails over, use synchronous replication (ADR 0033). Only a release
//! commits without waiting for its flush (for its own transaction; ADR
//! 0071): a release lost in a crash leaves the name held by a term that
//! stopped acting, which ages out after its TTL, and a win after a release
//! flushes the release with it.
//!
//! # Expiry without trusting any wall clock (rule 2)
//!
//! - The holder renews every `renew_interval` (one conditional `UPDATE`)
//!   and counts its lease valid until `ttl - margin` after the monotonic
//!   instant *before* its last successful renewal was sent. A renewal that
//!   fails or does not answer within its bound has an unknown outcome: it is
//!   not counted and is retried; the term is lost at the deadline.
//! - A contender takes a held lease over only after it has itself seen the
//!   row unchanged (same holder, epoch and renewal version) for a full TTL
//!   (the longer of its own and the holder's) on its own monotonic clock.
//!   It first saw that version after the holder sent the renewal that wrote
//!   it, so the holder's deadline always comes first. Neither the server's
//!   clock nor any client's wall clock is compared: a wall-clock jump on
//!   any machine cannot make two leaders. Wall-clock times in the row
//!   (`acquired_unix_ms`, `renewed_unix_ms`, [`Leader::since`](election_core::Leader))
//!   are for display.
//! - A lease row deleted by hand: its holder loses at its next renewal or
//!   commit-point check; every contender treats the name as held for a
//!   full TTL from when it first sees the row gone (the epoch record says
//!   someone held it), which is after the holder's lease has run out.
//!
//! # Wake-ups
//!
//! Every statement that wins or releases a row calls `pg_notify` on the
//! channel `election:<schema>` with the name; the server delivers it at
//! commit. Lease sets and observers listen on it (on the process's one
//! session with the server, started by the first wait, ADR 0105), so a
//! clean handover (resign, a dropped term, a closed lease set) does not
//! wait for a poll.
//!
//! Waiting candidates queue (ADR 0108): each has a row in the name's
//! waiters' queue (`waiters`, schema version 7), in the order they first
//! waited, and a release also notifies the first of them, on its
//! process's own channel, naming its attempt. So a release wakes one
//! waiter, not all: the handover's cost does not grow with the number of
//! waiters. The queue is advice; winning is the same conditional claim
//! statement as before. Behind the head, the poll interval is the
//! backstop: the same vacancy seen on two polls in a row (the head was
//! woken and did not claim: dead, paused, cut off) is claimed by whoever
//! comes first. A listener that lost its connection wakes everyone once.
//!
//! A dropped connection does not prove its holder gone (a network
//! partition drops connections of live processes, and a process can lose
//! its connection and reconnect), so no contender acts on one: a holder
//! that died, hangs or is cut off costs its TTL.
//!
//! # Busy and unreachable servers
//!
//! A campaign that cannot reach the server tries again later: `try_claim`
//! answers `Unavailable` with the cause (connection refused, unknown host;
//! a wait for a pooled connection is bounded by the request timeout, ADR
//! 0064), which a waiting campaign reports and rides out with a backoff
//! and `try_campaign` returns; a claim statement that failed or did not
//! answer after it was sent is an unknown outcome, released in the
//! background (conditional on the attempt's nonce) as the campaign starts
//! a new attempt. A guard or
//! `confirm` answers `Unavailable` (or `OutcomeUnknown` past the lease's
//! validity): do not write then. Someone else holding is `NotHeld`.
//!
//! # Fencing
//!
//! [`PostgresFence::begin_fenced`] begins a transaction whose first act
//! checks and raises a resource's high-water mark, in the round trip of the
//! `BEGIN`; [`PostgresFence::advance_in`] does the same inside a
//! transaction the application began. Either way the guarded write
//! commits with the check or not at all; a deposed leader's token is
//! refused ([`fencing::Error::Stale`]) and its transaction rolls back.
//!
//! # What an operator must never touch
//!
//! **Never drop the election schema, delete or lower rows of its `epochs`
//! table, move `epoch_seq` back (`setval`, `ALTER SEQUENCE .. RESTART`),
//! or restore an older backup of the database while any candidate, lease
//! set or fenced writer may use it.** Epochs would then repeat and a fence
//! would accept a deposed leader's writes. Deleting a lease row is safe
//! (above); to end a stuck term, prefer letting it age out.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

// The one layout of every backend (ADR 0059): the façade, the claim, the
// keyed claims, fence, options, errors, and the store layer underneath
// (renewal: the shared SQL layer's, `election_sql::renew_term`).
mod claim;
mod driver;
mod election;
mod error;
mod fence;
mod keyed;
mod options;
mod store;

pub use claim::{PostgresAttempt, PostgresClaim, WakeWait};
pub use driver::{POSTGRES_OPTIONS, PassfileError, PostgresDriver, PostgresUrl};
pub use election::PostgresElection;
pub use error::Error;
pub use fence::{PostgresFence, PostgresMarks};
pub use keyed::{KeyWakes, PostgresKeyedClaims};
pub use options::{
    DEFAULT_RENEW_INTERVAL, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SCHEMA, DEFAULT_TTL, MAX_SCHEMA_LEN,
    PostgresOptions,
};
pub use store::close::CLOSE_GRACE;
pub use store::context::PostgresStore;
pub use store::schema;

pub use election_sql::reexports::*;

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
