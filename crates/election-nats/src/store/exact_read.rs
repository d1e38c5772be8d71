//! Exact reads of a key: through the stream leader, never a replica.
//!
//! `Store::entry` uses JetStream's direct get, which any replica of an R3
//! bucket may answer before it has applied the latest write. Every read
//! that decides something (who holds the key, whether a write of ours
//! landed) uses this instead.

use std::time::Duration;

use async_nats::jetstream::kv;
use async_nats::jetstream::stream::LastRawMessageErrorKind;

use crate::error::Error;
use crate::store::record::{ClaimRecord, SessionRecord};

/// The latest entry of a key, as the stream leader has it.
#[derive(Clone, Debug)]
pub(crate) struct ExactEntry {
    pub(crate) revision: u64,
    pub(crate) operation: kv::Operation,
    pub(crate) value: bytes::Bytes,
}

impl ExactEntry {
    /// Whether this is a live lease written by the attempt `nonce`.
    pub(crate) fn is_attempts(&self, key: &str, nonce: u64) -> bool {
        self.operation == kv::Operation::Put
            && ClaimRecord::decode(key, &self.value).is_ok_and(|v| v.nonce == nonce)
    }

    /// Whether this is a live lease-set record (a session key's value, or
    /// a lease-set key's) naming the session `id`.
    pub(crate) fn is_sessions(&self, key: &str, id: u64) -> bool {
        self.operation == kv::Operation::Put
            && SessionRecord::decode(key, &self.value).is_ok_and(|r| r.session == id)
    }
}

/// Reads the latest entry of `key`, bounded by `timeout`; `None` if the
/// key has no entry at all.
pub(crate) async fn read_exact(
    store: &kv::Store,
    key: &str,
    timeout: Duration,
) -> Result<Option<ExactEntry>, Error> {
    let subject = format!("{}{}", store.prefix, key);
    let read = store.stream.get_last_raw_message_by_subject(&subject);
    let message = match tokio::time::timeout(timeout, read).await {
        Err(_) => {
            return Err(Error::Unavailable {
                what: "read the lease from the stream leader",
                source: None,
            });
        }
        Ok(Err(e)) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
        Ok(Err(e)) => {
            return Err(Error::unavailable(
                "read the lease from the stream leader",
                e,
            ));
        }
        Ok(Ok(m)) => m,
    };
    Ok(Some(ExactEntry {
        revision: message.sequence,
        operation: operation(Some(&message.headers)),
        value: message.payload,
    }))
}

/// Whether a stored message's headers make it the server's marker of an
/// entry that aged out (`Nats-Marker-Reason: MaxAge`, no `KV-Operation`):
/// not a client's purge, which rolls up the entries before it.
pub(crate) fn aged_out(headers: Option<&async_nats::HeaderMap>) -> bool {
    headers.is_some_and(|h| {
        h.get("KV-Operation").is_none()
            && h.get("Nats-Marker-Reason").map(|v| v.as_str()) == Some("MaxAge")
    })
}

/// The KV operation a stored message's headers say it is: a delete or
/// purge marker (written by a client, or by the server when a key ages out
/// or is removed), else a put.
pub(crate) fn operation(headers: Option<&async_nats::HeaderMap>) -> kv::Operation {
    let header = |name: &str| {
        headers
            .and_then(|h| h.get(name))
            .map(|v| v.as_str().to_owned())
    };
    match (
        header("KV-Operation").as_deref(),
        header("Nats-Marker-Reason").as_deref(),
    ) {
        (Some("DEL"), _) | (None, Some("Remove")) => kv::Operation::Delete,
        (Some("PURGE"), _) | (None, Some("MaxAge" | "Purge")) => kv::Operation::Purge,
        _ => kv::Operation::Put,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> async_nats::HeaderMap {
        let mut h = async_nats::HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, *value);
        }
        h
    }

    /// A client's purge and the server's age-out marker are both purges to
    /// a reader; only the server's marker is one that rolled nothing up.
    #[test]
    fn only_the_servers_marker_is_an_age_out() {
        let client = headers(&[("KV-Operation", "PURGE"), ("Nats-Rollup", "sub")]);
        let server = headers(&[("Nats-Marker-Reason", "MaxAge"), ("Nats-TTL", "1s")]);
        let removed = headers(&[("Nats-Marker-Reason", "Remove")]);
        assert_eq!(operation(Some(&client)), kv::Operation::Purge);
        assert_eq!(operation(Some(&server)), kv::Operation::Purge);
        assert!(!aged_out(Some(&client)));
        assert!(aged_out(Some(&server)));
        assert!(!aged_out(Some(&removed)));
        assert!(!aged_out(None));
    }
}
