//! The store layer under the façade, the claim and the keyed claims: one
//! client per process and servers (`clients`), the
//! connection context every part works through (`connection`), opening
//! and checking the KV buckets (`bucket`), exact reads of a key through
//! the stream leader (`exact_read`), a watch of one key (`key_watch`), the
//! records stored under the keys
//! (`record`: a claim's, a session's), a lease set's session key
//! (`session`), and compare-and-sets sent again while their key is busy
//! (`settled`).

pub(crate) mod bucket;
pub(crate) mod clients;
pub(crate) mod connection;
pub(crate) mod exact_read;
pub(crate) mod key_watch;
pub(crate) mod queue;
pub(crate) mod record;
pub(crate) mod session;
pub(crate) mod settled;
