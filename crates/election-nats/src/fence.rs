//! [`NatsFence`]: fencing high-water marks in a JetStream KV bucket,
//! advanced by compare-and-set.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use election_core::ConfigError;
use fencing::{Advance, Fence, ResourceName, Token, WriteFn};

use crate::error::Error;
use crate::store::settled::settled;

/// The default bound on one KV request of a [`NatsFence`].
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How many compare-and-sets one check may try before it gives up with
/// [`fencing::Error::Unavailable`]. Every failed one means another writer's
/// succeeded, so the writers as a whole always make progress.
const MAX_ATTEMPTS: u32 = 64;

/// Whether the single-replica warning was logged (once per process).
static WARNED_SINGLE_REPLICA: AtomicBool = AtomicBool::new(false);

/// The longest pause between two attempts of one check.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// A [`Fence`] whose high-water marks live in a NATS JetStream key-value
/// bucket, one key per resource, so writers on many hosts share them.
///
/// # Layout
///
/// - The bucket (for example `fences`) keeps one value per key (history
///   1), in file storage, with **no max age**: a mark must never expire,
///   or an older term's writes would get in again.
///   [`open`](NatsFence::open) creates it that way and refuses an existing
///   bucket with a max age or in memory storage.
/// - The key of resource `r` is its name with every byte outside
///   `[A-Za-z0-9_-]` written as `=XX` (hex), as election keys are:
///   `orders.v2` is `orders=2Ev2`.
/// - The value is the token as decimal text (`42`). A missing key, or one
///   deleted or purged, means "no mark yet"; a value that does not read as
///   a token is [`fencing::Error::Corrupt`], never "no mark".
///
/// # How the mark is advanced
///
/// NATS has no lock a writer could hold, so every change is a
/// compare-and-set: `update(key, token, revision)` succeeds only if the
/// key's last revision is still the one read (revision 0: the key has no
/// value yet). A check reads the mark, decides with
/// [`Advance::decide`] and then compare-and-sets the key:
///
/// - to a **higher** token, to raise the mark;
/// - to the **same** token again when the token equals the mark. This
///   write is needed because the read is a direct get, which may answer
///   from a replica a little behind: only the compare-and-set proves that
///   the mark was still the token at that moment.
///
/// If another writer moved the key meanwhile, the compare-and-set fails and
/// the check starts over with a fresh read (after a short random pause
/// from the second retry on); after 64 tries it gives up with
/// [`fencing::Error::Unavailable`]. A token lower than the mark read is
/// refused at once: marks never go down, so the true mark is at least as
/// high as the one read.
///
/// # What the guarantee rests on
///
/// - The mark only orders writers that all go through this bucket. See
///   [`fenced`](Fence::fenced) for what it can and cannot promise about
///   the write itself.
/// - Deleting or purging a key (or the bucket) removes its mark, as
///   deleting a mark file would: do it only when no writer of an older
///   term can still be running.
/// - Durability is the bucket's: a raised mark is acknowledged once the
///   server stored it (on an R3 bucket, a majority). A single server that
///   loses power can lose what it stored since its last sync (every 2
///   minutes by default, or on every write with `sync_interval: always`);
///   a killed server process loses nothing. [`open`](NatsFence::open) logs
///   a warning (once per process) for a single-replica bucket.
///
/// # Failures
///
/// Each KV request is bounded (5 s by default,
/// [`open_with_timeout`](NatsFence::open_with_timeout) to change it). Store
/// failures are [`fencing::Error::Unavailable`] whose
/// [`source`](std::error::Error::source) is an [`Error`]: a timed-out
/// compare-and-set is [`Error::OutcomeUnknown`] (it may still land), never
/// taken as accepted. Its location is `<bucket>/<key>`.
///
/// ```no_run
/// use election_core::Epoch;
/// use election_nats::NatsFence;
/// use fencing::{Fence, ResourceName, Token};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let fence = NatsFence::open(client, "fences", 1).await?;
/// let orders = ResourceName::new("orders")?;
/// let token = Token::from_epoch(Epoch::new(7).ok_or("not an epoch")?);
///
/// // A new leader fences the resource off before its first write.
/// fence.advance(&orders, token).await?;
/// assert_eq!(fence.high_water_mark(&orders).await?, Some(token));
///
/// // A deposed leader's token is refused.
/// let old = Token::from_epoch(Epoch::new(6).ok_or("not an epoch")?);
/// assert!(matches!(
///     fence.advance(&orders, old).await,
///     Err(fencing::Error::Stale { .. })
/// ));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct NatsFence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    kv: kv::Store,
    bucket: String,
    timeout: Duration,
}

