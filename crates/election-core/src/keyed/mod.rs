//! The keyed half of the core: many keys, one lease each.
//!
//! - [`lease_set`]: [`LeaseSet`], what a user holds (`held`, `ask`,
//!   `guard`, `close`).
//! - [`engine`]: [`KeyedClaims`], the batch steps a backend implements,
//!   the shared [`Holds`](engine::Holds) and the loop (`drive`) that runs
//!   the steps.
//! - [`key_state`]: one key as `held` reads it, without a lock.
//! - [`per_key`]: [`PerKeyClaims`], a [`KeyedClaims`] over any
//!   [`Claim`](crate::Claim) (one campaign per key).

pub(crate) mod book;
pub(crate) mod engine;
pub(crate) mod key_state;
pub(crate) mod lease_set;
pub(crate) mod per_key;

pub use engine::{Claimed, HeldKey, HoldReporter, KeyedClaims};
pub use lease_set::{DEFAULT_CLOSE_TIMEOUT, LeaseSet};
pub use per_key::PerKeyClaims;
