//! The store layer under the façade, the claim and the keyed claims: the
//! connection context (`context`), every read and write of the lease rows
//! and epoch records (`row`, the statements), the wake-ups by
//! `LISTEN`/`NOTIFY` (`notify`), the process's one session with a server
//! that runs them (`session`, ADR 0105), the schema's objects and migrations
//! (`schema`, public), and the grace before a close after a release
//! (`close`, ADR 0086).

pub(crate) mod acquire;
pub(crate) mod close;
pub(crate) mod context;
pub(crate) mod notify;
pub(crate) mod row;
pub mod schema;
pub(crate) mod session;
pub(crate) mod wake;