/// The key of `resource`: the same encoding as election keys.
fn key_of(resource: &ResourceName) -> String {
    crate::store::record::key_of(resource.as_str())
}

/// The mark as read.
#[derive(Clone, Copy, Debug)]
struct Read {
    /// The mark, or `None` for "no mark yet".
    mark: Option<Token>,
    /// The revision a compare-and-set must expect: the key's last revision,
    /// or 0 if the key has never had a value.
    revision: u64,
}

/// The outcome of one compare-and-set.
enum Cas {
    /// It landed at this revision.
    Done(u64),
    /// The key had moved on.
    Conflict,
}

/// A random pause before retry `attempt` (none before the first retry).
fn backoff(attempt: u32) -> Duration {
    if attempt == 0 {
        return Duration::ZERO;
    }
    let cap = Duration::from_millis(1u64 << attempt.min(6)).min(MAX_BACKOFF);
    let random = std::hash::RandomState::new().build_hasher().finish();
    cap.mul_f64((random % 1024) as f64 / 1024.0)
}

fn check_bucket(bucket: &str) -> Result<(), ConfigError> {
    if bucket.is_empty()
        || bucket.len() > 64
        || !bucket
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ConfigError::BadSetting {
            setting: "bucket",
            reason: format!("{bucket:?} is not 1-64 letters, digits, - or _"),
        });
    }
    Ok(())
}

impl NatsFence {
    /// Opens the fence bucket `bucket` on `client`'s server(s), creating it
    /// if it does not exist: history 1, file storage, `replicas` replicas
    /// (1, or 3 on a cluster), no max age. Each KV request is bounded by
    /// 5 s; see [`open_with_timeout`](NatsFence::open_with_timeout).
    ///
    /// Use a bucket of its own, not the elections' bucket: that one has a
    /// max age (the lease TTL), which would expire the marks.
    ///
    /// Cancel safety: cancel safe; a bucket created before the drop stays,
    /// which is harmless (the next `open` uses it).
    ///
    /// Failure model: a bad bucket name or replica count is
    /// [`Error::Config`]; an existing bucket with a max age or in memory
    /// storage is [`Error::BucketMismatch`]; no answer, or no JetStream, is
    /// [`Error::Unavailable`].
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsFence, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// // The election's client, a bucket of the fence's own.
    /// let fence = NatsFence::open(election.client().clone(), "fences", 1).await?;
    /// assert_eq!(fence.bucket(), "fences");
    /// # Ok(()) }
    /// ```
    pub async fn open(
        client: async_nats::Client,
        bucket: &str,
        replicas: usize,
    ) -> Result<NatsFence, Error> {
        Self::open_with_timeout(client, bucket, replicas, DEFAULT_REQUEST_TIMEOUT).await
    }

