//! Leader election in etcd v3, for services on many hosts: one member, or
//! a three- or five-member cluster that keeps working while a member dies.
//!
//! See [`EtcdElection`] for how claims, epochs, renewal and waiting work,
//! [`Term::confirm`](election_core::Term::confirm) for the commit-point
//! check (one transaction comparing the key's create revision and lease),
//! and [`EtcdFence`] for fencing marks kept in etcd, checked inside the
//! application's own transaction.
//!
//! # Epochs, and what they rest on
//!
//! A term's epoch is the **revision of the transaction that won it** (the
//! election key's create revision). etcd's revision is one counter for
//! the whole key space: it grows with every write, survives member
//! restarts and leader changes, and is not lowered by compaction (which
//! drops old history, never the counter). So every later term of a name
//! has a higher epoch, also after the key was deleted by hand.
//!
//! **A restore from a snapshot lowers it**: the restored cluster resumes
//! at the snapshot's revision, and revisions written after the snapshot
//! are handed out again, unless the restore says
//! `etcdutl snapshot restore --bump-revision N --mark-compacted` with `N`
//! above the writes since the snapshot. A restore also gives the cluster a
//! new ID: every term of a process that sees the cluster ID change is lost
//! at its next renewal or check, and its claims fail
//! ([`Error::ClusterChanged`]). A high-water mark kept in etcd would be
//! restored with everything else, so none is kept; the fence's mark in the
//! protected resource still refuses any epoch below the highest it saw.
//! See `docs/safety.md` and ADR 0109.
//!
//! # The waiters' line
//!
//! A candidate that finds the key held puts a waiter key with its lease
//! and watches the waiter ahead of it; the first in line watches the
//! election key. An expiry wakes that one only. A release passes the term
//! to it (ADR 0119): one transaction puts the election key over with the
//! head's lease, so the head holds the term without a write of its own;
//! its epoch is that transaction's revision.
//!
//! # Revoke
//!
//! [`EtcdElection::revoke`] ends the current term from outside (ADR
//! 0111): one transaction on the term's epoch deletes the election key
//! and puts a revocation key whose lease lasts at least the deposed
//! holder's TTL; its revision is the revocation's epoch, for fences. No
//! claim wins while it stands.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

// The one layout of every backend (ADR 0059): the façade, the claim,
// the keyed claims, renewal, fence, options, errors, the driver, and the
// store layer
// underneath.
mod claim;
mod driver;
mod election;
mod error;
mod fence;
mod keyed;
mod options;
mod renewal;
mod store;

pub use claim::{EtcdAttempt, EtcdClaim};
pub use driver::{ETCD_OPTIONS, EtcdDriver, EtcdUrl, PASSWORD_ENV, PassfileError};
pub use election::EtcdElection;
pub use error::{CREDENTIALS_HINT, Cause, Error};
pub use fence::{EtcdFence, MarkCompare};
pub use keyed::EtcdKeyedClaims;
pub use options::{DEFAULT_PREFIX, DEFAULT_TTL, EtcdOptions};
pub use store::version::NEEDED_VERSION;

pub use election_core::{LeaseSet, PerKeyClaims, WriteToken};

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
