//! The waiters' queue of an election (issue 42, ADR 0106): a waiter key
//! per waiting attempt, `w.<key>.<nonce>` in the elections bucket, ordered
//! by the revision that created it. Each waiter watches only the waiter
//! key just ahead of its own; the first (the *head*) watches the election
//! key and claims it. A release so wakes one waiter, not all.
//!
//! The queue is advice only. Winning stays the compare-and-set on the
//! election key (`claim.rs`), with the failover grace after an expiry or a
//! vacancy of unknown origin; a waiter key's delete or expiry only moves
//! its successor up and is never taken for the holder's vacancy. Nothing
//! else lists the elections bucket: an election key never contains a `.`
//! ([`record::key_of`](crate::store::record::key_of)), so `w.*` keys
//! never collide with one.
//!
//! A waiter renews its key every renew interval (an update expecting its
//! last revision); a waiter that dies stops renewing and its key ages out
//! after the bucket's max age (the lease TTL), and on servers with TTL
//! markers (2.11+) its successor's watch sees the marker and moves up. A
//! waiter whose key aged out while it lived (a long pause) creates it
//! again, at the back of the queue. A close or a win deletes the key.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_nats::jetstream::kv;
use futures::StreamExt;

use crate::error::{Error, is_kind};
use crate::store::connection::Connection;
use crate::store::exact_read;
use crate::store::settled::settled;

/// The waiter key of attempt `nonce` in the election of key `key`.
pub(crate) fn waiter_key(key: &str, nonce: u64) -> String {
    format!("w.{key}.{nonce}")
}

/// A waiter key's value: its attempt's nonce, and once known the revision
/// that created the key (every renewal changes the key's revision, never
/// its place in the queue).
fn value(nonce: u64, created: Option<u64>) -> bytes::Bytes {
    match created {
        Some(c) => format!("election-nats/1\nwaiter={nonce}\ncreated={c}\n").into(),
        None => format!("election-nats/1\nwaiter={nonce}\n").into(),
    }
}

/// The place in the queue of a waiter key whose entry at `revision` holds
/// `value`: the `created` it carries, else `revision` (the creating
/// write carries none). `None` for a value that is not a waiter's.
fn place(value: &[u8], revision: u64) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    let mut lines = text.lines();
    if lines.next() != Some("election-nats/1") {
        return None;
    }
    let mut waiter = false;
    let mut created = None;
    for line in lines {
        match line.split_once('=') {
            Some(("waiter", _)) => waiter = true,
            Some(("created", c)) => created = c.parse().ok(),
            _ => {}
        }
    }
    waiter.then_some(created.unwrap_or(revision))
}

/// A waiting attempt's key in the queue, renewed by a task of its own
/// while this lives (dropping it stops the renewals; the key then ages
/// out unless [`remove`](Waiter::remove) deleted it).
#[derive(Debug)]
pub(crate) struct Waiter {
    /// The waiter key.
    pub(crate) key: String,
    /// The revision that created the key: its place in the queue. A
    /// renewal that finds the key gone creates it again and stores the
    /// new place here.
    created: Arc<AtomicU64>,
    renewal: tokio::task::JoinHandle<()>,
    conn: Arc<Connection>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

impl Waiter {
    /// Creates the waiter key of attempt `nonce` in the election `key`
    /// (bounded by the request timeout) and starts its renewals.
    pub(crate) async fn enqueue(
        conn: Arc<Connection>,
        key: &str,
        nonce: u64,
    ) -> Result<Waiter, Error> {
        let wkey = waiter_key(key, nonce);
        let created = create(&conn, &wkey, nonce).await?;
        let place = Arc::new(AtomicU64::new(created));
        let renewal = tokio::spawn(renew(conn.clone(), wkey.clone(), nonce, place.clone()));
        Ok(Waiter {
            key: wkey,
            created: place,
            renewal,
            conn,
        })
    }

    /// The place in the queue (the revision that created the key).
    pub(crate) fn place(&self) -> u64 {
        self.created.load(Ordering::SeqCst)
    }

    /// Stops the renewals and deletes the key in the background: its
    /// successor moves up at once.
    pub(crate) fn remove(self) {
        self.renewal.abort();
        let (conn, key) = (self.conn.clone(), self.key.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let delete = conn.kv.delete(&key);
                let _ = tokio::time::timeout(conn.timeout(), delete).await;
            });
        }
    }
}

/// Creates the waiter key `wkey`; its revision.
async fn create(conn: &Connection, wkey: &str, nonce: u64) -> Result<u64, Error> {
    let put = conn.kv.create(wkey, value(nonce, None));
    match tokio::time::timeout(conn.timeout(), put).await {
        Ok(Ok(revision)) => Ok(revision),
        // A delete marker of an earlier life of the key: write over it.
        Ok(Err(e)) if is_kind(&e, kv::CreateErrorKind::AlreadyExists) => {
            let put = conn.kv.put(wkey, value(nonce, None));
            match tokio::time::timeout(conn.timeout(), put).await {
                Ok(Ok(revision)) => Ok(revision),
                Ok(Err(e)) => Err(Error::unavailable("write a waiter key", e)),
                Err(_) => Err(Error::OutcomeUnknown {
                    after: conn.timeout(),
                }),
            }
        }
        Ok(Err(e)) => Err(Error::unavailable("write a waiter key", e)),
        Err(_) => Err(Error::OutcomeUnknown {
            after: conn.timeout(),
        }),
    }
}

