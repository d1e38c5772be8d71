//! The integration tests of `election-postgres`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod common;
#[path = "common/race.rs"]
mod race;

mod behaviour;
mod conformance;
mod connections;
mod display;
mod faults;
mod fence;
mod heartbeats;
mod holder_process;
mod lease_set;
mod lease_set_faults;
mod lease_set_slow;
mod notify;
mod observe;
mod queue;
mod recipes;
mod schema;
mod server_down;
mod session;
mod transfer;
