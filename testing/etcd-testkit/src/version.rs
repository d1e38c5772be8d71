//! The pinned etcd version.

/// The etcd version the kit installs (the crates.io crate
/// `etcd-bin-vendored-linux-amd64` of that version carries its binary).
pub const ETCD_VERSION: &str = "3.7.2";
