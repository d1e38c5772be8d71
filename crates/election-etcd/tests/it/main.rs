//! The integration tests of `election-etcd`, one test binary (ADR 0073):
//! a module per concern. Every test but the fault tests shares one etcd
//! member (`common::shared`), each under a prefix of its own.

mod auth;
mod balance;
mod behaviour;
mod channels;
mod common;
mod conformance;
mod faults;
mod fence;
mod revoke;
mod transfer;
mod version;
mod waiters;
