//! Leader election in the PostgreSQL database a service already runs: a
//! lease row per name in a schema of its own, epochs from a sequence, expiry
//! judged on each contender's own monotonic clock, wake-ups by
//! `LISTEN`/`NOTIFY`, and a fence inside the application's transaction.
#![deny(missing_docs, unreachable_pub)]
#![warn(rust_2018_idioms)]

mod clock;
mod context;
mod election;
mod error;
mod fence;
mod lease_set;
mod notify;
mod options;
mod renewal;
mod row;
pub mod schema;

pub use clock::{Clock, SystemClock};
pub use election::{PostgresAttempt, PostgresClaim, PostgresElection};
pub use election_core::{LeaseSet, WriteToken};
pub use error::Error;
pub use fence::PostgresFence;
pub use lease_set::PostgresLeases;
pub use options::{
    DEFAULT_RENEW_INTERVAL, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SCHEMA, DEFAULT_TTL, MAX_SCHEMA_LEN,
    PostgresOptions,
};
