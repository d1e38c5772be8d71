//! The kit against real etcd members: one binary (ADR 0073).

mod cluster;
mod member;
