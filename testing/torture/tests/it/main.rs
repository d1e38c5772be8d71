//! The integration tests of `torture`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod postgres;
mod relative_out;
mod unsafe_mode;
