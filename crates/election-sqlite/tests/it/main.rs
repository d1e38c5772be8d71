//! The integration tests of `election-sqlite`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod common;

mod behaviour;
mod confirm;
mod conformance;
mod deleted_row;
mod display;
mod fence;
mod heartbeats;
mod lease_set;
mod transfer;
mod unusable;
