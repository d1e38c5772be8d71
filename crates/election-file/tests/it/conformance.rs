//! The core's conformance suite, run against the file backend.

use election_core::Error;
use election_file::{FileClaim, FileElection, FileOptions};
use election_testkit::conformance::{Backend, Observed, observe_election};
use std::time::Duration;

/// A fresh directory per test; every candidate opens the backend afresh.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn election(&self) -> FileElection {
        let options = FileOptions::default().tamper_check_interval(Duration::from_millis(20));
        FileElection::with_options(self.dir.path(), options).expect("election")
    }
}

impl Backend for Files {
    type Claim = FileClaim;

    async fn candidate(&self, name: &str, identity: &str) -> Result<FileClaim, Error> {
        let name_for_err =
            election_core::ElectionName::new(if name.is_empty() { "x" } else { name })?;
        self.election()
            .claim(name, identity)
            .map_err(|e| e.into_core(&name_for_err))
    }

    /// Replaces the claim file, the one way to take a file lock away.
    async fn take_away(&self, name: &str) -> bool {
        let path = self.dir.path().join(format!("{name}.lock"));
        std::fs::rename(&path, self.dir.path().join(format!("{name}.lock.old"))).expect("rename");
        true
    }

    async fn revoke(
        &self,
        name: &str,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::Revoked>, Error>> {
        let election = self.election();
        Some(election_core::Election::revoke(&election, name, by).await)
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Option<Result<Option<election_core::Revocation>, Error>> {
        let election = self.election();
        Some(election_core::Election::revocation(&election, name).await)
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &election_core::Identity,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election();
        Some(election_core::Election::request_transfer(&election, name, to, by).await)
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &election_core::Identity,
        priority: u32,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        let election = self.election();
        Some(election_core::Election::prefer(&election, name, candidate, priority).await)
    }

    async fn handover(&self, name: &str) -> Option<Result<Option<election_core::Handover>, Error>> {
        let election = self.election();
        Some(election_core::Election::handover(&election, name).await)
    }

    async fn observe(&self, name: &str) -> Option<Observed> {
        Some(observe_election(
            self.election(),
            name,
            Duration::from_millis(20),
        ))
    }

    async fn bad_configurations(&self) -> Vec<Result<FileClaim, Error>> {
        let name = election_core::ElectionName::new("bad").expect("name");
        let not_a_dir = self.dir.path().join("a-file");
        std::fs::write(&not_a_dir, b"x").expect("write");
        let zero_interval = FileOptions::default().tamper_check_interval(Duration::ZERO);
        vec![
            FileElection::new("").and_then(|e| e.claim("a", "b")),
            FileElection::new(&not_a_dir).and_then(|e| e.claim("a", "b")),
            FileElection::with_options(self.dir.path(), zero_interval)
                .and_then(|e| e.claim("a", "b")),
            self.election().claim("../escape", "b"),
        ]
        .into_iter()
        .map(|r| r.map_err(|e| e.into_core(&name)))
        .collect()
    }
}

election_testkit::conformance_tests!(Files::new());

impl election_testkit::keyed::KeyedBackend for Files {
    type Keys = election_core::PerKeyClaims<FileClaim>;

    /// `FileElection::lease_set`'s claims, polling every 20 ms.
    async fn keys(&self, identity: &str) -> Result<Self::Keys, Error> {
        let election = self.election();
        let id = identity.to_owned();
        let keys =
            election_core::PerKeyClaims::new(election_core::Identity::new(identity)?, move |key| {
                election
                    .claim(key.as_str(), &id)
                    .map_err(|e| e.into_core(key))
            });
        Ok(keys.with_poll_interval(Duration::from_millis(20))?)
    }

    /// A file lock is lost only by tampering with its claim file, which
    /// rule 2 does not cover: a waiting set locks the new file at once,
    /// before the holder's tamper check can see the old one replaced (the
    /// keyed suite's checker then finds the key held twice). So the loss
    /// cases only check that nothing is lost; the single suite covers the
    /// tamper check.
    async fn take_away(&self, _key: &str) -> bool {
        false
    }
}

mod keyed {
    election_testkit::keyed_conformance_tests!(super::Files::new());
}

impl election_testkit::keyed::MembershipBackend for Files {
    type Election = FileElection;

    async fn election(&self) -> FileElection {
        Files::election(self)
    }
}

mod membership {
    election_testkit::keyed_membership_tests!(super::Files::new());
}
