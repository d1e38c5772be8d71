//! The waiters' line of one election (ADR 0109), as etcd's own lock
//! keeps it: each waiting attempt puts `<prefix>/w/<name>/<lease>` with
//! its lease and watches the waiter just ahead of it (the greatest create
//! revision below its own); the head of the line watches the election
//! key. A release or an expiry wakes the head only; the head's win deletes
//! its waiter key in the same transaction, which wakes the next one. While
//! a handover reserves the name for another candidate (ADR 0112), the head
//! watches the handover key instead: etcd deletes it when its window ends
//! (its lease), or the successor's claim does. While a revocation stands
//! (ADR 0111), the head watches the revocation key: etcd deletes it when
//! its lease ends, once the deposed holder's lease could have run out.
//!
//! A holder's release passes the term to the head of the line when it can
//! (ADR 0119): one transaction puts the election key over with the head's
//! lease and record and deletes the head's waiter key. The head's watch of
//! the election key sees the put on its own lease ([`Ahead::Passed`] when
//! it reads it so), and the next waiter's watch sees the waiter key go.

use election_core::{ElectionName, Identity};

use crate::error::Error;
use crate::store::client::{Kind, Watch};
use crate::store::proto::{self, RangeRequest, TxnRequest};
use crate::store::{Store, created_at, first_read, put_op, range_op, record};

/// The head of a waiters' line as a held term's renewal task last saw it
/// (`renewal.rs::Renewal::follow_line`), for its release to pass the term
/// to (ADR 0119); `None`: nobody waits, or not known.
pub(crate) type Line = std::sync::Arc<std::sync::Mutex<Option<proto::KeyValue>>>;

/// What a waiter watches.
#[derive(Debug)]
pub(crate) enum Ahead {
    /// The election key is free now: claim at once.
    Free,
    /// The election key is on this waiter's own lease: a release passed
    /// the term to it (ADR 0119). The key as read.
    Passed(Box<proto::KeyValue>),
    /// A watch of the key to wait for (the waiter ahead, or the election
    /// key for the head), and the key.
    Watching(Vec<u8>, Box<Watch>),
}

/// Puts this attempt's waiter key (if not there), its value naming the
/// waiter and its attempt (`nonce`), and returns its create revision.
pub(crate) async fn join(
    store: &Store,
    name: &ElectionName,
    lease: i64,
    identity: &Identity,
    nonce: u64,
) -> Result<i64, Error> {
    let key = record::waiter_key(store.options.key_prefix(), name, lease);
    let r = store
        .client
        .txn(
            "join the waiters",
            Kind::Write,
            TxnRequest {
                compare: vec![created_at(&key, 0)],
                success: vec![put_op(&key, record::encode_waiter(identity, nonce), lease)],
                failure: vec![range_op(&key)],
            },
        )
        .await?;
    if r.succeeded {
        return Ok(r.header.map_or(0, |h| h.revision));
    }
    Ok(first_read(r.responses).map_or(0, |kv| kv.create_revision))
}

/// The head of `name`'s waiters' line (the lowest create revision), if
/// anyone waits, and the revision read at.
pub(crate) async fn head(
    store: &Store,
    name: &ElectionName,
) -> Result<(i64, Option<proto::KeyValue>), Error> {
    first_in_line(store, name, proto::SORT_ASCEND, 0).await
}

/// The first waiter of `name`'s line in `order` of create revision, at
/// most `max_create_revision` (0: any), and the revision read at.
async fn first_in_line(
    store: &Store,
    name: &ElectionName,
    order: i32,
    max_create_revision: i64,
) -> Result<(i64, Option<proto::KeyValue>), Error> {
    let prefix = record::waiters_prefix(store.options.key_prefix(), name);
    let (revision, kvs) = store
        .client
        .range_with(RangeRequest {
            range_end: record::prefix_end(&prefix),
            key: prefix,
            limit: 1,
            sort_order: order,
            sort_target: proto::SORT_BY_CREATE,
            max_create_revision,
        })
        .await?;
    Ok((revision, kvs.into_iter().next()))
}

/// What the waiter `identity` on `lease` whose key was created at `place`
/// waits for.
pub(crate) async fn ahead(
    store: &Store,
    name: &ElectionName,
    place: i64,
    identity: &Identity,
    lease: i64,
) -> Result<Ahead, Error> {
    let (revision, ahead) =
        first_in_line(store, name, proto::SORT_DESCEND, (place - 1).max(1)).await?;
    if let Some(kv) = ahead.filter(|kv| kv.create_revision < place) {
        let watch = store.client.watch(&kv.key, &[], revision + 1).await?;
        return Ok(Ahead::Watching(kv.key, Box::new(watch)));
    }
    let key = store.election_key(name);
    let (revision, kv) = store.client.range(&key, Kind::Read).await?;
    if let Some(kv) = kv.as_ref().filter(|kv| kv.lease == lease) {
        return Ok(Ahead::Passed(Box::new(kv.clone())));
    }
    if kv.is_none() {
        // Free, unless a revocation stands (nobody may claim) ...
        let revocation = store.revocation_key(name);
        let (revision, kv) = store.client.range(&revocation, Kind::Read).await?;
        if kv.is_some() {
            let watch = store.client.watch(&revocation, &[], revision + 1).await?;
            return Ok(Ahead::Watching(revocation, Box::new(watch)));
        }
        // ... or a handover reserves it for another candidate.
        let handover = store.handover_key(name);
        let (revision, kv) = store.client.range(&handover, Kind::Read).await?;
        return match kv {
            Some(kv) if record::decode_handover(&kv.key, &kv.value)?.to != *identity => {
                let watch = store.client.watch(&handover, &[], revision + 1).await?;
                Ok(Ahead::Watching(handover, Box::new(watch)))
            }
            _ => Ok(Ahead::Free),
        };
    }
    let watch = store.client.watch(&key, &[], revision + 1).await?;
    Ok(Ahead::Watching(key, Box::new(watch)))
}
