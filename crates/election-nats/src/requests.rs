//! Transfer requests (ADR 0112) reaching the terms of one election handle
//! ([`Requests`]): one watch of every request key of the bucket (`t.*`)
//! per [`NatsElection`](crate::NatsElection), and so per connection,
//! handing each request to the terms that hold its election, however many
//! they are (issue 42: a watch per held term was a consumer per name on
//! the server).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::TermReporter;

use crate::store::connection::Connection;
use crate::store::key_watch::{Seen, watch_keys};
use crate::store::record;

/// The subject filter matching every request key ([`record::request_key`]:
/// an election key never contains a `.`).
const FILTER: &str = "t.*";

/// How many idle heartbeats a watch may miss before it counts as ended.
const MISSED_HEARTBEATS: u32 = 3;

/// The terms of one election handle that follow transfer requests, and
/// the one watch that serves them (started with the first term, ended when
/// the handle and its claims are gone).
#[derive(Debug, Default)]
pub(crate) struct Requests {
    shared: Arc<Shared>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Request key → the terms following it (an id each).
    terms: Mutex<HashMap<String, Vec<(u64, TermReporter)>>>,
    next_id: AtomicU64,
    /// How many times the watch was made (0: not yet).
    made: tokio::sync::watch::Sender<u64>,
}

/// A term's place among the followers of its request key: dropping it
/// stops the term's requests.
pub(crate) struct Following {
    shared: Arc<Shared>,
    key: String,
    id: u64,
}

impl Drop for Following {
    fn drop(&mut self) {
        let mut terms = self.shared.terms.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = terms.get_mut(&self.key) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                terms.remove(&self.key);
            }
        }
    }
}

impl Drop for Requests {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}

impl Shared {
    /// Hands the request `value` stored under `key` to every term
    /// following it (the core ignores one for another epoch).
    fn report(&self, key: &str, value: &[u8]) {
        let reporters: Vec<TermReporter> = {
            let terms = self.terms.lock().unwrap_or_else(|p| p.into_inner());
            match terms.get(key) {
                Some(list) => list.iter().map(|(_, r)| r.clone()).collect(),
                None => return,
            }
        };
        match record::decode_request(key, value) {
            Ok(request) => {
                for reporter in reporters {
                    if reporter.transfer_requested(request.clone()) {
                        tracing::info!(key = %key, %request, "a transfer was requested");
                    }
                }
            }
            Err(e) => tracing::warn!(key = %key, error = %e, "an unreadable transfer request"),
        }
    }

    /// One exact read of each followed key, reporting the requests found:
    /// what a watch made again (or none at all) may have missed.
    async fn read_all(&self, conn: &Connection) {
        let keys: Vec<String> = {
            let terms = self.terms.lock().unwrap_or_else(|p| p.into_inner());
            terms.keys().cloned().collect()
        };
        for key in keys {
            if let Ok(Some(entry)) = conn.read_exact(&key).await
                && entry.operation == kv::Operation::Put
            {
                self.report(&key, &entry.value);
            }
        }
    }
}

impl Requests {
    /// Follows the transfer requests stored under `key` (a request key)
    /// for the term `reporter` watches, until the returned guard is
    /// dropped: a request stored before this call is found by one exact
    /// read once the connection's watch exists, every later one is handed
    /// over as the watch delivers it. Without a watch (it cannot be made,
    /// or its consumer went), the followed keys are read once every renew
    /// interval and the watch made again.
    ///
    /// Cancel safety: cancel safe (a term dropped before it follows has
    /// no place left behind).
    pub(crate) async fn follow(
        &self,
        conn: &Arc<Connection>,
        key: String,
        reporter: TermReporter,
    ) -> Following {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared
            .terms
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default()
            .push((id, reporter));
        let following = Following {
            shared: self.shared.clone(),
            key: key.clone(),
            id,
        };
        self.start(conn);
        let mut made = self.shared.made.subscribe();
        // Registered first, then the watch known to exist, then the read:
        // a request is either before the read or delivered after it.
        if made.wait_for(|n| *n > 0).await.is_ok()
            && let Ok(Some(entry)) = conn.read_exact(&key).await
            && entry.operation == kv::Operation::Put
        {
            self.shared.report(&key, &entry.value);
        }
        following
    }

    /// Starts the connection's watch task if it is not running.
    fn start(&self, conn: &Arc<Connection>) {
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.is_some() {
            return;
        }
        let weak = Arc::downgrade(conn);
        let shared = self.shared.clone();
        *task = Some(tokio::spawn(run(weak, shared)).abort_handle());
    }
}

/// The watch task: makes the watch of every request key, hands over what
/// it delivers, and makes it again when it ends or falls silent.
async fn run(conn: Weak<Connection>, shared: Arc<Shared>) {
    let mut made = 0u64;
    loop {
        let Some(c) = conn.upgrade() else {
            return;
        };
        let heartbeat = c.options.renew_every().max(Duration::from_millis(100));
        let Some(mut watch) = watch_keys(&c, FILTER, heartbeat).await else {
            shared.read_all(&c).await;
            drop(c);
            tokio::time::sleep(heartbeat).await;
            continue;
        };
        made += 1;
        if made > 1 {
            // Requests stored while no watch ran.
            shared.read_all(&c).await;
        }
        shared.made.send_replace(made);
        drop(c);
        loop {
            match watch.next_keyed(Some(heartbeat * MISSED_HEARTBEATS)).await {
                (Some(key), Seen::Entry(kv::Operation::Put, _, value)) => {
                    shared.report(&key, &value);
                }
                (_, Seen::Ended) => break,
                _ => {}
            }
        }
    }
}
