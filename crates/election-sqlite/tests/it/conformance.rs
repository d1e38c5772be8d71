//! The test kit's conformance suites (single claims and lease sets), run
//! against the SQLite backend on a real database file.

use std::time::Duration;

use election_core::Error;
use election_sqlite::{SqliteClaim, SqliteElection, SqliteKeyedClaims, SqliteOptions};
use election_testkit::conformance::{Backend, Observed, observe_election};
use election_testkit::keyed::KeyedBackend;

/// A fresh database file per test; every candidate opens it afresh.
struct Db {
    dir: tempfile::TempDir,
}

fn fast() -> SqliteOptions {
    SqliteOptions::new(Duration::from_millis(600), Duration::from_millis(150)).expect("options")
}

impl Db {
    fn new() -> Self {
        Db {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    async fn election(&self) -> SqliteElection {
        // Opening the file a second time meets a holder's renewal holding
        // the write lock; past the 75 ms busy timeout (fsync stalls on a
        // loaded machine) the opening answers `Busy`, which a service
        // retries: so does the kit, a bounded number of times.
        let mut busy = 0;
        loop {
            match SqliteElection::open(self.dir.path().join("app.db"), fast()).await {
                Ok(e) => return e,
                Err(election_sqlite::Error::Busy(_)) if busy < 50 => {
                    busy += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("open (after {busy} busy answers): {e:?}"),
            }
        }
    }

    /// Another node takes the row over, as after a partition.
    async fn intrude(&self, name: &str) -> bool {
        let e = self.election().await;
        let done = sqlx::query(
            "UPDATE election_leases SET holder = 'intruder', nonce = 0, epoch = epoch + 1, version = version + 1 WHERE name = ?1",
        )
        .bind(name)
        .execute(e.pool())
        .await
        .expect("update");
        done.rows_affected() == 1
    }
}

fn core(e: election_sqlite::Error) -> Error {
    e.into_core(&election_core::ElectionName::new("conformance").expect("name"))
}

impl Backend for Db {
    type Claim = SqliteClaim;

    async fn candidate(&self, name: &str, identity: &str) -> Result<SqliteClaim, Error> {
        self.election().await.claim(name, identity).map_err(core)
    }

    /// One opened election for all of a slot candidate's claims.
    async fn claims(&self, names: &[&str], identity: &str) -> Result<Vec<SqliteClaim>, Error> {
        let election = self.election().await;
        names
            .iter()
            .map(|n| election.claim(n, identity).map_err(core))
            .collect()
    }

    async fn take_away(&self, name: &str) -> bool {
        self.intrude(name).await
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

    async fn bad_configurations(&self) -> Vec<Result<SqliteClaim, Error>> {
        let s = Duration::from_secs;
        let mut out = Vec::new();
        for (ttl, renew) in [
            (s(1), s(1)),
            (s(1), s(2)),
            (Duration::ZERO, s(1)),
            (s(10), s(5)),
        ] {
            out.push(
                SqliteOptions::new(ttl, renew)
                    .map(|_| unreachable!())
                    .map_err(Error::from),
            );
        }
        let dir_as_db = SqliteElection::open(self.dir.path(), fast()).await;
        out.push(dir_as_db.and_then(|e| e.claim("a", "b")).map_err(core));
        let missing_parent =
            SqliteElection::open(self.dir.path().join("no/such/dir/app.db"), fast()).await;
        out.push(missing_parent.and_then(|e| e.claim("a", "b")).map_err(core));
        out.push(self.election().await.claim("bad/name", "b").map_err(core));
        out
    }
}

impl KeyedBackend for Db {
    type Keys = SqliteKeyedClaims;

    /// A set over the database opened afresh, polling every 20 ms.
    async fn keys(&self, identity: &str) -> Result<SqliteKeyedClaims, Error> {
        let identity = election_core::Identity::new(identity)?;
        SqliteKeyedClaims::new(&self.election().await, identity)
            .with_poll_interval(Duration::from_millis(20))
            .map_err(core)
    }

    async fn take_away(&self, key: &str) -> bool {
        self.intrude(key).await
    }
}

election_testkit::conformance_tests!(Db::new());

mod keyed {
    election_testkit::keyed_conformance_tests!(super::Db::new());
}

impl election_testkit::keyed::MembershipBackend for Db {
    type Election = SqliteElection;

    async fn election(&self) -> SqliteElection {
        Db::election(self).await
    }
}

mod membership {
    election_testkit::keyed_membership_tests!(super::Db::new());
}
