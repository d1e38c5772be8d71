//! The integration tests of `candidate-testkit`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod lease_set;

mod file;
mod lease_set_file;
mod lease_set_nats;
mod lease_set_postgres;
mod lease_set_sqlite;
mod nats;
mod postgres;
mod sqlite;
mod sqlite_names;
