//! The keyed half of the core: many keys, one lease each.
//!
//! - [`lease_set`]: [`LeaseSet`], what a user holds (`held`, `ask`,
//!   `guard`, `close`).
//! - [`claims`]: [`KeyedClaims`], the batch steps a backend implements.
//! - [`balance`]: fair shares and rendezvous ranks of a balanced set
//!   ([`Balance`], [`SetMember`]), pure.
//! - [`book`]: the engine's decisions, pure: what is held, what was lost,
//!   and what to do next (claim, renew, release, sleep until). Expiry is
//!   judged there, in [`Renewal::decide`](crate::renewal::Renewal::decide)
//!   and in `key_state`, nowhere else.
//! - [`engine`]: the loop (`drive`) that executes the book's commands,
//!   the [`Holds`](engine::Holds) it shares with the set, and the
//!   [`HoldReporter`] a backend reports losses through.
//! - [`events`]: [`KeyEvent`], [`KeyEvents`]: what the set won, lost and
//!   gave back, per key and term.
//! - [`key_state`]: one key as `held` reads it, without a lock.
//! - [`membership`]: [`Membership`], a balanced set's record and view of
//!   the live members, over any [`Election`](crate::Election).
//! - [`per_key`]: [`PerKeyClaims`], a [`KeyedClaims`] over any
//!   [`Claim`](crate::Claim) (one campaign per key).

pub(crate) mod balance;
pub(crate) mod book;
pub(crate) mod claims;
pub(crate) mod engine;
pub(crate) mod events;
pub(crate) mod key_state;
pub(crate) mod lease_set;
pub(crate) mod membership;
pub(crate) mod per_key;

pub use balance::{Balance, SetMember};
pub use claims::{Claimed, HeldKey, KeyedClaims};
pub use engine::HoldReporter;
pub use events::{KeyEvent, KeyEvents};
pub use lease_set::{DEFAULT_CLOSE_TIMEOUT, LeaseSet};
pub use membership::{Balanced, MAX_MEMBERS, Membership};
pub use per_key::PerKeyClaims;
