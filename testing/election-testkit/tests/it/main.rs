//! The integration tests of `election-testkit`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod conformance;
mod keyed_engine;
mod keyed_time;
mod membership;
mod readmes;
