//! The integration tests of `candidate-testkit`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod lease_set;

mod file;
mod nats;
mod postgres;
mod sqlite;
mod sqlite_names;
