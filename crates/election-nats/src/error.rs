//! Errors of the NATS backend.

use std::sync::Arc;
use std::time::Duration;

use election_core::{Class, Classify, ConfigError, Disposition, ElectionName};

/// What can go wrong with the NATS backend, grouped by what the caller
/// should do: fix the configuration (`Config`, `BucketMismatch`), retry
/// when the coordinator is back (`Connect`, `Unavailable`), treat the claim
/// as not held (`OutcomeUnknown`), or repair the bucket (`CorruptValue`).
///
/// Inside a campaign these reach the caller as the `source` of an
/// [`election_core::Error`]: `Config`, `Unavailable`, `OutcomeUnknown` or
/// `Corrupt`. "Another node holds it" is never an error here: it is
/// `Ok(None)` from `try_campaign`, or [`election_core::Error::NotHeld`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No NATS server could be reached at the given address.
    Connect {
        /// The address given.
        url: String,
        /// What the client said.
        source: async_nats::ConnectError,
    },
    /// The coordinator did not answer (no JetStream, no responders, a
    /// request that failed); nothing was won or changed. Writes must be
    /// refused rather than made uncoordinated.
    Unavailable {
        /// What was being done.
        what: &'static str,
        /// What failed.
        source: Option<async_nats::Error>,
    },
    /// A write did not answer within its bound; it may still land. The
    /// claim counts as not held.
    OutcomeUnknown {
        /// The bound that ran out.
        after: Duration,
    },
    /// The bucket exists with settings this election cannot use (its max
    /// age is the lease TTL).
    BucketMismatch {
        /// The bucket.
        bucket: String,
        /// What the bucket has.
        found: String,
        /// What the options ask for.
        wanted: String,
    },
    /// An observer found no bucket: nothing was ever elected there (an
    /// observer does not create it; candidates do).
    NoBucket {
        /// The bucket.
        bucket: String,
    },
    /// A value in the bucket is not one this crate wrote.
    CorruptValue {
        /// The key.
        key: String,
        /// What is wrong.
        detail: String,
    },
    /// A bad name, identity or setting.
    Config(ConfigError),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Connect { url, source } => {
                write!(f, "cannot connect to NATS at {url}: {source}")
            }
            Error::Unavailable { what, source } => {
                write!(f, "the NATS coordinator is unavailable: {what}")?;
                match source {
                    Some(source) => write!(f, ": {source}"),
                    None => Ok(()),
                }
            }
            Error::OutcomeUnknown { after } => write!(
                f,
                "a NATS request timed out after {after:?}; its outcome is unknown"
            ),
            Error::BucketMismatch {
                bucket,
                found,
                wanted,
            } => write!(
                f,
                "bucket {bucket} exists with {found}, but this election needs {wanted}"
            ),
            Error::NoBucket { bucket } => write!(
                f,
                "bucket {bucket} does not exist (yet): no election has run in it"
            ),
            Error::CorruptValue { key, detail } => {
                write!(f, "unreadable lease value for {key}: {detail}")
            }
            Error::Config(e) => e.fmt(f),
        }
    }
}

/// The client's error is named in the message (`Connect`, `Unavailable`):
/// `source()` goes on below it, so a chain printer shows each message
/// once (ADR 0063). The client's error stays in the field.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect { source, .. } => source.source(),
            Error::Unavailable {
                source: Some(source),
                ..
            } => source.source(),
            Error::Config(e) => e.source(),
            _ => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl Error {
    pub(crate) fn unavailable(what: &'static str, source: impl Into<async_nats::Error>) -> Self {
        Error::Unavailable {
            what,
            source: Some(source.into()),
        }
    }

    /// This error as the core's error, grouped by what the caller should do.
    ///
    /// ```no_run
    /// use election_core::ElectionName;
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// let name = ElectionName::new("dispatcher")?;
    /// match election.leader(name.as_str()).await {
    ///     Ok(leader) => println!("leader: {leader:?}"),
    ///     Err(e) => {
    ///         // Grouped by what to do: retry what is transient, stop on the rest.
    ///         let e = e.into_core(&name);
    ///         if e.is_permanent() {
    ///             return Err(e.into());
    ///         }
    ///         eprintln!("will retry: {e}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_core(self, name: &ElectionName) -> election_core::Error {
        match self {
            Error::Config(c) => election_core::Error::Config(c),
            e @ Error::BucketMismatch { .. } => {
                election_core::Error::Config(ConfigError::Location {
                    reason: e.to_string(),
                    source: Some(Arc::new(e)),
                })
            }
            e @ Error::CorruptValue { .. } => election_core::Error::corrupt(name, e),
            e @ Error::OutcomeUnknown { .. } => election_core::Error::outcome_unknown(name, e),
            e => election_core::Error::unavailable(name, e),
        }
    }
}

