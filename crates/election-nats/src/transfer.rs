//! Transfer requests (ADR 0112) reaching a holder: the watch of the
//! election's request key (`t.<key>`, [`record::request_key`]) that runs
//! beside a term's renewals and reports each request to the term
//! ([`TermReporter::transfer_requested`]; the core ignores one for
//! another epoch).

use std::sync::Arc;

use async_nats::jetstream::kv;
use election_core::TermReporter;

use crate::store::connection::Connection;
use crate::store::key_watch::{Seen, watch_key};
use crate::store::record;

/// Reports every transfer request stored under `key` to `reporter`, until
/// dropped (the term's watch task drops it with the renewals). A watch of
/// the key delivers new requests at once; one exact read after the watch
/// was made finds a request stored before it. Without a watch (it could
/// not be made, or its consumer went), the key is read once every renew
/// interval and the watch made again.
pub(crate) async fn watch_requests(conn: Arc<Connection>, key: String, reporter: TermReporter) {
    let report = |value: &[u8]| match record::decode_request(&key, value) {
        Ok(request) => {
            if reporter.transfer_requested(request.clone()) {
                tracing::info!(key = %key, %request, "a transfer was requested");
            }
        }
        Err(e) => tracing::warn!(key = %key, error = %e, "an unreadable transfer request"),
    };
    loop {
        let watch = watch_key(&conn, &key, false).await;
        if let Ok(Some(entry)) = conn.read_exact(&key).await
            && entry.operation == kv::Operation::Put
        {
            report(&entry.value);
        }
        match watch {
            Some(mut watch) => loop {
                match watch.next().await {
                    Seen::Entry(kv::Operation::Put, _, value) => report(&value),
                    Seen::Entry(..) | Seen::AgedOut(_) => {}
                    Seen::Ended => break,
                }
            },
            None => tokio::time::sleep(conn.options.renew_every()).await,
        }
    }
}
