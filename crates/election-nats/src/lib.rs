//! Leader election in a NATS JetStream key-value bucket, for services on
//! many hosts: one server, or a clustered (R3) bucket that keeps working
//! while a node dies.
//!
//! See [`NatsElection`] for how claims, epochs, renewal and waiting work,
//! [`Term::confirm`](election_core::Term::confirm) for the commit-point
//! check (one compare-and-set on the key, then a check of the bucket's
//! incarnation), and [`NatsFence`] for fencing high-water marks kept in KV.
//!
//! Supported servers: nats-server 2.11 and later (TTL markers wake waiting
//! candidates the moment a dead holder's lease expires); 2.10 works with
//! polling only. Tested against the version `nats-testkit` pins (2.15.1).
//!
//! # Epochs, and what they rest on
//!
//! A term's epoch is the bucket stream's **creation time in microseconds
//! plus the KV revision** of the write that won it (ADR 0015), so it is
//! always a term epoch (`>= Epoch::FIRST`, `<= Epoch::MAX`). It grows
//! with every term in one bucket and **keeps growing across a deleted and
//! recreated bucket**, as long as the server's clock does not step back
//! between the two creations by more than the old bucket's life. A term
//! begins only if the bucket is still the incarnation whose creation time
//! was read before the winning write was sent.
//!
//! While holding, every renewal and commit-point check re-reads the
//! bucket's configuration: a recreated bucket, or a max age below the TTL
//! the holder counts with, loses the term.
//!
//! **A single server can repeat an epoch after a host crash.** nats-server
//! acknowledges writes before they reach the disk (`sync_interval`, 2
//! minutes by default); a host crash or power loss on a one-node server
//! loses the last writes, later terms reuse their revisions, and a fence
//! accepts both. Nothing a client sees afterwards reveals it. Run the
//! server with `jetstream { sync_interval: always }`, or use an R3 bucket on
//! a cluster ([`NatsOptions::replicas`]). Opening an R1 bucket logs a
//! warning unless [`NatsOptions::single_replica_ok`] says the risk is known.
//! A killed server process loses nothing. See `docs/safety.md`.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

// The one layout of every backend (ADR 0059): the façade, the claim, the
// keyed claims, renewal, fence, options, errors, and the store layer
// underneath.
mod claim;
mod driver;
mod election;
mod error;
mod fence;
mod keyed;
mod options;
mod renewal;
mod requests;
mod store;

pub use claim::{NatsAttempt, NatsClaim};
pub use driver::{ConnectError, NATS_OPTIONS, NatsDriver, NatsUrl, nats_options};
pub use election::{Holder, NatsElection};
pub use error::{CREDENTIALS_HINT, Error};
pub use fence::NatsFence;
pub use keyed::NatsKeyedClaims;
pub use options::{DEFAULT_BUCKET, DEFAULT_TTL, NatsOptions, bucket_for_ttl};

pub use election_core::{LeaseSet, PerKeyClaims, WriteToken};

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
