//! Leader election in a NATS JetStream key-value bucket, for services on
//! many hosts: one server, or a clustered (R3) bucket that keeps working
//! while a node dies.
//!
//! See [`NatsElection`] for how claims, epochs, renewal and waiting work,
//! [`NatsClaim::confirm`] for the commit-point check, and [`NatsFence`] for
//! fencing high-water marks kept in KV.
//!
//! Supported servers: nats-server 2.11 and later (TTL markers wake waiting
//! candidates the moment a dead holder's lease expires); 2.10 works with
//! polling only. Tested against the version `nats-testkit` pins (2.15.1).
#![deny(missing_docs, unreachable_pub)]
#![warn(rust_2018_idioms)]

mod bucket;
mod claim;
mod election;
mod error;
mod fence;
mod latest;
mod lease_set;
mod options;
mod session;
mod value;

pub use claim::{NatsAttempt, NatsClaim};
pub use election::NatsElection;
pub use error::Error;
pub use fence::NatsFence;
pub use lease_set::NatsLeases;
pub use options::{DEFAULT_BUCKET, DEFAULT_TTL, NatsOptions};
