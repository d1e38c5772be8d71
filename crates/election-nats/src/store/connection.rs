//! The base of the store layer: the connection context every part of the crate works
//! through (client, JetStream context, the elections bucket, options, the
//! bucket incarnation last seen) and the exact reads and bucket checks
//! built on it.
//!
//! The façade ([`NatsElection`](crate::NatsElection)), the claims and the
//! lease sets use this module; it uses only the modules below it
//! (`bucket`, `exact_read`, `record`, `options`, `error`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use async_nats::jetstream::{self, kv};
use election_core::{ElectionName, Leader};

use crate::error::Error;
use crate::options::NatsOptions;
use crate::store::bucket;
use crate::store::clients::SharedClient;
use crate::store::exact_read::{self, ExactEntry};
use crate::store::record;

/// A connection to the server(s) and the elections bucket, shared by the
/// façade and every claim and lease set opened from it.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    /// The elections bucket.
    pub(crate) kv: kv::Store,
    pub(crate) options: NatsOptions,
    /// The creation time (µs) of the bucket incarnation last seen: the
    /// base of the epochs won in it (see [`bucket::epoch_at`]).
    base: AtomicU64,
    /// The bucket's replicas when it was opened.
    replicas: usize,
    /// With no bucket named: the other elections buckets of the server
    /// (the default one and the other TTLs' own, as opening found them),
    /// each with its max age. A claim refuses a name that is live in one
    /// of them: the same election run with another TTL (ADR 0064).
    pub(crate) others: Vec<(kv::Store, Duration)>,
    /// The process's shared client this connection works over, if it is
    /// one (`NatsElection::connect`, the driver): holding it keeps the
    /// registry's entry alive (ADR 0106). `None`: the user's own client.
    pub(crate) shared: Option<Arc<SharedClient>>,
    /// The last stream info read of the bucket by an incarnation check:
    /// when its request was sent, and its answer (an error as its text).
    /// Checks that wait while one is sent share its answer.
    shape_read: tokio::sync::Mutex<Option<(Instant, Result<bucket::Shape, String>)>>,
    /// Stream info requests sent by incarnation checks.
    #[cfg(test)]
    shape_reads: AtomicU64,
}

