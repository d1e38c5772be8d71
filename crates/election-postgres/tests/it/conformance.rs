//! The test kit's conformance suites (single claims and lease sets), run
//! against the PostgreSQL backend on a real server.

use crate::common;

use std::time::Duration;

use election_core::Error;
use election_postgres::{PostgresClaim, PostgresElection, PostgresKeyedClaims, PostgresOptions};
use election_testkit::conformance::{Backend, Observed, observe_election};
use election_testkit::keyed::KeyedBackend;
use postgres_testkit::Server;

/// A fresh server per test; every candidate connects afresh.
struct Db {
    server: Server,
}

impl Db {
    fn new() -> Self {
        Db {
            server: common::server(),
        }
    }

    async fn election(&self) -> PostgresElection {
        common::open(&self.server, common::fast()).await
    }
}

fn core(e: election_postgres::Error) -> Error {
    e.into_core(&election_core::ElectionName::new("conformance").expect("name"))
}

impl Backend for Db {
    type Claim = PostgresClaim;

    async fn candidate(&self, name: &str, identity: &str) -> Result<PostgresClaim, Error> {
        self.election().await.claim(name, identity).map_err(core)
    }

    /// One opened election for all of a slot candidate's claims.
    async fn claims(&self, names: &[&str], identity: &str) -> Result<Vec<PostgresClaim>, Error> {
        let election = self.election().await;
        names
            .iter()
            .map(|n| election.claim(n, identity).map_err(core))
            .collect()
    }

    async fn take_away(&self, name: &str) -> bool {
        common::intrude(&self.server, name)
    }

    async fn revoke(
        &self,
        name: &str,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::Revoked>, Error>> {
        let election = self.election().await;
        Some(election_core::Election::revoke(&election, name, by).await)
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Option<Result<Option<election_core::Revocation>, Error>> {
        let election = self.election().await;
        Some(election_core::Election::revocation(&election, name).await)
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &election_core::Identity,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election().await;
        Some(election_core::Election::request_transfer(&election, name, to, by).await)
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &election_core::Identity,
        priority: u32,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election().await;
        Some(election_core::Election::prefer(&election, name, candidate, priority).await)
    }

    async fn handover(&self, name: &str) -> Option<Result<Option<election_core::Handover>, Error>> {
        let election = self.election().await;
        Some(election_core::Election::handover(&election, name).await)
    }

    async fn observe(&self, name: &str) -> Option<Observed> {
        Some(observe_election(
            self.election().await,
            name,
            Duration::from_millis(20),
        ))
    }

    async fn bad_configurations(&self) -> Vec<Result<PostgresClaim, Error>> {
        let s = Duration::from_secs;
        let mut out = Vec::new();
        for (ttl, renew) in [
            (s(1), s(1)),
            (s(1), s(2)),
            (Duration::ZERO, s(1)),
            (s(10), s(5)),
        ] {
            out.push(
                PostgresOptions::new(ttl, renew)
                    .map(|_| unreachable!())
                    .map_err(Error::from),
            );
        }
        out.push(
            PostgresOptions::default()
                .with_schema("Bad-Schema")
                .map(|_| unreachable!())
                .map_err(Error::from),
        );
        let bad_url =
            PostgresElection::connect("postgres://x@127.0.0.1:notaport/db", common::fast()).await;
        out.push(bad_url.and_then(|e| e.claim("a", "b")).map_err(core));
        let no_db = self.server.url().replace("/postgres", "/no_such_database");
        let no_db = PostgresElection::connect(&no_db, common::fast()).await;
        out.push(no_db.and_then(|e| e.claim("a", "b")).map_err(core));
        out.push(self.election().await.claim("bad/name", "b").map_err(core));
        out
    }
}

impl KeyedBackend for Db {
    type Keys = PostgresKeyedClaims;

    /// A set over the server connected afresh, polling every 20 ms.
    async fn keys(&self, identity: &str) -> Result<PostgresKeyedClaims, Error> {
        let identity = election_core::Identity::new(identity)?;
        PostgresKeyedClaims::new(&self.election().await, identity)
            .with_poll_interval(Duration::from_millis(20))
            .map_err(core)
    }

    async fn take_away(&self, key: &str) -> bool {
        common::intrude(&self.server, key)
    }
}

election_testkit::conformance_tests!(Db::new());

mod keyed {
    election_testkit::keyed_conformance_tests!(super::Db::new());
}

impl election_testkit::keyed::MembershipBackend for Db {
    type Election = PostgresElection;

    async fn election(&self) -> PostgresElection {
        Db::election(self).await
    }
}

mod membership {
    election_testkit::keyed_membership_tests!(super::Db::new());
}