/// Renews the waiter key every renew interval, expecting its last
/// revision; a key found gone (aged out during a pause) is created again
/// at the back of the queue.
async fn renew(conn: Arc<Connection>, wkey: String, nonce: u64, place: Arc<AtomicU64>) {
    let mut revision = place.load(Ordering::SeqCst);
    loop {
        tokio::time::sleep(conn.options.renew_every()).await;
        let created = place.load(Ordering::SeqCst);
        let record = value(nonce, Some(created));
        let update = settled(|| conn.kv.update(&wkey, record.clone(), revision));
        match tokio::time::timeout(conn.timeout(), update).await {
            Ok(Ok(r)) => revision = r,
            Ok(Err(e)) if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                if let Ok(r) = create(&conn, &wkey, nonce).await {
                    tracing::debug!(key = %wkey, "a waiter key aged out; created again at the back of the queue");
                    revision = r;
                    place.store(r, Ordering::SeqCst);
                }
            }
            // Unavailable or no answer: the next renewal tries again (an
            // update that landed unanswered is found by the next refusal).
            Ok(Err(_)) | Err(_) => {}
        }
    }
}

/// The live waiter keys of the election `key`, each with its place in the
/// queue: one push consumer delivering the last entry of each `w.<key>.*`
/// subject (delete and purge markers skipped) to an inbox subscribed to
/// before it was made, bounded by the request timeout.
pub(crate) async fn list(conn: &Connection, key: &str) -> Result<Vec<(String, u64)>, Error> {
    use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, ReplayPolicy, push};
    let kv = &conn.kv;
    let failed = |e: &dyn std::fmt::Display| Error::Unavailable {
        what: "list the waiters",
        source: Some(e.to_string().into()),
    };
    let listing = async {
        let inbox = conn.client.new_inbox();
        let mut sub = conn
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| failed(&e))?;
        let consumer = kv
            .stream
            .create_consumer(push::Config {
                deliver_subject: inbox,
                description: Some("election-nats waiters".into()),
                filter_subject: format!("{}w.{key}.*", kv.prefix),
                deliver_policy: DeliverPolicy::LastPerSubject,
                ack_policy: AckPolicy::None,
                replay_policy: ReplayPolicy::Instant,
                memory_storage: true,
                num_replicas: 1,
                inactive_threshold: std::time::Duration::from_secs(5),
                ..Default::default()
            })
            .await
            .map_err(|e| failed(&e))?;
        let mut out = Vec::new();
        if consumer.cached_info().num_pending == 0 {
            return Ok(out);
        }
        while let Some(message) = sub.next().await {
            if message.status.is_some() {
                continue;
            }
            let operation = exact_read::operation(message.headers.as_ref());
            let message = async_nats::jetstream::Message {
                message,
                context: conn.js.clone(),
            };
            let info = message.info().map_err(|e| failed(&e))?;
            let (pending, revision) = (info.pending, info.stream_sequence);
            if operation == kv::Operation::Put
                && let Some(wkey) = message.message.subject.strip_prefix(kv.prefix.as_str())
                && let Some(p) = place(&message.message.payload, revision)
            {
                out.push((wkey.to_owned(), p));
            }
            if pending == 0 {
                break;
            }
        }
        Ok(out)
    };
    tokio::time::timeout(conn.timeout(), listing)
        .await
        .map_err(|_| Error::Unavailable {
            what: "list the waiters (no answer in time)",
            source: None,
        })?
}

/// The waiter just ahead of place `mine` in `waiters` (the largest place
/// below it), or `None`: the head.
pub(crate) fn predecessor(waiters: &[(String, u64)], mine: u64) -> Option<&str> {
    waiters
        .iter()
        .filter(|(_, p)| *p < mine)
        .max_by_key(|(_, p)| *p)
        .map(|(k, _)| k.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_come_from_the_value_or_the_creating_revision() {
        assert_eq!(place(&value(7, None), 12), Some(12));
        assert_eq!(place(&value(7, Some(12)), 40), Some(12));
        assert_eq!(place(b"election-nats/1\nidentity=a\nnonce=1\n", 3), None);
        assert_eq!(place(b"", 3), None);
        assert_eq!(waiter_key("jobs", 9), "w.jobs.9");
    }

    #[test]
    fn the_predecessor_is_the_nearest_place_ahead() {
        let w = vec![
            ("a".to_owned(), 5),
            ("b".to_owned(), 9),
            ("c".to_owned(), 14),
        ];
        assert_eq!(predecessor(&w, 14), Some("b"));
        assert_eq!(predecessor(&w, 9), Some("a"));
        assert_eq!(predecessor(&w, 5), None);
        assert_eq!(predecessor(&[], 5), None);
    }
}
