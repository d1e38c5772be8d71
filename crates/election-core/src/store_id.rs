//! [`StoreId`]: which store keeps a backend's elections, however it is
//! reached.

use std::fmt;

/// The identity of the store that keeps a backend's elections: the same
/// for every way of reaching that store, different for different stores.
///
/// A path, a host name or a server list names a store only as it was
/// *written*: a directory reached through a bind mount, `localhost` and
/// `127.0.0.1`, or a cluster's servers listed in another order are one
/// store under two spellings. A tool that keeps something per election on
/// one host (`elect run` keeps each term's processes in a cgroup that the
/// next winner on the host ends) keys it by the store id and the
/// election's name, so that every candidate of one election finds it, and
/// no other election's candidate does. Each backend says what its id is
/// made of ([`Election::store_id`](crate::Election::store_id)): the device
/// and inode of a directory or database file, a PostgreSQL server's system
/// identifier with the database and schema, a NATS bucket and the creation
/// time of its stream.
///
/// An id is text, stable across processes and versions of this crate, and
/// meant to be compared or hashed, not parsed.
///
/// ```
/// use election_core::StoreId;
///
/// let a = StoreId::new("file", "dev=fd01,ino=1234");
/// assert_eq!(a, StoreId::new("file", "dev=fd01,ino=1234"));
/// assert_ne!(a, StoreId::new("sqlite", "dev=fd01,ino=1234"));
/// assert_eq!(a.as_str(), "file:dev=fd01,ino=1234");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreId(String);

impl StoreId {
    /// The id of a store of backend `kind` (`file`, `sqlite`, …), made of
    /// `id`: what tells that backend's stores apart.
    ///
    /// ```
    /// use election_core::StoreId;
    ///
    /// let id = StoreId::new("postgres", "system=7716065058048487960,db=16385,schema=election");
    /// assert!(id.as_str().starts_with("postgres:"));
    /// ```
    pub fn new(kind: &str, id: impl fmt::Display) -> StoreId {
        StoreId(format!("{kind}:{id}"))
    }

    /// The id as text: `KIND:ID`.
    ///
    /// ```
    /// use election_core::StoreId;
    ///
    /// assert_eq!(StoreId::new("nats", "b").as_str(), "nats:b");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
