//! The core's conformance suites against real etcd: single claims (with
//! slots), lease sets and balanced membership, all on the shared member,
//! each case under its own prefix.

use std::time::Duration;

use election_core::Error;
use election_etcd::{EtcdClaim, EtcdElection, EtcdKeyedClaims, EtcdOptions};
use election_testkit::conformance::{Backend, Observed, observe_election};

use crate::common;

pub(crate) struct Etcd {
    endpoint: String,
    prefix: String,
}

impl Etcd {
    fn shared() -> Self {
        Etcd {
            endpoint: common::shared(),
            prefix: common::prefix("conformance"),
        }
    }

    /// The backend at `endpoints` (a cluster's, comma-separated).
    pub(crate) fn at(endpoints: String) -> Self {
        Etcd {
            endpoint: endpoints,
            prefix: common::prefix("conformance"),
        }
    }

    async fn election(&self) -> Result<EtcdElection, Error> {
        EtcdElection::connect(&self.endpoint, common::fast(&self.prefix))
            .await
            .map_err(core)
    }
}

fn core(e: election_etcd::Error) -> Error {
    e.into_core(&election_core::ElectionName::new("conformance").expect("name"))
}

impl Backend for Etcd {
    type Claim = EtcdClaim;

    async fn candidate(&self, name: &str, identity: &str) -> Result<EtcdClaim, Error> {
        self.election().await?.claim(name, identity).map_err(core)
    }

    async fn claims(&self, names: &[&str], identity: &str) -> Result<Vec<EtcdClaim>, Error> {
        let election = self.election().await?;
        names
            .iter()
            .map(|n| election.claim(n, identity).map_err(core))
            .collect()
    }

    /// The key deleted by hand: the holder's watch of its key reports it.
    async fn take_away(&self, name: &str) -> bool {
        let key = format!("{}/e/{name}", self.prefix);
        etcd_testkit::gateway::delete(&self.endpoint, key.as_bytes()).expect("a delete") == 1
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &election_core::Identity,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election().await.ok()?;
        Some(election_core::Election::request_transfer(&election, name, to, by).await)
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &election_core::Identity,
        priority: u32,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election().await.ok()?;
        Some(election_core::Election::prefer(&election, name, candidate, priority).await)
    }

    async fn revoke(
        &self,
        name: &str,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::Revoked>, Error>> {
        let election = self.election().await.ok()?;
        Some(election_core::Election::revoke(&election, name, by).await)
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Option<Result<Option<election_core::Revocation>, Error>> {
        let election = self.election().await.ok()?;
        Some(election_core::Election::revocation(&election, name).await)
    }

    async fn handover(&self, name: &str) -> Option<Result<Option<election_core::Handover>, Error>> {
        let election = self.election().await.ok()?;
        Some(election_core::Election::handover(&election, name).await)
    }

    async fn observe(&self, name: &str) -> Option<Observed> {
        let election = self.election().await.ok()?;
        Some(observe_election(election, name, Duration::from_millis(20)))
    }

    async fn bad_configurations(&self) -> Vec<Result<EtcdClaim, Error>> {
        let s = Duration::from_secs;
        let refused = |o: Result<EtcdOptions, election_core::ConfigError>| {
            o.map(|_| unreachable!("accepted")).map_err(Error::from)
        };
        let mut out = vec![
            refused(EtcdOptions::new(Duration::from_millis(500))),
            refused(EtcdOptions::new(Duration::from_millis(2500))),
            refused(EtcdOptions::new(s(3)).and_then(|o| o.renew_interval(s(2)))),
            refused(EtcdOptions::default().prefix("")),
        ];
        // No port: refused before anything is sent.
        out.push(
            EtcdElection::connect("127.0.0.1", common::fast("x"))
                .await
                .map(|_| unreachable!("connected"))
                .map_err(core),
        );
        out.push(
            self.election()
                .await
                .and_then(|e| e.claim("", "a").map_err(core)),
        );
        out
    }
}

impl election_testkit::keyed::KeyedBackend for Etcd {
    type Keys = EtcdKeyedClaims;

    async fn keys(&self, identity: &str) -> Result<EtcdKeyedClaims, Error> {
        self.election().await?.keyed_claims(identity).map_err(core)
    }

    /// An operator's revoke of the key's term (ADR 0111), as the memory
    /// backend's: the holder's watch sees its key deleted, and no set wins
    /// it while the revocation stands (at least the holder's TTL). A delete
    /// by hand left the key free at once: another set could win it before
    /// the holder's watch told it (an operator's overlap that safety.md
    /// names), and `keyed_loss_before_grant` failed now and then under
    /// `cargo test` for that reason, not for a rule.
    async fn take_away(&self, key: &str) -> bool {
        let election = self.election().await.expect("election");
        let by = election_core::Identity::new("operator").expect("identity");
        matches!(election.revoke(key, &by).await, Ok(Some(_)))
    }
}

impl election_testkit::keyed::MembershipBackend for Etcd {
    type Election = EtcdElection;

    async fn election(&self) -> EtcdElection {
        Etcd::election(self).await.expect("election")
    }
}

mod single {
    use super::*;
    election_testkit::conformance_tests!(Etcd::shared());
}

mod keyed {
    use super::*;
    election_testkit::keyed_conformance_tests!(Etcd::shared());
}

mod membership {
    use super::*;
    election_testkit::keyed_membership_tests!(Etcd::shared());
}