    /// As [`open`](NatsFence::open), with `timeout` as the bound on each KV
    /// request (opening the bucket, every read and compare-and-set).
    ///
    /// A short bound reports a lost server sooner, as
    /// [`fencing::Error::Unavailable`]; a compare-and-set that runs out of
    /// it may still land, so a bound shorter than the server's usual answer
    /// time makes checks fail while raising marks.
    ///
    /// Cancel safety and failure model as [`open`](NatsFence::open); a zero
    /// `timeout` is [`Error::Config`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use election_nats::NatsFence;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    /// let fence = NatsFence::open_with_timeout(client, "fences", 1, Duration::from_secs(1)).await?;
    /// assert_eq!(fence.request_timeout(), Duration::from_secs(1));
    /// # Ok(()) }
    /// ```
    pub async fn open_with_timeout(
        client: async_nats::Client,
        bucket: &str,
        replicas: usize,
        timeout: Duration,
    ) -> Result<NatsFence, Error> {
        check_bucket(bucket)?;
        if !(1..=5).contains(&replicas) {
            return Err(ConfigError::BadSetting {
                setting: "replicas",
                reason: format!("{replicas} is not 1 to 5"),
            }
            .into());
        }
        if timeout.is_zero() {
            return Err(ConfigError::BadSetting {
                setting: "request_timeout",
                reason: "it must be above zero".into(),
            }
            .into());
        }
        let mut js = jetstream::new(client.clone());
        js.set_timeout(timeout);
        let no_answer = |what| Error::Unavailable { what, source: None };
        let spec = crate::store::bucket::Spec {
            name: bucket,
            description: "fencing high-water marks (election-nats); never expire",
            max_age: Duration::ZERO,
            replicas,
            markers: false,
            check_max_age: true,
            create: true,
            what: "open or create the fence bucket (is JetStream enabled?)",
        };
        let kv = tokio::time::timeout(timeout, crate::store::bucket::open(&js, &client, &spec))
            .await
            .map_err(|_| no_answer("open the fence bucket (no answer in time)"))??;
        let status = tokio::time::timeout(timeout, kv.status())
            .await
            .map_err(|_| no_answer("read the fence bucket (no answer in time)"))?
            .map_err(|e| Error::unavailable("read the fence bucket", e))?;
        let config = &status.info.config;
        if !config.max_age.is_zero() {
            return Err(Error::BucketMismatch {
                bucket: bucket.to_owned(),
                found: format!("max age {:?}", config.max_age),
                wanted: "no max age (fencing marks must never expire)".into(),
            });
        }
        if config.storage != jetstream::stream::StorageType::File {
            return Err(Error::BucketMismatch {
                bucket: bucket.to_owned(),
                found: "memory storage".into(),
                wanted: "file storage (fencing marks must survive a restart)".into(),
            });
        }
        if config.num_replicas < 2 && !WARNED_SINGLE_REPLICA.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                bucket,
                "fence bucket {bucket} has a single replica: a host crash or power loss can \
                 lose the last raised marks (nats-server syncs every sync_interval, 2 minutes \
                 by default), and a lower token is then accepted again. Run the server with \
                 `jetstream {{ sync_interval: always }}` or use an R3 bucket on a cluster \
                 (logged once per process)"
            );
        }
        Ok(NatsFence {
            inner: Arc::new(Inner {
                kv,
                bucket: bucket.to_owned(),
                timeout,
            }),
        })
    }

    /// The bucket's name.
    ///
    /// ```no_run
    /// use election_nats::NatsFence;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    /// let fence = NatsFence::open(client, "fences", 1).await?;
    /// println!("high-water marks in bucket {}", fence.bucket());
    /// # Ok(()) }
    /// ```
    pub fn bucket(&self) -> &str {
        &self.inner.bucket
    }

    /// The bound on each KV request.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use election_nats::NatsFence;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    /// let fence = NatsFence::open(client, "fences", 1).await?;
    /// assert_eq!(fence.request_timeout(), Duration::from_secs(5)); // open's default
    /// # Ok(()) }
    /// ```
    pub fn request_timeout(&self) -> Duration {
        self.inner.timeout
    }

    fn location(&self, key: &str) -> String {
        format!("{}/{key}", self.inner.bucket)
    }

    /// Reads the mark of `key` (a direct get: it may lag, never lead).
    async fn read(&self, key: &str) -> Result<Read, fencing::Error> {
        let entry = tokio::time::timeout(self.inner.timeout, self.inner.kv.entry(key))
            .await
            .map_err(|_| {
                fencing::Error::unavailable(
                    self.location(key),
                    Error::Unavailable {
                        what: "read the high-water mark (no answer in time)",
                        source: None,
                    },
                )
            })?
            .map_err(|e| {
                fencing::Error::unavailable(
                    self.location(key),
                    Error::unavailable("read the high-water mark", e),
                )
            })?;
        let Some(entry) = entry else {
            return Ok(Read {
                mark: None,
                revision: 0,
            });
        };
        if entry.operation != kv::Operation::Put {
            // Deleted or purged: no mark, but a compare-and-set must expect
            // the marker's revision.
            return Ok(Read {
                mark: None,
                revision: entry.revision,
            });
        }
        let mark = std::str::from_utf8(&entry.value)
            .ok()
            .and_then(|text| text.parse::<Token>().ok())
            .ok_or_else(|| {
                let text = String::from_utf8_lossy(&entry.value);
                let shown: String = text.chars().take(64).collect();
                fencing::Error::corrupt(
                    self.location(key),
                    format!("the stored mark {shown:?} is not a token"),
                )
            })?;
        Ok(Read {
            mark: Some(mark),
            revision: entry.revision,
        })
    }

    /// Writes `token` to `key` if the key's last revision is `revision`.
    async fn cas(&self, key: &str, token: Token, revision: u64) -> Result<Cas, fencing::Error> {
        let value = bytes::Bytes::from(token.to_string());
        let unknown = || {
            fencing::Error::unavailable(
                self.location(key),
                Error::OutcomeUnknown {
                    after: self.inner.timeout,
                },
            )
        };
        let result = tokio::time::timeout(
            self.inner.timeout,
            settled(|| self.inner.kv.update(key, value.clone(), revision)),
        )
        .await
        .map_err(|_| unknown())?;
        match result {
            Ok(landed) => Ok(Cas::Done(landed)),
            Err(e) if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                Ok(Cas::Conflict)
            }
            Err(e) => match e.kind() {
                kv::UpdateErrorKind::TimedOut => Err(unknown()),
                _ => Err(fencing::Error::unavailable(
                    self.location(key),
                    Error::unavailable("compare-and-set the high-water mark", e),
                )),
            },
        }
    }

    /// Decides `token` against the mark and compare-and-sets the key,
    /// starting from `known` (a mark known without reading it) if given,
    /// until a compare-and-set lands. Returns the decision and the
    /// revision it landed at.
    async fn settle(
        &self,
        resource: &ResourceName,
        key: &str,
        token: Token,
        mut known: Option<Read>,
    ) -> Result<(Advance, u64), fencing::Error> {
        for attempt in 0..MAX_ATTEMPTS {
            let pause = backoff(attempt);
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            let read = match known.take() {
                Some(read) => read,
                None => self.read(key).await?,
            };
            let advance = Advance::decide(resource, read.mark, token)?;
            match self.cas(key, token, read.revision).await? {
                Cas::Done(revision) => return Ok((advance, revision)),
                Cas::Conflict => continue,
            }
        }
        Err(fencing::Error::unavailable(
            self.location(key),
            Error::Unavailable {
                what: "advance the high-water mark (other writers kept moving it; \
                       every compare-and-set failed)",
                source: None,
            },
        ))
    }
}

