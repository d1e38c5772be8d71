//! The store layer under the façade, the claim and the keyed claims: the
//! connection context (`context`), every read and write of the lease rows
//! and epoch records (`row`, the statements), the same-host locks beside
//! the database (`host_lock`), one database, one name (`names`), and the
//! tables and their migrations (`schema`, public).

pub(crate) mod context;
pub(crate) mod host_lock;
pub(crate) mod names;
pub(crate) mod row;
pub mod schema;