impl Connection {
    /// Opens (or, unless `options` is an observer's, creates) the
    /// elections bucket over `client`, waits until the server routes writes
    /// to it, and reads its incarnation.
    pub(crate) async fn open(
        client: async_nats::Client,
        options: NatsOptions,
    ) -> Result<Connection, Error> {
        let mut js = jetstream::new(client.clone());
        js.set_timeout(options.timeout().max(Duration::from_secs(1)));
        fn spec(options: &NatsOptions) -> bucket::Spec<'_> {
            bucket::Spec {
                name: options.bucket_name(),
                description: "leader elections (election-nats); max age = the lease TTL",
                max_age: options.ttl(),
                replicas: options.replica_count(),
                markers: true,
                check_max_age: !options.is_observer(),
                create: !options.is_observer(),
                what: "open or create the bucket (is JetStream enabled?)",
            }
        }
        let (kv, options) = if options.is_bucket_named() {
            (bucket::open(&js, &client, &spec(&options)).await?, options)
        } else {
            // The bucket of this TTL (ADR 0064); looked up again once if
            // the default bucket was created with another TTL meanwhile.
            let mut again = true;
            loop {
                let name = bucket::for_ttl(&js, options.ttl(), options.is_observer()).await?;
                let resolved = options.clone().resolved(name);
                match bucket::open(&js, &client, &spec(&resolved)).await {
                    Ok(kv) => break (kv, resolved),
                    Err(Error::BucketMismatch { .. }) if again => again = false,
                    Err(e) => return Err(e),
                }
            }
        };
        let others = if options.is_bucket_named() || options.is_observer() {
            Vec::new()
        } else {
            bucket::others(&js, options.bucket_name()).await?
        };
        // The incarnation as opening the bucket read it (one stream info
        // request for the whole opening).
        let shape = bucket::opened_shape(&kv)?;
        if !options.is_observer() {
            bucket::warn_if_single_replica(
                options.bucket_name(),
                &shape,
                options.is_single_replica_ok(),
            );
        }
        Ok(Connection {
            client,
            js,
            kv,
            options,
            base: AtomicU64::new(shape.created_us),
            replicas: shape.replicas,
            others,
            shared: None,
            shape_read: tokio::sync::Mutex::new(None),
            #[cfg(test)]
            shape_reads: AtomicU64::new(0),
        })
    }

    /// The base of epochs, as last seen.
    pub(crate) fn base(&self) -> u64 {
        self.base.load(Ordering::SeqCst)
    }

    /// Records the base of the bucket incarnation the server shows now.
    pub(crate) fn set_base(&self, base: u64) {
        self.base.store(base, Ordering::SeqCst);
    }

    /// The bucket's replicas when it was opened.
    pub(crate) fn replicas(&self) -> usize {
        self.replicas
    }

    /// The bound on one request.
    pub(crate) fn timeout(&self) -> Duration {
        self.options.timeout()
    }

    /// Reads `key`'s latest entry in the elections bucket through the
    /// stream leader (bounded by the request timeout).
    pub(crate) async fn read_exact(&self, key: &str) -> Result<Option<ExactEntry>, Error> {
        exact_read::read_exact(&self.kv, key, self.timeout()).await
    }

    /// The revision of `key`'s latest entry if that entry is the record of
    /// the attempt `nonce` (a write of its own, perhaps one that landed
    /// unanswered); `None` if it is anything else (another holder, a
    /// delete, an expiry, no entry). Read through the stream leader: the
    /// catch-up read of a term's compare-and-set writes after a refusal
    /// (renewal, confirm, release).
    pub(crate) async fn own_revision(&self, key: &str, nonce: u64) -> Result<Option<u64>, Error> {
        Ok(self
            .read_exact(key)
            .await?
            .filter(|l| l.is_attempts(key, nonce))
            .map(|l| l.revision))
    }

    /// Who holds election `name` now, read exactly, or `None`.
    pub(crate) async fn leader(&self, name: &ElectionName) -> Result<Option<Leader>, Error> {
        let key = record::key(name);
        match self.read_exact(&key).await? {
            Some(l) => record::leader_of(&key, l.operation, &l.value, l.revision),
            None => Ok(None),
        }
    }

    /// Checks, after a write of a term won in the incarnation `base`, that
    /// the elections bucket still is that incarnation (its stream's
    /// creation time is unchanged) and that its max age is not below the
    /// TTL the claims count with. `Ok(None)`: all is well;
    /// `Ok(Some(why))`: the term must not go on. A bucket recreated with an
    /// earlier creation time is [`Error::CorruptValue`] (epochs could
    /// repeat). Records the incarnation seen ([`base`](Self::base)).
    ///
    /// The stream info is read by a request sent after this call began
    /// (so after the caller's write was answered), shared with every check
    /// that waits while it is sent ([`shape_since`](Self::shape_since)).
    pub(crate) async fn check_incarnation(&self, base: u64) -> Result<Option<String>, Error> {
        let shape = self.shape_since(Instant::now()).await?;
        if shape.created_us < base {
            return Err(bucket::recreated_earlier(
                self.options.bucket_name(),
                base,
                shape.created_us,
            ));
        }
        self.set_base(shape.created_us);
        if shape.created_us != base {
            return Ok(Some(format!(
                "the bucket was deleted and recreated (created at {} µs, the term's at {} µs)",
                shape.created_us, base
            )));
        }
        Ok(bucket::max_age_below(&shape, self.options.ttl()))
    }

    /// The bucket's [`Shape`](bucket::Shape) as a stream info request sent
    /// at or after `since` answered it (its error, if it failed). One
    /// request at a time: checks that wait while it is sent share the
    /// next one, so the terms of a process, which renew together, cost
    /// the server one stream info per burst of renewals, not one each.
    /// Never an answer to a request sent before `since`.
    ///
    /// Cancel safety: cancel safe (a request cut off is not kept; the next
    /// check sends its own).
    async fn shape_since(&self, since: Instant) -> Result<bucket::Shape, Error> {
        let mut last = self.shape_read.lock().await;
        if let Some((sent, read)) = last.as_ref()
            && *sent >= since
        {
            return read.clone().map_err(|e| Error::Unavailable {
                what: "read the bucket's stream info",
                source: Some(e.into()),
            });
        }
        let sent = Instant::now();
        #[cfg(test)]
        self.shape_reads.fetch_add(1, Ordering::SeqCst);
        let read = bucket::shape(&self.kv, self.timeout()).await;
        *last = Some((sent, read.as_ref().copied().map_err(ToString::to_string)));
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::record::{ClaimRecord, SessionRecord};
    use election_core::Identity;

    /// A server, and a connection to its elections bucket (TTL 3 s).
    async fn connected() -> (nats_testkit::Server, Connection) {
        let server = nats_testkit::Server::start().expect("nats-server");
        let options = NatsOptions::new(Duration::from_secs(3)).expect("options");
        let client = async_nats::connect(server.url()).await.expect("connect");
        let conn = Connection::open(client, options).await.expect("open");
        (server, conn)
    }

    /// The incarnation checks of many terms renewing together share their
    /// stream info reads: 50 checks at once send two (the first, and one
    /// for those that began while it was sent), each answering as its own
    /// would; a check begun after them sends its own (never an answer
    /// read before it began). Before, each check sent one (the NATS `many`
    /// bench: 208 µs of server CPU per renewal; 131 µs with the reads
    /// shared).
    #[tokio::test]
    async fn checks_at_once_share_their_stream_info_reads() {
        let (_server, conn) = connected().await;
        let base = conn.base();
        let reads = || conn.shape_reads.load(Ordering::SeqCst);
        let before = reads();
        // Polled in order at first: each check begins before the first is sent.
        let checks = futures::future::join_all((0..50).map(|_| conn.check_incarnation(base))).await;
        assert!(checks.iter().all(|c| matches!(c, Ok(None))), "{checks:?}");
        let shared = reads() - before;
        assert!(
            (1..=2).contains(&shared),
            "50 checks at once sent {shared} stream info reads"
        );
        let why = conn.check_incarnation(base - 1).await.expect("check");
        assert_eq!(
            reads() - before,
            shared + 1,
            "a later check used an earlier read"
        );
        assert!(why.is_some_and(|w| w.contains("recreated")));
    }

    /// The bottom layer against a real server: exact reads of the holder,
    /// and the incarnation check's three answers.
    #[tokio::test]
    async fn the_context_reads_the_holder_and_checks_the_incarnation() {
        let (_server, conn) = connected().await;
        let name = ElectionName::new("jobs").unwrap();
        assert_eq!(conn.leader(&name).await.expect("read"), None);

        let base = conn.base();
        assert_eq!(conn.check_incarnation(base).await.expect("check"), None);
        // A term won in an earlier incarnation: this one is another.
        let why = conn.check_incarnation(base - 1).await.expect("check");
        assert!(why.is_some_and(|w| w.contains("recreated")));
        // A term whose base is later than the bucket's creation: the
        // server's clock went back, so epochs could repeat.
        assert!(matches!(
            conn.check_incarnation(base + 1_000_000).await,
            Err(Error::CorruptValue { .. })
        ));
        assert_eq!(conn.base(), base, "the incarnation seen is unchanged");

        let identity = Identity::new("svc-1").unwrap();
        let value = ClaimRecord {
            identity: identity.clone(),
            nonce: 7,
            epoch: None,
            since_unix_ms: None,
            base: Some(base),
            value: None,
        };
        let revision = conn
            .kv
            .create("jobs", value.encode())
            .await
            .expect("create");
        let leader = conn.leader(&name).await.expect("read").expect("a holder");
        assert_eq!(leader.identity, identity);
        assert_eq!(leader.epoch, bucket::epoch_at(base, revision).unwrap());
        assert!(
            conn.read_exact("jobs")
                .await
                .expect("read")
                .is_some_and(|l| l.is_attempts("jobs", 7))
        );

        // A lease-set record under an election key is not a holder.
        let record = SessionRecord {
            identity,
            session: 7,
            base: Some(base),
        };
        conn.kv.put("jobs", record.encode()).await.expect("put");
        assert!(matches!(
            conn.leader(&name).await,
            Err(Error::CorruptValue { .. })
        ));
    }
}
