//! A lease set's *session*: one key in the sessions bucket, renewed for all
//! the keys the process holds. While it lives, the keys that name it are
//! held; once it has aged out (or was deleted), any candidate may take them.

use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{Identity, attempt_nonce};
use tokio::time::Instant;

use crate::error::Error;
use crate::value::SessionRecord;

/// The sessions bucket's key of session `id`.
pub(crate) fn key(id: u64) -> String {
    format!("s-{id:016x}")
}

/// The session id named by a sessions-bucket key, if it is one.
pub(crate) fn id_of(key: &str) -> Option<u64> {
    u64::from_str_radix(key.strip_prefix("s-")?, 16).ok()
}

/// This process's current session.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Session {
    pub(crate) id: u64,
    /// The revision of the session key last written by this process.
    pub(crate) revision: u64,
    /// Until when the session (and every key naming it) is held, counted
    /// from the monotonic instant before the last successful write.
    pub(crate) valid_until: Instant,
}

/// What a renewal found.
#[derive(Debug)]
pub(crate) enum Renewal {
    Renewed(Session),
    /// The session key moved on (aged out, deleted): the session is over.
    Gone,
}

fn value(identity: &Identity, id: u64) -> bytes::Bytes {
    SessionRecord {
        identity: identity.clone(),
        session: id,
        base: None,
    }
    .encode()
}

/// Starts a new session: a fresh id, written with a create.
pub(crate) async fn start(
    store: &kv::Store,
    identity: &Identity,
    validity: Duration,
    timeout: Duration,
) -> Result<Session, Error> {
    let id = attempt_nonce();
    let sent = Instant::now();
    let create = store.create(key(id), value(identity, id));
    match tokio::time::timeout(timeout, create).await {
        Ok(Ok(revision)) => Ok(Session {
            id,
            revision,
            valid_until: sent + validity,
        }),
        Ok(Err(e)) => Err(Error::unavailable("start a lease-set session", e)),
        // A session that may have landed is never used; it ages out.
        Err(_) => Err(Error::OutcomeUnknown { after: timeout }),
    }
}

/// Renews `session`: an update expecting the revision last written.
pub(crate) async fn renew(
    store: &kv::Store,
    identity: &Identity,
    session: Session,
    validity: Duration,
    timeout: Duration,
) -> Result<Renewal, Error> {
    let sent = Instant::now();
    let update = store.update(
        key(session.id),
        value(identity, session.id),
        session.revision,
    );
    match tokio::time::timeout(timeout, update).await {
        Ok(Ok(revision)) => Ok(Renewal::Renewed(Session {
            revision,
            valid_until: sent + validity,
            ..session
        })),
        Ok(Err(e)) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(Renewal::Gone),
        Ok(Err(e)) => Err(Error::unavailable("renew the lease-set session", e)),
        Err(_) => Err(Error::OutcomeUnknown { after: timeout }),
    }
}

/// Ends `session` cleanly: a delete expecting its last revision, so
/// candidates take its keys at once (no failover grace).
pub(crate) async fn end(store: &kv::Store, session: Session, timeout: Duration) {
    let delete = store.delete_expect_revision(key(session.id), Some(session.revision));
    match tokio::time::timeout(timeout, delete).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(session = session.id, error = %e, "ending the session failed; its keys age out after the TTL")
        }
        Err(_) => {
            tracing::warn!(
                session = session.id,
                "ending the session timed out; its keys age out after the TTL"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_keys_round_trip() {
        for id in [0, 1, u64::MAX, 0x1234_5678_9abc_def0] {
            assert_eq!(id_of(&key(id)), Some(id));
        }
        assert_eq!(id_of("k-1"), None);
        assert_eq!(id_of("s-zz"), None);
    }
}
