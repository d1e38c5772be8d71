//! The table of schemes: the one place in the tools' side of the boundary
//! that names every backend. A backend joins with one line here (behind
//! its feature); everything else reaches it through
//! [`election_driver`]'s traits.

use election_driver::Driver;

/// Every driver compiled in, in the order messages list their schemes.
pub(crate) const DRIVERS: &[&dyn Driver] = &[
    #[cfg(feature = "file")]
    &election_file::FileDriver,
    #[cfg(feature = "sqlite")]
    &election_sqlite::SqliteDriver,
    #[cfg(feature = "nats")]
    &election_nats::NatsDriver,
    #[cfg(feature = "postgres")]
    &election_postgres::PostgresDriver,
    #[cfg(feature = "etcd")]
    &election_etcd::EtcdDriver,
];

/// The driver of `scheme` (any of its spellings).
pub(crate) fn driver(scheme: &str) -> Option<&'static dyn Driver> {
    DRIVERS
        .iter()
        .copied()
        .find(|d| d.schemes().contains(&scheme))
}

/// Each driver's name (its first scheme), for messages.
pub(crate) fn schemes() -> Vec<&'static str> {
    DRIVERS
        .iter()
        .filter_map(|d| d.schemes().first().copied())
        .collect()
}