/// A JetStream error code in `e`'s source chain.
fn jetstream_code(e: &(dyn std::error::Error + 'static)) -> Option<u64> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(js) = e.downcast_ref::<async_nats::jetstream::Error>() {
            return Some(js.error_code().0);
        }
        // Creating a bucket keeps the server's error in the kind.
        if let Some(c) = e.downcast_ref::<async_nats::jetstream::context::CreateStreamError>()
            && let async_nats::jetstream::context::CreateStreamErrorKind::JetStream(js) = c.kind()
        {
            return Some(js.error_code().0);
        }
        // So does opening one (a bucket that does not exist: 10059).
        if let Some(g) = e.downcast_ref::<async_nats::jetstream::context::GetStreamError>()
            && let async_nats::jetstream::context::GetStreamErrorKind::JetStream(js) = g.kind()
        {
            return Some(js.error_code().0);
        }
        next = e.source();
    }
    None
}

/// Whether a JetStream request in `e`'s chain found no responder: the
/// server (or the account) runs without JetStream, a setting, not an
/// outage (a clustered JetStream that is electing its leader answers
/// "temporarily unavailable" instead).
fn no_jetstream(e: &Error) -> bool {
    use async_nats::jetstream::context::{RequestError, RequestErrorKind};
    let Error::Unavailable {
        source: Some(source),
        ..
    } = e
    else {
        return false;
    };
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&**source);
    while let Some(e) = next {
        if e.downcast_ref::<RequestError>()
            .is_some_and(|r| r.kind() == RequestErrorKind::NoResponders)
            || e.downcast_ref::<async_nats::RequestError>()
                .is_some_and(|r| r.kind() == async_nats::RequestErrorKind::NoResponders)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// The hint for a bucket whose settings do not fit this election's.
fn bucket_mismatch_hint(bucket: &str, found: &str, wanted: &str) -> String {
    match (
        found.strip_prefix("max age "),
        wanted.strip_prefix("max age "),
    ) {
        // The same election runs there with another TTL.
        (Some(age), Some(ttl)) if age.contains(", where ") => {
            let age = age.split(',').next().unwrap_or(age);
            format!(
                "this election runs in bucket {bucket} with --ttl {age}, and every candidate of \
                 an election must use the same TTL: give --ttl {age} (this one asked for {ttl}); \
                 to change its TTL, stop every candidate first"
            )
        }
        // A bucket's max age is the TTL of every election in it.
        (Some(age), Some(ttl)) => format!(
            "the elections in bucket {bucket} use a TTL of {age} (its max age), this one {ttl}: \
             give --ttl {age} to join that bucket's elections, or leave ?bucket= out of the URL \
             (elect then picks a bucket of this TTL's own, elections-ttl-{ttl}, when the default \
             one has another), or name a new bucket with ?bucket=NEW-NAME; never delete or edit \
             a bucket in use"
        ),
        _ => format!(
            "bucket {bucket} was made with {found}; this election needs {wanted}: name another \
             bucket with ?bucket=NEW-NAME (never delete or edit a bucket in use)"
        ),
    }
}

/// The hint of [`Error::Connect`] for credentials the server refused (a
/// tool that connects itself gives the same), in the terms of `elect`.
pub const CREDENTIALS_HINT: &str = "give the credentials the server expects: \
    ELECT_NATS_TOKEN or --nats-token-file; ELECT_NATS_USER with ELECT_NATS_PASSWORD or \
    --nats-password-file; ELECT_NATS_CREDS or --nats-creds";

/// What to do, with the fix named in the terms of a backend URL and of
/// `elect`, this backend's tool (JetStream's error codes told apart).
impl Classify for Error {
    fn class(&self) -> Class {
        use async_nats::jetstream::ErrorCode as C;
        let permanent = |hint: &str| Class::new(Disposition::Permanent).hint(hint);
        let unavailable = || {
            Class::new(Disposition::Transient).hint(
                "check that nats-server runs with JetStream enabled (nats-server -js) and is \
                 reachable",
            )
        };
        match self {
            Error::Connect { source, .. } => match source.kind() {
                async_nats::ConnectErrorKind::Authentication
                | async_nats::ConnectErrorKind::AuthorizationViolation => {
                    permanent(CREDENTIALS_HINT)
                }
                async_nats::ConnectErrorKind::ServerParse => {
                    permanent("fix the server addresses in the URL (nats://host:port,host:port)")
                }
                _ => unavailable(),
            },
            Error::Unavailable { .. } if no_jetstream(self) => permanent(
                "this server runs without JetStream: start nats-server with -js (or a \
                 `jetstream {}` block in its configuration), or enable JetStream for this \
                 account",
            ),
            Error::Unavailable { .. } => match jetstream_code(self).map(C) {
                Some(C::STREAM_REPLICAS_NOT_SUPPORTED) => permanent(
                    "this server runs without a cluster: use ?replicas=1 (with \
                     ?single_replica_ok=1 once its risk is accepted), or point the URL at a \
                     cluster of at least that many servers",
                ),
                Some(C::JETSTREAM_NOT_ENABLED | C::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT) => permanent(
                    "enable JetStream on the server (nats-server -js) or for this account",
                ),
                Some(
                    C::STREAM_INVALID_CONFIG
                    | C::STREAM_NAME_EXIST
                    | C::CLUSTER_REQUIRED
                    | C::MAXIMUM_STREAMS_LIMIT
                    | C::ACCOUNT_RESOURCES_EXCEEDED,
                ) => permanent(
                    "the server refuses the bucket's settings: change ?bucket=, ?replicas= or \
                     the account's limits",
                ),
                _ => unavailable(),
            },
            Error::OutcomeUnknown { .. } => unavailable(),
            Error::CorruptValue { .. } => permanent(
                "the bucket holds a value elect never writes: use another ?bucket= (never delete \
                 a bucket in use: epochs would restart)",
            ),
            Error::BucketMismatch {
                bucket,
                found,
                wanted,
            } => {
                Class::new(Disposition::Permanent).hint(bucket_mismatch_hint(bucket, found, wanted))
            }
            Error::NoBucket { .. } | Error::Config(_) => {
                permanent("check the URL's options and the bucket's settings")
            }
        }
    }
}

/// Whether the NATS client's error `e` is of `kind`.
pub(crate) fn is_kind<K: PartialEq + Clone + std::fmt::Debug + std::fmt::Display>(
    e: &async_nats::error::Error<K>,
    kind: K,
) -> bool {
    e.kind() == kind
}

/// Whether a compare-and-set (a publish expecting the key's last
/// revision, or a KV update) was refused because the key is not at the
/// revision expected: of `kind` (the client's name for the server's
/// "wrong last sequence", 10071), or refused while the key was busy
/// ([`in_flight`]) even after [`settled`](crate::store::settled::settled)
/// sent it again. Either way nothing was written.
pub(crate) fn cas_refused<K: PartialEq + Clone + std::fmt::Debug + std::fmt::Display + 'static>(
    e: &async_nats::error::Error<K>,
    kind: K,
) -> bool {
    e.kind() == kind || in_flight(e)
}

