//! The layer the SQL backends share (ADR 0052), in the manner of
//! `sqlx-core` under its drivers: `election-sqlite` and
//! `election-postgres` implement [`LeaseRows`] over their own statements;
//! this crate keeps what is the same for both and depends on no SQL
//! driver.
//!
//! # What a user may rely on
//!
//! Applications depend on a backend, not on this crate. What they may rely
//! on from here is what a backend shows them, under the semver of that
//! backend:
//!
//! - the names in [`reexports`] ([`Clock`], [`SystemClock`],
//!   [`LeaseTimes`] and the core's), which every SQL backend re-exports;
//! - the methods and trait implementations of the types behind the
//!   backends' own names (`SqliteClaim` is [`SqlClaim`], `SqliteAttempt`
//!   [`SqlAttempt`], `SqliteKeyedClaims` [`SqlKeyedClaims`], `SqliteFence`
//!   [`SqlFence`]; the same for `Postgres*`), as the backend documents them.
//!
//! **Everything else is exempt from semver**, as `sqlx-core` says of its
//! own shared layer: the traits a backend implements ([`LeaseRows`],
//! [`ClaimRows`], [`KeyedRows`], [`FenceRows`], [`ElectionStore`],
//! [`IntoCore`]), the bookkeeping ([`KeyedState`], [`AttemptState`],
//! [`HeldRow`], [`Answer`], [`Classed`]), the free functions and
//! [`impl_into_core!`] are public only so that `election-sqlite` and
//! `election-postgres` can share them; they may change in any release.
//! Each backend depends on the exact version of this crate it was built
//! with (`=0.1.0`), so a change here never reaches a user through a
//! backend it was not made with. A new SQL backend written outside this
//! workspace should do the same. `doc_support`, hidden, holds the doc
//! examples' fixtures (ADR 0101) and is no part of the API at all.
//!
//! - [`lease_row`]: the lease row as data, the contender's one decision
//!   over it ([`lease_row::may_claim`]: a takeover only after a full TTL
//!   unchanged on its own monotonic clock) and the lease-time checks.
//! - [`HeartbeatBook`] (ADR 0110): each lease set's heartbeat, bumped by every
//!   statement that extends its terms, watched by the other sets, so a
//!   crashed set's keys are taken a TTL after its last renewal.
//! - [`LeaseTimes`]: the TTL and renewal interval every backend's options
//!   hold, with the margin, the validity and their checks.
//! - [`Clock`] (ADR 0053): the monotonic clock every lease decision reads,
//!   and the wall clock written for people to read only.
//! - [`renew_term`]: a single term's renewal loop, the core's
//!   [`renew_until_lost`](election_core::renew_until_lost) over
//!   [`LeaseRows::renew_one`].
//! - [`LeaseRows`]: the lease-row statements each backend implements, and
//!   [`KeyedState`]: the bookkeeping of keyed claims over them (each held
//!   key's term, each contended key's observation; renew, confirm and
//!   release many), with [`failed_all`]: how a batch's failure answers
//!   every key.
//! - [`SqlClaim`] and [`SqlAttempt`]: the claim of one candidate, the
//!   core's [`Claim`](election_core::Claim) written once over [`ClaimRows`],
//!   the claim steps each backend implements with what truly differs
//!   (ADR 0081); the backends name them `SqliteClaim`, `PostgresClaim`.
//! - [`SqlKeyedClaims`]: the keys of a lease set, the core's
//!   [`KeyedClaims`](election_core::KeyedClaims) written once over
//!   [`KeyedRows`] (ADR 0081); the backends name it `SqliteKeyedClaims`,
//!   `PostgresKeyedClaims`.
//! - [`SqlFence`]: a fence whose marks live in the database, the `fencing`
//!   crate's [`Fence`](fencing::Fence) written once over [`FenceRows`]
//!   (ADR 0081); the backends name it `SqliteFence`, `PostgresFence`.
//! - [`FinishOnDrop`]: how both backends begin a fenced transaction that a
//!   dropped caller cannot leave open.
//! - [`watch_term`]: a SQL claim's `watch`, spawning [`renew_term`];
//!   [`write_term`]: its `confirm` and `proclaim`, one conditional write;
//!   [`impl_into_core!`]: a backend error's groups, the same for both
//!   backends ([`IntoCore`]).
//! - [`mark_of`], [`token_from_mark`], [`stored_token`],
//!   [`check_committed_mark`], [`write_locked`]: a fence's high-water mark
//!   as both backends store it, the check after a mark is committed, and
//!   the fenced write under the backend's lock.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod claim;
#[doc(hidden)]
pub mod doc_support;
mod fence;
mod fence_mark;
mod finish;
mod heartbeat;
mod keyed;
mod keyed_claims;
pub mod lease_row;
mod renewal;
mod times;

pub use claim::{AttemptState, ClaimRows, ElectionStore, SqlAttempt, SqlClaim};
pub use election_core::{Clock, SystemClock};
pub use fence::{FenceRows, SqlFence};
pub use fence_mark::{check_committed_mark, mark_of, stored_token, token_from_mark, write_locked};
pub use finish::FinishOnDrop;
pub use heartbeat::{HEARTBEAT_KEPT_MS, Heartbeat, HeartbeatBook};
pub use keyed::{
    Answer, Basis, Classed, HeldRow, IntoCore, KeyedState, LeaseRows, check_poll_interval,
    fail_each, failed_all, for_key, lease_set_identity,
};
pub use keyed_claims::{KeyedRows, SqlKeyedClaims};
pub use renewal::{renew_term, renewal_policy, watch_term, write_term};
pub use times::LeaseTimes;

/// The names both SQL backends re-export beside their own (one list, ADR
/// 0081): the core's lease set, its per-key adapter and a write's token,
/// and this layer's clock and lease times. A backend's `lib.rs` has
/// `pub use election_sql::reexports::*;`.
///
/// ```
/// use election_sql::reexports::{Clock, LeaseTimes, SystemClock};
///
/// let times = LeaseTimes::new(std::time::Duration::from_secs(15), std::time::Duration::from_secs(5));
/// assert!(times.validity() < times.ttl());
/// let _now = SystemClock.now();
/// ```
pub mod reexports {
    pub use crate::{Clock, LeaseTimes, SystemClock};
    pub use election_core::{LeaseSet, PerKeyClaims, WriteToken};
}

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
