//! The integration tests of `election-url`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod display;
mod open;
mod parse;
mod round_trip;