/// Whether the server's answer in `e`'s chain is that the stream (a
/// bucket) does not exist (10059).
pub(crate) fn stream_not_found(e: &(dyn std::error::Error + 'static)) -> bool {
    jetstream_code(e) == Some(async_nats::jetstream::ErrorCode::STREAM_NOT_FOUND.0)
}

/// Whether a compare-and-set was refused because another write of the
/// same key was still being proposed: the server's constant form of
/// "wrong last sequence" (10164), which a clustered stream's leader
/// answers without checking the revision, and which the client files
/// under `Other`. Nothing was written, and the key may well be at the
/// revision expected: send it again ([`crate::store::settled`]).
pub(crate) fn in_flight<K: PartialEq + Clone + std::fmt::Debug + std::fmt::Display + 'static>(
    e: &async_nats::error::Error<K>,
) -> bool {
    jetstream_code(e)
        == Some(async_nats::jetstream::ErrorCode::STREAM_WRONG_LAST_SEQUENCE_CONSTANT.0)
}

#[cfg(test)]
mod tests {
    use async_nats::jetstream::context::{PublishError, PublishErrorKind};
    use async_nats::jetstream::kv::{UpdateError, UpdateErrorKind};

    use super::cas_refused;

    /// The server's JetStream error `code` as it sends it.
    fn server_error(code: u64) -> async_nats::jetstream::Error {
        serde_json::from_value(serde_json::json!({
            "code": 400,
            "err_code": code,
            "description": "wrong last sequence",
        }))
        .expect("a JetStream error")
    }

    /// A clustered stream's leader refuses a compare-and-set with the
    /// constant form of "wrong last sequence" (10164) while a write of the
    /// same key is being proposed; the client files it under `Other`.
    /// CI's transfer on a 3-node cluster failed on it: the handover raced
    /// the term's own renewal, and was refused as an outage instead of a
    /// moved key (which it catches up on and writes again).
    #[test]
    fn the_constant_wrong_last_sequence_is_a_refused_compare_and_set() {
        let publish = PublishError::with_source(PublishErrorKind::Other, server_error(10164));
        assert!(cas_refused(&publish, PublishErrorKind::WrongLastSequence));
        let update = UpdateError::with_source(
            UpdateErrorKind::Other,
            PublishError::with_source(PublishErrorKind::Other, server_error(10164)),
        );
        assert!(cas_refused(&update, UpdateErrorKind::WrongLastRevision));
        // The client's own kind, as before.
        let kind =
            PublishError::with_source(PublishErrorKind::WrongLastSequence, server_error(10071));
        assert!(cas_refused(&kind, PublishErrorKind::WrongLastSequence));
        // Any other refusal is not one.
        let other = PublishError::with_source(PublishErrorKind::Other, server_error(10058));
        assert!(!cas_refused(&other, PublishErrorKind::WrongLastSequence));
        assert!(!cas_refused(
            &PublishError::new(PublishErrorKind::TimedOut),
            PublishErrorKind::WrongLastSequence
        ));
    }
}
