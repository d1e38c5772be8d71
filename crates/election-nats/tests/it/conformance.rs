//! The core's conformance suite against real nats-server processes: one
//! node, and a three-node cluster with an R3 bucket.

use std::time::Duration;

use election_core::Error;
use election_nats::{NatsClaim, NatsElection, NatsKeyedClaims, NatsOptions};
use election_testkit::conformance::{Backend, Observed, observe_election};
use nats_testkit::{Cluster, Server};

/// Short timings so the cases run quickly: TTL 3 s, renewal every 1 s.
fn options(replicas: usize) -> NatsOptions {
    NatsOptions::new(Duration::from_secs(3))
        .and_then(|o| o.replicas(replicas))
        .expect("options")
}

enum Servers {
    One(Server),
    Three(Cluster),
}

struct Nats {
    servers: Servers,
}

impl Nats {
    fn single() -> Self {
        Nats {
            servers: Servers::One(Server::start().expect("nats-server (see nats-testkit)")),
        }
    }

    fn cluster() -> Self {
        Nats {
            servers: Servers::Three(Cluster::start(3).expect("a 3-node nats cluster")),
        }
    }

    fn urls(&self) -> String {
        match &self.servers {
            Servers::One(s) => s.url(),
            Servers::Three(c) => c.urls().join(","),
        }
    }

    fn replicas(&self) -> usize {
        match self.servers {
            Servers::One(_) => 1,
            Servers::Three(_) => 3,
        }
    }

    async fn election(&self, options: NatsOptions) -> Result<NatsElection, election_nats::Error> {
        NatsElection::connect(&self.urls(), options).await
    }

    /// Writes `value` under `key` in `bucket` as another node would, until
    /// the node this client reached routes the bucket's subjects.
    async fn intrude(&self, bucket: &str, key: &str, value: &'static str) {
        let addrs: Vec<async_nats::ServerAddr> = self
            .urls()
            .split(',')
            .map(|u| u.parse().expect("url"))
            .collect();
        let client = async_nats::connect(addrs).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let kv = js.get_key_value(bucket).await.expect("bucket");
        // On a fresh cluster the node this client reached may not route the
        // bucket's subjects yet ("stream not found" on the publish ack):
        // try again until it does.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match kv.put(key, value.into()).await {
                Ok(_) => return,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    eprintln!("intruder put: {e}; trying again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("put: {e:?}"),
            }
        }
    }
}

/// The KV key of election `name`: each byte outside `[A-Za-z0-9_-]` as
/// `=XX`, as the backend writes it (a slot's name has a `#`).
fn kv_key(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' => (b as char).to_string(),
            _ => format!("={b:02X}"),
        })
        .collect()
}

fn core(e: election_nats::Error) -> Error {
    e.into_core(&election_core::ElectionName::new("conformance").expect("name"))
}

impl Backend for Nats {
    type Claim = NatsClaim;

    async fn candidate(&self, name: &str, identity: &str) -> Result<NatsClaim, Error> {
        self.election(options(self.replicas()))
            .await
            .map_err(core)?
            .claim(name, identity)
            .map_err(core)
    }

    /// One connection for all of a slot candidate's claims.
    async fn claims(&self, names: &[&str], identity: &str) -> Result<Vec<NatsClaim>, Error> {
        let election = self
            .election(options(self.replicas()))
            .await
            .map_err(core)?;
        names
            .iter()
            .map(|n| election.claim(n, identity).map_err(core))
            .collect()
    }

    /// Another node overwrites the key, as after a partition.
    async fn take_away(&self, name: &str) -> bool {
        let intruder = "election-nats/1\nidentity=intruder\nnonce=1\n";
        self.intrude("elections", &kv_key(name), intruder).await;
        true
    }

