//! A watch of one key of the elections bucket ([`KeyWatch`],
//! [`watch_key`]): what a waiting claim follows its election key with,
//! and a holder its transfer requests (ADR 0112).

use std::time::Duration;

use async_nats::jetstream::kv;
use futures::StreamExt;

use crate::store::bucket;
use crate::store::connection::Connection;
use crate::store::exact_read;

/// A watch of one key: a push consumer of the key's new entries (no acks),
/// delivered to an inbox subscribed to before the consumer was created.
/// Never recreated: if the consumer goes (its stream deleted, a server
/// lost), nothing more arrives and the claim falls back to its poll.
pub(crate) struct KeyWatch {
    sub: async_nats::Subscriber,
    /// The consumer's name: every message delivered names it.
    consumer: String,
    /// The creation time (µs) of the bucket incarnation the consumer is
    /// known to belong to: the incarnation read before it was created and
    /// again after (one incarnation lived throughout, so the consumer, made
    /// in between, is of it). `None`: not known.
    pub(crate) incarnation: Option<u64>,
    /// The incarnation last known before the consumer was created: every
    /// entry it delivers is of this one or a later one.
    pub(crate) known_before: u64,
    js: async_nats::jetstream::Context,
    /// The bucket's subject prefix: a delivered subject less it is the key.
    prefix: String,
}

/// What a watch delivered.
pub(crate) enum Seen {
    /// An entry of the key at this revision (the stream sequence), with
    /// its payload.
    /// A client's purge is `Entry(Purge, ..)`; the server's marker is not.
    Entry(kv::Operation, u64, bytes::Bytes),
    /// The server's marker at this revision: the key's last entry aged out
    /// (the bucket's max age, or the entry's own per-key TTL). Unlike a
    /// client's purge, it rolls nothing up: the watch delivered every
    /// entry before it.
    AgedOut(u64),
    /// Nothing more will come (the subscription ended, or a message not
    /// of this watch's consumer arrived).
    Ended,
}

impl KeyWatch {
    /// The next entry the consumer delivers.
    ///
    /// Cancel safety: cancel safe (a message is taken from the
    /// subscription only when it is returned).
    pub(crate) async fn next(&mut self) -> Seen {
        self.next_keyed(None).await.1
    }

    /// The next entry the consumer delivers, with its key (`None` when
    /// [`Seen::Ended`]). With `silence`, a watch made with idle heartbeats
    /// ([`watch_keys`]) that delivers nothing, not even a heartbeat, for
    /// that long has ended: its consumer went (a recreated bucket deletes
    /// its consumers without a word).
    ///
    /// Cancel safety: cancel safe, as [`next`](Self::next).
    pub(crate) async fn next_keyed(&mut self, silence: Option<Duration>) -> (Option<String>, Seen) {
        loop {
            let message = match silence {
                Some(silence) => match tokio::time::timeout(silence, self.sub.next()).await {
                    Ok(message) => message,
                    Err(_) => return (None, Seen::Ended),
                },
                None => self.sub.next().await,
            };
            let Some(message) = message else {
                return (None, Seen::Ended);
            };
            if message.status.is_some() {
                // A status (e.g. a heartbeat): not an entry.
                continue;
            }
            let key = message
                .subject
                .strip_prefix(self.prefix.as_str())
                .map(str::to_owned);
            let operation = exact_read::operation(message.headers.as_ref());
            let aged_out = exact_read::aged_out(message.headers.as_ref());
            let message = async_nats::jetstream::Message {
                message,
                context: self.js.clone(),
            };
            return match message.info() {
                Ok(info) if info.consumer == self.consumer && aged_out => {
                    (key, Seen::AgedOut(info.stream_sequence))
                }
                Ok(info) if info.consumer == self.consumer => (
                    key,
                    Seen::Entry(
                        operation,
                        info.stream_sequence,
                        message.message.payload.clone(),
                    ),
                ),
                _ => (None, Seen::Ended),
            };
        }
    }

    /// Whether the consumer delivers the write `value` at `revision`:
    /// `true` once it does, `false` if it delivers anything else at or
    /// after `revision` first, or ends.
    pub(crate) async fn delivers(&mut self, revision: u64, value: &[u8]) -> bool {
        loop {
            match self.next().await {
                Seen::Entry(kv::Operation::Put, r, v) if r == revision => return v == value,
                Seen::Entry(_, r, _) | Seen::AgedOut(r) if r < revision => continue,
                Seen::Entry(..) | Seen::AgedOut(_) | Seen::Ended => return false,
            }
        }
    }
}

/// A [`KeyWatch`] of `key` in the elections bucket of `conn`; with
/// `prove`, it reads the bucket's incarnation after the consumer is made
/// (see `NatsClaim::key_watch`). `None` if the watch cannot be made.
pub(crate) async fn watch_key(conn: &Connection, key: &str, prove: bool) -> Option<KeyWatch> {
    watch(conn, key, prove, None).await
}

/// A [`KeyWatch`] of every key matching `filter` (a subject filter over
/// the keys, such as `t.*`), its consumer sending an idle heartbeat every
/// `heartbeat`: read it with [`KeyWatch::next_keyed`] and a silence of a
/// few heartbeats. `None` if the watch cannot be made.
pub(crate) async fn watch_keys(
    conn: &Connection,
    filter: &str,
    heartbeat: Duration,
) -> Option<KeyWatch> {
    watch(conn, filter, false, Some(heartbeat)).await
}

async fn watch(
    conn: &Connection,
    key: &str,
    prove: bool,
    heartbeat: Option<Duration>,
) -> Option<KeyWatch> {
    use async_nats::jetstream::consumer::{self, push};
    let before = conn.base();
    let client = &conn.client;
    let inbox = client.new_inbox();
    let sub = client.subscribe(inbox.clone()).await.ok()?;
    let kv = &conn.kv;
    let create = kv.stream.create_consumer(push::Config {
        deliver_subject: inbox,
        description: Some("election-nats key watch".into()),
        filter_subject: format!("{}{key}", kv.prefix),
        deliver_policy: consumer::DeliverPolicy::New,
        ack_policy: consumer::AckPolicy::None,
        replay_policy: consumer::ReplayPolicy::Instant,
        memory_storage: true,
        num_replicas: 1,
        idle_heartbeat: heartbeat.unwrap_or_default(),
        ..Default::default()
    });
    let consumer = tokio::time::timeout(conn.timeout(), create)
        .await
        .ok()?
        .ok()?;
    let name = consumer.cached_info().name.clone();
    let after = if prove {
        bucket::shape(kv, conn.timeout()).await.ok()
    } else {
        None
    };
    Some(KeyWatch {
        sub,
        consumer: name,
        incarnation: after.filter(|s| s.created_us == before).map(|_| before),
        known_before: before,
        js: conn.js.clone(),
        prefix: kv.prefix.clone(),
    })
}
