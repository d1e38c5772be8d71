//! The integration tests of `election-file`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod changes;
mod conformance;
mod display;
mod errors;
mod filesystems;
mod leader;
mod lease_set;
mod tamper;
mod transfer;