    async fn revoke(
        &self,
        name: &str,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::Revoked>, Error>> {
        let election = self.election(options(self.replicas())).await.ok()?;
        Some(election_core::Election::revoke(&election, name, by).await)
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Option<Result<Option<election_core::Revocation>, Error>> {
        let election = self.election(options(self.replicas())).await.ok()?;
        Some(election_core::Election::revocation(&election, name).await)
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &election_core::Identity,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election(options(self.replicas())).await.ok()?;
        Some(election_core::Election::request_transfer(&election, name, to, by).await)
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &election_core::Identity,
        priority: u32,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election(options(self.replicas())).await.ok()?;
        Some(election_core::Election::prefer(&election, name, candidate, priority).await)
    }

    async fn handover(&self, name: &str) -> Option<Result<Option<election_core::Handover>, Error>> {
        let election = self.election(options(self.replicas())).await.ok()?;
        Some(election_core::Election::handover(&election, name).await)
    }

    async fn observe(&self, name: &str) -> Option<Observed> {
        let election = self.election(options(self.replicas())).await.ok()?;
        Some(observe_election(election, name, Duration::from_millis(20)))
    }

    async fn bad_configurations(&self) -> Vec<Result<NatsClaim, Error>> {
        let s = Duration::from_secs;
        let mut out: Vec<Result<NatsClaim, Error>> = vec![
            NatsOptions::new(Duration::from_millis(500))
                .map(|_| unreachable!())
                .map_err(Error::from),
            NatsOptions::new(s(3))
                .and_then(|o| o.renew_interval(s(2)))
                .map(|_| unreachable!())
                .map_err(Error::from),
            NatsOptions::new(s(3))
                .and_then(|o| o.bucket("no.dots"))
                .map(|_| unreachable!())
                .map_err(Error::from),
        ];
        // The bucket exists with a 3 s max age; a 6 s TTL that names it
        // cannot share it (unnamed, it gets a bucket of its own: ADR 0064).
        let _ = self.election(options(self.replicas())).await.map_err(core);
        let other_ttl = NatsOptions::new(s(6))
            .and_then(|o| o.replicas(self.replicas()))
            .and_then(|o| o.bucket(election_nats::DEFAULT_BUCKET))
            .expect("options");
        out.push(
            self.election(other_ttl)
                .await
                .map_err(core)
                .and_then(|e| e.claim("a", "b").map_err(core)),
        );
        out
    }
}

impl election_testkit::keyed::KeyedBackend for Nats {
    type Keys = NatsKeyedClaims;

    async fn keys(&self, identity: &str) -> Result<NatsKeyedClaims, Error> {
        let election = self
            .election(options(self.replicas()))
            .await
            .map_err(core)?;
        // On a fresh cluster a replicated bucket may not be placeable for a
        // moment ("no suitable peers for placement, peer offline"): try
        // again until it is.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match election.keyed_claims(identity).await {
                Err(e @ election_nats::Error::Unavailable { .. })
                    if tokio::time::Instant::now() < deadline =>
                {
                    eprintln!("opening the lease-set buckets: {e}; trying again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other.map_err(core),
            }
        }
    }

    /// Another process's session record under the key, as after a
    /// partition: the holder's watch sees it and loses the key.
    async fn take_away(&self, key: &str) -> bool {
        let intruder = "election-nats/1\nidentity=intruder\nsession=1\nnonce=1\n";
        self.intrude("elections-keys", key, intruder).await;
        true
    }
}

mod single {
    use super::*;
    election_testkit::conformance_tests!(Nats::single());
}

mod cluster {
    use super::*;
    election_testkit::conformance_tests!(Nats::cluster());
}

mod keyed_single {
    use super::*;
    election_testkit::keyed_conformance_tests!(Nats::single());
}

mod keyed_cluster {
    use super::*;
    election_testkit::keyed_conformance_tests!(Nats::cluster());
}

impl election_testkit::keyed::MembershipBackend for Nats {
    type Election = NatsElection;

    async fn election(&self) -> NatsElection {
        Nats::election(self, options(self.replicas()))
            .await
            .expect("election")
    }
}

mod membership_single {
    use super::*;
    election_testkit::keyed_membership_tests!(Nats::single());
}
