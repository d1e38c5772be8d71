//! Opening (or creating) the KV buckets this crate uses: the elections
//! bucket, the lease-set buckets and the fence bucket.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use election_core::{ConfigError, Epoch};

use crate::error::Error;

/// A bucket as the server describes it now: which incarnation (its
/// stream's creation time) and the settings a lease depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The stream's creation time, in microseconds since the Unix epoch:
    /// the *base* of every epoch derived from a revision of this
    /// incarnation (see [`epoch_at`]). A deleted and recreated bucket has
    /// a later one.
    pub(crate) created_us: u64,
    /// The max age (zero: never expire).
    pub(crate) max_age: Duration,
    /// The replicas.
    pub(crate) replicas: usize,
    /// The stream's last sequence when read: the revision of the bucket's
    /// latest write (0: none yet).
    pub(crate) last_sequence: u64,
    /// Whether the stream holds no message (none yet, or an operator
    /// purged the stream: the last sequence stays, its message is gone).
    pub(crate) empty: bool,
}

/// Reads the bucket's [`Shape`] from the stream leader (stream info),
/// bounded by `timeout`.
pub(crate) async fn shape(store: &kv::Store, timeout: Duration) -> Result<Shape, Error> {
    let info = tokio::time::timeout(timeout, store.stream.get_info())
        .await
        .map_err(|_| Error::Unavailable {
            what: "read the bucket's stream info (no answer in time)",
            source: None,
        })?
        .map_err(|e| Error::unavailable("read the bucket's stream info", e))?;
    shape_of(&info)
}

/// The bucket's [`Shape`] as the stream info read when `store` was opened
/// (or created) shows it: no request.
pub(crate) fn opened_shape(store: &kv::Store) -> Result<Shape, Error> {
    shape_of(store.stream.cached_info())
}

fn shape_of(info: &jetstream::stream::Info) -> Result<Shape, Error> {
    let created_us = u64::try_from(info.created.unix_timestamp_nanos() / 1000)
        .ok()
        .filter(|&us| us > 0)
        .ok_or_else(|| Error::CorruptValue {
            key: info.config.name.clone(),
            detail: format!(
                "the stream's creation time {} is not after 1970",
                info.created
            ),
        })?;
    Ok(Shape {
        created_us,
        max_age: info.config.max_age,
        replicas: info.config.num_replicas,
        last_sequence: info.state.last_sequence,
        empty: info.state.messages == 0,
    })
}

/// The epoch of a write at `revision` in the bucket incarnation whose
/// stream was created at `base` (microseconds since the Unix epoch):
/// `base + revision`.
///
/// Within one incarnation this grows with the revision. Across a deleted
/// and recreated bucket it keeps growing: the old incarnation received
/// fewer writes than microseconds passed during its life (one stream
/// cannot take a write per microsecond), so its last epoch is below the
/// new incarnation's creation time, which is below every new epoch —
/// provided the server's clock did not step back between the two
/// creations by more than the old bucket's life (ADR 0015). Past
/// [`Epoch::MAX`] (about 292,000 years of microseconds) it is
/// [`ConfigError::EpochExhausted`], never a wrap.
pub(crate) fn epoch_at(base: u64, revision: u64) -> Result<Epoch, Error> {
    if base == 0 || revision == 0 {
        return Err(Error::CorruptValue {
            key: String::new(),
            detail: format!("base {base}, revision {revision}: not a write of a bucket"),
        });
    }
    base.checked_add(revision)
        .and_then(Epoch::new)
        .filter(|e| e.is_term())
        .ok_or(Error::Config(ConfigError::EpochExhausted))
}

/// Why a lease counted with `ttl` cannot rely on a bucket of `shape`: its
/// max age is below the TTL (the server could expire a key before the
/// holder's validity ends). `None` if the max age is zero (never expire)
/// or at least the TTL.
pub(crate) fn max_age_below(shape: &Shape, ttl: Duration) -> Option<String> {
    (!shape.max_age.is_zero() && shape.max_age < ttl).then(|| {
        format!(
            "the bucket's max age is now {:?}, below the TTL {ttl:?} this claim counts with",
            shape.max_age
        )
    })
}

/// The error for bucket `bucket` found recreated with an earlier creation
/// time (`now`, µs) than one seen before (`before`): the server's clock
/// went back, so epochs could repeat.
pub(crate) fn recreated_earlier(bucket: &str, before: u64, now: u64) -> Error {
    Error::CorruptValue {
        key: bucket.to_owned(),
        detail: format!(
            "the bucket was recreated with an earlier creation time ({now} µs, after {before} µs): \
             the server's clock went back, so epochs could repeat; refusing to claim"
        ),
    }
}

