//! The integration tests of `election-core`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod display;
mod lease_set;
mod loss_race;
mod metrics;
mod model;
mod retry_pause;
mod rules;
mod slow_claims;
mod terms_and_work;
