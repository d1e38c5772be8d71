//! The integration tests of `fencing`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod display;
mod ended_terms;
mod file_fence_metrics;
mod metrics;
mod never_decrease;
mod unguarded;
