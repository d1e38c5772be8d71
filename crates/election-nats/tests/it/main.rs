//! The integration tests of `election-nats`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod behaviour;
mod busy_key;
mod conformance;
mod connections;
mod display;
mod faults;
mod fence;
mod incarnations;
mod lease_set;
mod lease_set_pause;
mod transfer;
mod ttl_and_down;
mod waiters;
