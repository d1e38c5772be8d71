//! The integration tests of `nats-testkit`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod cluster;
mod single_server;