/// Logs, once per opening, that a single-replica bucket can lose its last
/// acknowledged writes on a host crash, unless the user said it is known.
pub(crate) fn warn_if_single_replica(name: &str, shape: &Shape, acknowledged: bool) {
    if shape.replicas < 2 && !acknowledged {
        tracing::warn!(
            bucket = name,
            "bucket {name} has a single replica: a nats-server acknowledges writes before \
             they reach the disk (sync_interval, 2 minutes by default), so a host crash or \
             power loss can lose the last writes and later terms can reuse their epochs, and \
             fences then accept two leaders. Use an R3 bucket on a cluster, or run the server \
             with `jetstream {{ sync_interval: always }}`; say so with \
             NatsOptions::single_replica_ok(true) to silence this warning"
        );
    }
}

/// What a bucket must look like.
#[derive(Clone, Debug)]
pub(crate) struct Spec<'a> {
    pub(crate) name: &'a str,
    pub(crate) description: &'a str,
    /// The max age (the lease TTL); zero: entries never expire.
    pub(crate) max_age: Duration,
    pub(crate) replicas: usize,
    /// Ask the server for TTL markers (2.11+), so watchers see expiries.
    pub(crate) markers: bool,
    /// Refuse an existing bucket with another max age.
    pub(crate) check_max_age: bool,
    /// Create the bucket if it is missing (else [`Error::NoBucket`]).
    pub(crate) create: bool,
    /// What the operation is, for the error if JetStream cannot do it.
    pub(crate) what: &'static str,
}

/// The max age of the bucket `name`; `None` if it does not exist.
async fn max_age_of(js: &jetstream::Context, name: &str) -> Result<Option<Duration>, Error> {
    match js.get_stream(format!("KV_{name}")).await {
        Ok(stream) => Ok(Some(stream.cached_info().config.max_age)),
        Err(e)
            if matches!(
                e.kind(),
                jetstream::context::GetStreamErrorKind::JetStream(js)
                    if js.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(Error::unavailable("look up the elections bucket", e)),
    }
}

/// The bucket of elections with lease TTL `ttl` when none is named (ADR
/// 0064; [`crate::bucket_for_ttl`]): the default bucket if it does not
/// exist yet or exists with that max age, else the TTL's own,
/// `elections-ttl-<ttl>`. An observer (which may not know the candidates'
/// TTL) takes the TTL's own bucket if it exists, else the default one.
pub(crate) async fn for_ttl(
    js: &jetstream::Context,
    ttl: Duration,
    observer: bool,
) -> Result<String, Error> {
    let own = crate::bucket_for_ttl(ttl);
    if observer {
        return Ok(match max_age_of(js, &own).await? {
            Some(_) => own,
            None => crate::DEFAULT_BUCKET.to_owned(),
        });
    }
    Ok(match max_age_of(js, crate::DEFAULT_BUCKET).await? {
        None => crate::DEFAULT_BUCKET.to_owned(),
        Some(age) if age == ttl => crate::DEFAULT_BUCKET.to_owned(),
        Some(_) => own,
    })
}

/// The elections buckets of the server other than `own` (the default one
/// and every `elections-ttl-*`), each with its max age (ADR 0064).
pub(crate) async fn others(
    js: &jetstream::Context,
    own: &str,
) -> Result<Vec<(kv::Store, Duration)>, Error> {
    use futures::TryStreamExt;
    let prefix = format!("KV_{}-ttl-", crate::DEFAULT_BUCKET);
    let default = format!("KV_{}", crate::DEFAULT_BUCKET);
    let names: Vec<String> = js
        .stream_names()
        .try_collect()
        .await
        .map_err(|e| Error::unavailable("list the elections buckets", e))?;
    let mut out = Vec::new();
    for stream in names {
        let Some(bucket) = stream.strip_prefix("KV_") else {
            continue;
        };
        if bucket == own || !(stream == default || stream.starts_with(&prefix)) {
            continue;
        }
        // Deleted meanwhile: nothing lives there.
        if let Ok(kv) = js.get_key_value(bucket).await {
            let age = kv.stream.cached_info().config.max_age;
            out.push((kv, age));
        }
    }
    Ok(out)
}

/// Whether the server writes TTL markers (2.11 and later).
pub(crate) fn server_has_markers(client: &async_nats::Client) -> bool {
    let version = client.server_info().version;
    let mut parts = version
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 11)
}

