//! The integration tests of `elect`, one test binary (ADR 0073): a
//! module per concern, each with its own doc.

mod common;

mod default_dir;
mod deposed;
mod edges;
mod errors;
mod etcd;
mod file;
mod getting_started;
mod metrics;
mod nats;
mod nats_secrets;
mod postgres;
mod server_down;
mod shell_users;
mod slots;
mod sqlite;
