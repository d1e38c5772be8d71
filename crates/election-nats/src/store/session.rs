//! A lease set's *session*: one key in the sessions bucket, renewed for all
//! the keys the process holds. While it lives, the keys that name it are
//! held; once it has aged out (or was deleted), any candidate may take them.

use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{Identity, attempt_nonce};
use tokio::time::Instant;

use crate::error::Error;
use crate::store::record::SessionRecord;
use crate::store::settled::settled;

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
    Lost,
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

/// How many times one renewal reads the session key after a "wrong last
/// revision" and tries again with the revision it found (each read and
/// update within the renewal's budget).
const ADOPTIONS: usize = 3;

/// Renews `session`: an update expecting the revision last written, the
/// whole renewal bounded by `deadline` (the budget of the core's attempt).
///
/// A "wrong last revision" is not taken as "session gone" without a look:
/// an earlier renewal of ours that timed out on the client may have landed
/// since (a server pause), so the session key is read through the stream
/// leader. If it still holds this process's session record (identity and
/// session id, a 64-bit nonce only this process writes), its revision is
/// adopted and the update sent again, the validity counted from before that
/// update; only a key that is gone (deleted, aged out) or carries another
/// record ends the session. A read that fails leaves the outcome unknown
/// (an error, retried by the core until the deadline), never "gone".
pub(crate) async fn renew(
    store: &kv::Store,
    identity: &Identity,
    mut session: Session,
    validity: Duration,
    deadline: Instant,
) -> Result<Renewal, Error> {
    let left = || deadline.saturating_duration_since(Instant::now());
    for _ in 0..=ADOPTIONS {
        let sent = Instant::now();
        let record = value(identity, session.id);
        let update = settled(|| store.update(key(session.id), record.clone(), session.revision));
        match tokio::time::timeout(left(), update).await {
            Ok(Ok(revision)) => {
                return Ok(Renewal::Renewed(Session {
                    revision,
                    valid_until: sent + validity,
                    ..session
                }));
            }
            Ok(Err(e)) if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                match read_own(store, identity, session.id, left()).await? {
                    Some(revision) => {
                        tracing::info!(
                            session = session.id,
                            stale = session.revision,
                            revision,
                            "the session key moved on under our own record (a renewal that timed out landed later): adopting its revision"
                        );
                        session.revision = revision;
                    }
                    None => return Ok(Renewal::Lost),
                }
            }
            Ok(Err(e)) => return Err(Error::unavailable("renew the lease-set session", e)),
            Err(_) => {
                return Err(Error::OutcomeUnknown {
                    after: sent.elapsed(),
                });
            }
        }
    }
    Err(Error::Unavailable {
        what: "renew the lease-set session (its revision kept moving under our own record)",
        source: None,
    })
}

/// Reads session `id`'s key through the stream leader within `timeout`:
/// its revision if it still holds this process's record, `None` if it is
/// gone or carries another record; an error if it could not be read.
pub(crate) async fn read_own(
    store: &kv::Store,
    identity: &Identity,
    id: u64,
    timeout: Duration,
) -> Result<Option<u64>, Error> {
    if timeout.is_zero() {
        return Err(Error::OutcomeUnknown {
            after: Duration::ZERO,
        });
    }
    let key = key(id);
    let latest = crate::store::exact_read::read_exact(store, &key, timeout).await?;
    Ok(latest.and_then(|l| {
        let ours = l.is_sessions(&key, id)
            && SessionRecord::decode(&key, &l.value).is_ok_and(|r| r.identity == *identity);
        ours.then_some(l.revision)
    }))
}

/// Deletes session `id`'s key (no revision expected: only this process
/// writes it, and a late renewal of ours landing after the delete finds a
/// wrong last revision) so that a session given up here is never left live
/// beside the next one; bounded by `timeout`. A failure is logged: the key
/// then ages out after the TTL.
pub(crate) async fn retire(store: &kv::Store, id: u64, timeout: Duration) {
    match tokio::time::timeout(timeout, store.delete(key(id))).await {
        Ok(Ok(())) => tracing::info!(
            session = id,
            "a lease-set session given up here was deleted"
        ),
        Ok(Err(e)) => {
            tracing::warn!(session = id, error = %e, "deleting a session given up here failed; it ages out after the TTL")
        }
        Err(_) => tracing::warn!(
            session = id,
            "deleting a session given up here timed out; it ages out after the TTL"
        ),
    }
}

/// Ends `session` cleanly: a delete, so candidates take its keys at once
/// (no failover grace). It expects no revision: only this process writes
/// its session key, and the revision known here may be stale (a renewal
/// that timed out on the client and landed later), which must not leave
/// the session live after close; a late renewal landing after the delete
/// finds a wrong last revision.
pub(crate) async fn end(store: &kv::Store, session: Session, timeout: Duration) {
    match tokio::time::timeout(timeout, store.delete(key(session.id))).await {
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
