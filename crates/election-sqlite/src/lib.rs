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
//! # Epochs
//!
//! Every term of a name gets an epoch above every earlier term's of that
//! name, from [`Epoch::FIRST`](election_core::Epoch::FIRST) up to
//! [`Epoch::MAX`](election_core::Epoch::MAX) (`i64::MAX`, what an SQLite
//! `INTEGER` holds). The transaction that wins a term writes its epoch both
//! to the lease row (`election_leases`) and to the epoch state
//! (`election_epochs`), which this crate never deletes. A claim whose epoch
//! would be above `MAX` is refused with
//! [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted)
//! and writes nothing.
//!
//! A lease row deleted by hand: its holder loses at its next renewal or
//! commit-point check (`confirm`, a lease set's `guard`); every contender
//! treats the name as held for a full TTL (the longer of its own and the
//! last term's, on its own monotonic clock) from when it first sees the row
//! gone, which is after the holder's lease has run out; and the next term's
//! epoch is above every earlier one. A contender that saw a holder and then
//! finds no trace of the name at all does the same.
//!
//! # Waking waiters on one host
//!
//! Beside a database file `app.db`, [`SqliteElection::open`] and
//! [`SqliteElection::with_pool`] create a directory
//! `app.db-election-locks/` with one empty file per election name. Each
//! attempt holds an OFD lock on its name's file from before its claim can
//! commit until the attempt is closed (after its term ended); a waiting
//! candidate blocks in the kernel on that lock and tries the row the moment
//! the holder resigns, drops its term or its process dies, instead of at
//! its next poll. The winning transaction records the lock it holds in the
//! row (`lock_id`: its nonce, the kernel's boot id, the lock file's device
//! and inode); a contender that then gets that very lock while the row
//! still names that holder takes over at once, since the lock is freed
//! only after the holder's attempt was closed (its term ended: resigned,
//! or lost and dropped) or its process died. A stopped (`SIGSTOP`) or hung
//! holder keeps its lock and is taken over after a full TTL, as without
//! the lock; so is a holder on another host or boot, or one that did not
//! hold the lock when it won (see ADR 0026). If a term's work runs in
//! other processes, let them inherit the locked descriptor (see
//! [`SqliteElection::host_lock_path`]; `elect run` does): otherwise a
//! successor on the same host may start the moment this process dies,
//! while they still run. On a filesystem that may be shared between hosts (NFS, SMB,
//! FUSE, 9p and others), for a pool with no file, or where the directory
//! cannot be created, no lock is used (a `warn` log says so) and waiters
//! poll every poll interval and a dead holder is taken over after a full
//! TTL.
//!
//! Lease sets ([`SqliteKeyedClaims`]) use the same lock files, one per key (a
//! set and a single candidate contending for one name share its file): a
//! set takes a key's lock before the claim transaction that can win the
//! key and keeps it until the set closes, after its keys were released
//! (so also while a lost key's work may still run). Its winning claims
//! record `lock_id` as a single candidate's do, and a set that gets a
//! key's lock while the row still names that holder takes the key over
//! at once. A set waits in the kernel for the locks of the keys it asks
//! and does not hold (one thread each, at most 64 per set; the others are
//! polled; a set holds at most 256 keys' locks, keys beyond are claimed
//! without one and their successors wait out the TTL after a crash) and claims the moment one is freed: the keys of a set that
//! closed or whose process died move within milliseconds, not at the
//! next poll or after a TTL (ADR 0029). The lock directory is named after
//! the database's canonical path (symlinks and `..` resolved), so every
//! spelling of one path shares it; a path that cannot be resolved is
//! [`Error::PathUnresolvable`].
//!
//! # One database, one name
//!
//! SQLite names a database's `-wal` and `-shm` files after the path it was
//! given, so two names of one database file would each get a WAL of their
//! own: candidates on the two names would not exclude each other and could
//! both be elected, with the same epoch, and the file would be damaged.
//! A database file with a second hard link, or one that is a mount of its
//! own (the file, not its directory, bind-mounted, as `docker run -v
//! /srv/app.db:/data/app.db` does), is refused at open with
//! [`Error::SecondName`]: remove the second hard link; mount the
//! directory, not the file. The check runs again before every claim,
//! renewal and commit-point check, as the replaced-file check does: a
//! second name that appears during a term ends it as a reported loss, and
//! nothing is claimed through the database while it lasts (ADR 0046). A
//! symlink is not a second name (SQLite resolves it). Not detected: a name
//! this process cannot see, e.g. the host's path of a file bind-mounted
//! into a container (the process on the mount is refused), so every
//! process of an election must run a version with this check.
//!
//! # What an operator must never touch
//!
//! **Never delete, lower or edit the rows of `election_epochs` or
//! `election_fences` (triggers refuse a `DELETE`, a lowering `UPDATE` and
//! a lowering `REPLACE`; never drop them), never give
//! the database file a second name (a hard link, a bind mount of the file:
//! refused, see above), and never delete, replace or restore an older copy
//! of the database file while any candidate, lease set or fenced writer
//! may use it.** That state is the
//! only record of which epochs were handed out. Without it, epochs start
//! again at `Epoch::FIRST`: two terms share an epoch, and a fence accepts a
//! deposed leader's writes. The library cannot tell a fresh database from a
//! wiped one. What it does detect: a process whose database file was
//! deleted or replaced after it opened it makes no claim through it
//! ([`Error::FileReplaced`]), and a holder loses its term at its next
//! renewal or commit-point check. Deleting a lease row (not its epoch
//! state) is safe, as above; to end a stuck term, prefer letting it age
//! out. Never "release" a row by hand (`holder` and `nonce` set to
//! `NULL`): nothing tells that from a real release, so a contender wins
//! at once while the old holder's `held()` reads true until its next
//! renewal (its commit-point checks still refuse). See docs/safety.md,
//! "What an operator must never touch".
//!
//! # Limits
//!
//! One limit comes from SQLite itself: every renewal and claim takes the
//! database's single write lock. A process stopped (`SIGSTOP`, a debugger)
//! inside a write transaction keeps that lock, so no candidate can renew or
//! win anything until it runs again or dies. That is safe (every other term
//! ends as its lease runs out, and nobody wins meanwhile) but not live.
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

pub use claim::{HostLockWait, SqliteAttempt, SqliteClaim};
pub use driver::{SqliteDriver, SqliteUrl};
pub use election::SqliteElection;
pub use error::Error;
pub use fence::{SqliteFence, SqliteMarks};
pub use keyed::{KeyLocks, SqliteKeyedClaims};
pub use options::{DEFAULT_BUSY_TIMEOUT, DEFAULT_RENEW_INTERVAL, DEFAULT_TTL, SqliteOptions};
pub use store::context::SqliteStore;
pub use store::schema;

pub use election_sql::reexports::*;

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