impl Fence for NatsFence {
    /// Reads the mark, decides with [`Advance::decide`] and compare-and-sets
    /// the key to `token`, also when `token` equals the mark (so an equal
    /// token is only accepted if the mark really still is that token);
    /// retries with a fresh read when another writer moved the key.
    ///
    /// Failure model and cancel safety: the [`Fence::advance`] contract.
    /// Here [`fencing::Error::Unavailable`] also means a request ran out of
    /// its bound (a timed-out compare-and-set may still land) or 64
    /// compare-and-sets in a row lost to other writers; a dropped future
    /// may likewise leave a compare-and-set already sent to land. There is
    /// no lock to release.
    ///
    /// ```no_run
    /// # use election_core::Epoch;
    /// # use election_nats::NatsFence;
    /// # use fencing::{Fence, ResourceName, Token};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    /// let fence = NatsFence::open(client, "fences", 1).await?;
    /// let queue = ResourceName::new("queue")?;
    /// let token = Token::from_epoch(Epoch::new(5).ok_or("not an epoch")?);
    /// let first = fence.advance(&queue, token).await?;
    /// assert!(first.previous.is_none_or(|mark| mark <= token));
    /// // The same token again: accepted, the mark stays.
    /// assert_eq!(fence.advance(&queue, token).await?.previous, Some(token));
    /// # Ok(()) }
    /// ```
    async fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        let key = key_of(resource);
        let (advance, _) = self.settle(resource, &key, token, None).await?;
        Ok(advance)
    }

    /// Checks `token` and raises the mark as [`advance`](Fence::advance)
    /// does, runs `write`, then checks again that the mark is still
    /// `token`.
    ///
    /// # What this gives, and what it does not
    ///
    /// NATS has no lock that could be held across the write, so this is
    /// weaker than the [`Fence`] contract's "no other writer gets in between
    /// the check and the end of `write`":
    ///
    /// 1. The mark is compare-and-set to `token` (as in `advance`). A stale
    ///    token is refused here and `write` never runs.
    /// 2. `write` runs to completion. Meanwhile a writer with a newer token
    ///    can raise the mark and make its own write: nothing stops it.
    /// 3. A second compare-and-set, expecting the revision step 1 wrote,
    ///    confirms the mark is unchanged. If a writer with the *same*
    ///    token moved the key, the mark is re-read and compare-and-set
    ///    again. If a newer token was accepted meanwhile, the result is
    ///    [`fencing::Error::Stale`] with both tokens — **after `write` has
    ///    run**: the write may have raced a newer writer's, and its
    ///    outcome is dropped.
    ///
    /// `Ok` therefore proves that from before `write` started until after
    /// it ended the mark was `token`: no newer writer *that goes through
    /// this bucket* was accepted meanwhile, so among writes made with
    /// `fenced` on this bucket that returned `Ok`, a lower token's write
    /// always happened before a higher token's. It cannot undo a write that
    /// raced, and it does not stop a writer that skips the fence.
    ///
    /// For a resource that needs the check and the write to be atomic (a
    /// deposed leader's write must never land at all), the resource itself
    /// must check the token on every write: store it beside the data and
    /// refuse a lower one inside the resource's own transaction or
    /// conditional write (as `election_sqlite::SqliteFence::advance_in`
    /// does for a SQLite database). The mark in this bucket then only
    /// orders the writers that go through it.
    ///
    /// Failure model: [`fencing::Error::Stale`] either before `write` ran
    /// (refused; `write` never called) or after it (raced; see above):
    /// tell them apart by whether your closure ran.
    /// [`fencing::Error::Unavailable`] and [`fencing::Error::Corrupt`]
    /// likewise: from step 1 (`write` not run; the mark may or may not have
    /// been raised) or from step 3 (`write` ran, its outcome is dropped and
    /// whether it raced is unknown). A mark found missing in step 3 (the
    /// key was deleted while `write` ran) is `Corrupt`: writes of older
    /// terms may have been accepted meanwhile.
    ///
    /// Cancel safety: as the [`Fence::fenced`] contract states until
    /// `write` ends (there is no lock to release). Dropped in step 3, the
    /// write has run and is unconfirmed; the mark is unchanged (or
    /// rewritten with the same token).
    ///
    /// ```no_run
    /// # use election_core::Epoch;
    /// # use election_nats::NatsFence;
    /// # use fencing::{Fence, ResourceName, Token};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    /// let fence = NatsFence::open(client, "fences", 1).await?;
    /// let report = ResourceName::new("report")?;
    /// let token = Token::from_epoch(Epoch::new(9).ok_or("not an epoch")?);
    /// let mut ran = false;
    /// match fence.fenced(&report, token, || async { ran = true; "written" }).await {
    ///     Ok(outcome) => assert_eq!(outcome, "written"),
    ///     Err(fencing::Error::Stale { high_water_mark, .. }) if ran => {
    ///         eprintln!("the write raced term {high_water_mark}: check the report");
    ///     }
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok(()) }
    /// ```
    async fn fenced<W>(
        &self,
        resource: &ResourceName,
        token: Token,
        write: W,
    ) -> Result<W::Outcome, fencing::Error>
    where
        W: WriteFn + FnOnce() -> <W as WriteFn>::Future,
    {
        let key = key_of(resource);
        let (_, revision) = self.settle(resource, &key, token, None).await?;
        let outcome = write().await;
        // The mark as step 1 left it; a compare-and-set on that revision
        // proves nothing moved it.
        let known = Read {
            mark: Some(token),
            revision,
        };
        let (confirm, _) = self.settle(resource, &key, token, Some(known)).await?;
        if confirm.previous != Some(token) {
            return Err(fencing::Error::corrupt(
                self.location(&key),
                format!(
                    "the mark {token} was removed while a fenced write ran \
                     (found {:?}); the write has run and writes of older terms \
                     may have been accepted meanwhile",
                    confirm.previous.map(|t| t.to_string())
                ),
            ));
        }
        Ok(outcome)
    }

    /// Reads the mark with a direct get.
    ///
    /// On a replicated bucket a replica may answer a little behind the
    /// latest accepted token: the mark read is never higher than the true
    /// one, and may be lower for a moment. [`advance`](Fence::advance) with
    /// a token is exact.
    ///
    /// Failure model: [`fencing::Error::Corrupt`] if the stored value is
    /// not a token, [`fencing::Error::Unavailable`] if the read failed or
    /// ran out of its bound.
    ///
    /// Cancel safety: it only reads; dropping it is harmless.
    ///
    /// ```no_run
    /// # use election_nats::NatsFence;
    /// # use fencing::{Fence, ResourceName};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    /// let fence = NatsFence::open(client, "fences", 1).await?;
    /// match fence.high_water_mark(&ResourceName::new("cache")?).await? {
    ///     Some(mark) => println!("writes below term {mark} are refused"),
    ///     None => println!("no writer yet"),
    /// }
    /// # Ok(()) }
    /// ```
    async fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> Result<Option<Token>, fencing::Error> {
        Ok(self.read(&key_of(resource)).await?.mark)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use election_core::ElectionName;

    #[test]
    fn keys_are_encoded_like_election_keys() {
        for name in [
            "orders",
            "orders.v2",
            "billing dispatcher",
            "räksmörgås",
            "a=b",
        ] {
            let resource = ResourceName::new(name).unwrap();
            let election = ElectionName::new(name).unwrap();
            assert_eq!(
                key_of(&resource),
                crate::store::record::key(&election),
                "{name}"
            );
        }
        assert_eq!(
            key_of(&ResourceName::new("orders.v2").unwrap()),
            "orders=2Ev2"
        );
    }

    #[test]
    fn backoff_is_bounded_and_absent_at_first() {
        assert_eq!(backoff(0), Duration::ZERO);
        for attempt in 1..MAX_ATTEMPTS {
            assert!(backoff(attempt) <= MAX_BACKOFF);
        }
    }

    #[test]
    fn bucket_names_are_checked() {
        assert!(check_bucket("fences").is_ok());
        assert!(check_bucket("fences_2-x").is_ok());
        for bad in ["", "a.b", "a b", "a/b", &"x".repeat(65)] {
            assert!(check_bucket(bad).is_err(), "{bad:?}");
        }
    }
}