/// Opens the bucket, or creates it as `spec` says. An existing bucket with
/// another max age is refused ([`Error::BucketMismatch`]): its max age is
/// a lease TTL (or "never expire").
pub(crate) async fn open(
    js: &jetstream::Context,
    client: &async_nats::Client,
    spec: &Spec<'_>,
) -> Result<kv::Store, Error> {
    let mut last = None;
    for _ in 0..3 {
        if let Ok(kv) = js.get_key_value(spec.name).await {
            // The stream info that opening the bucket read: no second read.
            let found = kv.stream.cached_info().config.max_age;
            if spec.check_max_age && found != spec.max_age {
                return Err(Error::BucketMismatch {
                    bucket: spec.name.to_owned(),
                    found: format!("max age {found:?}"),
                    wanted: format!("max age {:?}", spec.max_age),
                });
            }
            return routed(kv, spec).await;
        }
        if !spec.create {
            return Err(Error::NoBucket {
                bucket: spec.name.to_owned(),
            });
        }
        let config = kv::Config {
            bucket: spec.name.to_owned(),
            description: spec.description.to_owned(),
            history: 1,
            max_age: spec.max_age,
            storage: jetstream::stream::StorageType::File,
            num_replicas: spec.replicas,
            limit_markers: (spec.markers && server_has_markers(client))
                .then_some(Duration::from_secs(1)),
            ..Default::default()
        };
        match js.create_key_value(config).await {
            Ok(kv) => return routed(kv, spec).await,
            // Another process may have created it meanwhile: look again.
            Err(e) => {
                tracing::debug!(bucket = spec.name, error = %e, "creating the bucket failed; looking again");
                last = Some(e);
            }
        }
    }
    Err(Error::Unavailable {
        what: spec.what,
        source: last.map(Into::into),
    })
}

/// The key of the routing probe. The probe never writes it (see
/// [`routed`]), so it may even collide with a real key.
const PROBE_KEY: &str = "_routing-probe";

/// How long [`routed`] waits for a fresh bucket's stream to be reachable.
const ROUTING_PATIENCE: Duration = Duration::from_secs(10);

/// Returns `kv` once this connection's server routes writes to the
/// bucket's stream. Right after a replicated bucket is created, the node a
/// client is connected to may not know the stream's subjects yet and
/// answers a write with "no responders" (`StreamNotFound`) for a moment;
/// a first claim would fail as unavailable. The probe is a conditional
/// write expecting revision `u64::MAX`, which the stream always refuses
/// ("wrong last sequence"): that refusal proves the route, and nothing is
/// written. Read-only openings (observers) skip it.
async fn routed(kv: kv::Store, spec: &Spec<'_>) -> Result<kv::Store, Error> {
    if !spec.create {
        return Ok(kv);
    }
    let deadline = tokio::time::Instant::now() + ROUTING_PATIENCE;
    loop {
        match kv.update(PROBE_KEY, bytes::Bytes::new(), u64::MAX).await {
            Err(e) if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                return Ok(kv);
            }
            // Cannot happen (no entry has that revision); the route works.
            Ok(_) => return Ok(kv),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(bucket = spec.name, error = %e, "the bucket's stream is not reachable yet; trying again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(Error::unavailable(spec.what, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_are_terms_up_to_the_maximum_and_refused_past_it() {
        // A bucket created in 2026, its first write.
        let base = 1_796_000_000_000_000;
        let first = epoch_at(base, 1).expect("an epoch");
        assert!(first.is_term());
        assert_eq!(first.get(), base + 1);
        assert!(epoch_at(base, 2).expect("an epoch") > first);
        // The edge: exactly Epoch::MAX is handed out, one more is refused.
        let max = Epoch::MAX.get();
        assert_eq!(epoch_at(max - 5, 5).expect("the maximum"), Epoch::MAX);
        for (b, r) in [(max - 5, 6), (max, 1), (u64::MAX, 1), (1, u64::MAX)] {
            assert!(
                matches!(
                    epoch_at(b, r),
                    Err(Error::Config(ConfigError::EpochExhausted))
                ),
                "base {b} + revision {r}"
            );
        }
        // No base or no revision is never an epoch.
        assert!(matches!(epoch_at(0, 5), Err(Error::CorruptValue { .. })));
        assert!(matches!(epoch_at(base, 0), Err(Error::CorruptValue { .. })));
        // Never Epoch::UNGUARDED.
        assert_eq!(epoch_at(1, 1).expect("an epoch"), Epoch::FIRST);
    }
}
