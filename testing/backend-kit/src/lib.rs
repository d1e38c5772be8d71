//! The one list of backends the test drivers run on (issue 41, ADR 0102).
//!
//! A test driver (the candidate test kit's lease-set tests, torture, the
//! bench) takes a [`Kind`], starts what it needs with [`Kind::start`] (a
//! directory, a PostgreSQL server through `postgres-testkit`, a nats-server
//! or a cluster through `nats-testkit`), hands the [`Store::url`] to the
//! processes it runs (which open it with `election-url` and never look at
//! which backend it is), and injects what only some backends have through
//! the [`Faults`] trait, implemented here per backend.
//!
//! This file is the only one of the test kits that names every backend: a
//! new backend is one line in [`Kind`] (and [`for_each_kind!`]) and its arms
//! here, and every driver runs on it.
//!
//! ```
//! use backend_kit::Kind;
//!
//! assert_eq!(Kind::parse("nats-cluster"), Ok(Kind::NatsCluster));
//! assert!(Kind::ALL.iter().all(|k| Kind::parse(k.name()) == Ok(*k)));
//! assert!(!Kind::File.expires()); // a lock is held until it is freed
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use election_url::{BackendUrl, Settings};

/// A backend the test drivers run on, with the deployment it is started in
/// (one NATS server, or a 3-node cluster with R3 buckets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `election-file` in a directory.
    File,
    /// `election-sqlite` in a database file.
    Sqlite,
    /// `election-postgres` on one PostgreSQL server (postgres-testkit).
    Postgres,
    /// `election-nats` on one nats-server (nats-testkit).
    Nats,
    /// `election-nats` on a 3-node cluster with R3 buckets.
    NatsCluster,
}

/// Calls `$mac!(module_name, Variant)` once per [`Kind`], for tests written
/// once and instantiated per backend (as `conformance_tests!` is):
///
/// ```
/// macro_rules! names {
///     ($name:ident, $kind:ident) => {
///         assert_eq!(stringify!($name).replace('_', "-"), backend_kit::Kind::$kind.name());
///     };
/// }
/// backend_kit::for_each_kind!(names);
/// ```
#[macro_export]
macro_rules! for_each_kind {
    ($mac:ident) => {
        $mac!(file, File);
        $mac!(sqlite, Sqlite);
        $mac!(postgres, Postgres);
        $mac!(nats, Nats);
        $mac!(nats_cluster, NatsCluster);
    };
}

/// A name [`Kind::parse`] does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend {0:?} (file, sqlite, postgres, nats, nats-cluster)")]
pub struct UnknownKind(pub String);

/// What starting a backend's store failed on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A directory could not be made.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
    /// A nats-server could not be started or driven.
    #[error(transparent)]
    Nats(#[from] nats_testkit::Error),
    /// A PostgreSQL server could not be started or driven.
    #[error(transparent)]
    Postgres(#[from] postgres_testkit::Error),
    /// The backend could not be opened.
    #[error(transparent)]
    Open(#[from] election_url::Error),
}

/// Lease timings a driver gives every process (`--ttl-ms`, `--renew-ms`,
/// `--grace-ms`, `--poll-ms`); a backend without a setting ignores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The lease TTL.
    pub ttl: Duration,
    /// The renew interval.
    pub renew: Duration,
    /// The failover grace (NATS).
    pub grace: Duration,
    /// How often keys held elsewhere are tried.
    pub poll: Duration,
}

impl Timing {
    /// The flags of these timings, in milliseconds.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let s = Duration::from_secs(1);
    /// let t = backend_kit::Timing { ttl: 3 * s, renew: s, grace: s, poll: s / 5 };
    /// assert_eq!(t.flags()[..2], ["--ttl-ms", "3000"]);
    /// assert_eq!(t.flags().len(), 8);
    /// ```
    pub fn flags(&self) -> Vec<String> {
        [
            ("--ttl-ms", self.ttl),
            ("--renew-ms", self.renew),
            ("--grace-ms", self.grace),
            ("--poll-ms", self.poll),
        ]
        .into_iter()
        .flat_map(|(flag, d)| [flag.to_owned(), d.as_millis().to_string()])
        .collect()
    }
}

impl Kind {
    /// Every kind, in the order of [`for_each_kind!`].
    pub const ALL: [Kind; 5] = [
        Kind::File,
        Kind::Sqlite,
        Kind::Postgres,
        Kind::Nats,
        Kind::NatsCluster,
    ];

    /// The name a driver's command line takes: `file`, `sqlite`,
    /// `postgres`, `nats`, `nats-cluster`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::Nats => "nats",
            Kind::NatsCluster => "nats-cluster",
        }
    }

    /// The kind of a [`name`](Kind::name).
    pub fn parse(name: &str) -> Result<Kind, UnknownKind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| UnknownKind(name.to_owned()))
    }

    /// Whether a claim expires when its holder stops renewing it (all but
    /// the file backend, whose lock is held until the kernel frees it).
    pub fn expires(self) -> bool {
        !matches!(self, Kind::File)
    }

    /// Whether this is a replicated deployment of a backend already in the
    /// list: drivers run their replication scenarios on it, not every one.
    pub fn is_replicated(self) -> bool {
        matches!(self, Kind::NatsCluster)
    }

    /// How long after a holder died its keys may stay unclaimed by the
    /// protocol itself, with `timing`: the file backend's lock is freed
    /// at once (a contender sees it at its next poll); a SQL lease is
    /// taken once a contender saw no renewal for a full TTL (the last
    /// renewal at most a renew interval before the death, noticed within
    /// a poll, claimed at the next); a NATS session ages out within a TTL,
    /// then the failover grace runs.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use backend_kit::{Kind, Timing};
    ///
    /// let ms = Duration::from_millis;
    /// let t = Timing { ttl: ms(3000), renew: ms(1000), grace: ms(1000), poll: ms(200) };
    /// assert_eq!(Kind::File.takeover_bound(&t), ms(400));
    /// assert_eq!(Kind::Sqlite.takeover_bound(&t), ms(4400));
    /// assert_eq!(Kind::Nats.takeover_bound(&t), ms(4000));
    /// ```
    pub fn takeover_bound(self, timing: &Timing) -> Duration {
        match self {
            Kind::File => 2 * timing.poll,
            Kind::Sqlite | Kind::Postgres => timing.ttl + timing.renew + 2 * timing.poll,
            Kind::Nats | Kind::NatsCluster => timing.ttl + timing.grace,
        }
    }

    /// Starts what the backend needs, its files under a new directory in
    /// `scratch` (a directory on a real disk for real fsyncs): nothing more
    /// for the file and SQLite backends, a PostgreSQL server, a nats-server
    /// or a 3-node cluster. Blocks while servers start.
    pub fn start(self, scratch: &Path) -> Result<Store, Error> {
        let dir = tempfile::tempdir_in(scratch).map_err(|source| Error::Io {
            what: format!("create a directory in {}", scratch.display()),
            source,
        })?;
        let place = match self {
            Kind::File => Place::File(dir.path().join("election")),
            Kind::Sqlite => Place::Sqlite(dir.path().join("election.db")),
            Kind::Postgres => Place::Postgres(Box::new(postgres_testkit::Server::start()?)),
            Kind::Nats => Place::Nats(Box::new(nats_testkit::Server::start()?)),
            Kind::NatsCluster => Place::NatsCluster(nats_testkit::Cluster::start(3)?),
        };
        Ok(Store {
            kind: self,
            dir,
            place,
        })
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(name: &str) -> Result<Kind, UnknownKind> {
        Kind::parse(name)
    }
}

/// Where a started backend keeps its elections.
#[derive(Debug)]
enum Place {
    File(PathBuf),
    Sqlite(PathBuf),
    Postgres(Box<postgres_testkit::Server>),
    Nats(Box<nats_testkit::Server>),
    NatsCluster(nats_testkit::Cluster),
}

/// A started backend: its URL for the processes under test, and its
/// [`Faults`]. Dropping it stops its servers and removes its directory.
#[derive(Debug)]
pub struct Store {
    kind: Kind,
    dir: tempfile::TempDir,
    place: Place,
}

impl Store {
    /// The kind started.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The directory of this store's files (and of the driver's own).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The backend URL every process under test opens.
    pub fn url(&self) -> String {
        match &self.place {
            Place::File(dir) => BackendUrl::file(dir).to_string(),
            Place::Sqlite(db) => BackendUrl::Sqlite(db.clone()).to_string(),
            Place::Postgres(server) => server.url(),
            Place::Nats(server) => server.url(),
            Place::NatsCluster(cluster) => format!("{}?replicas=3", cluster.urls().join(",")),
        }
    }

    /// Creates what every process would create at its first open where
    /// that is a schema (SQLite, PostgreSQL), so that the processes of a
    /// scenario do not all migrate at once: they could, but that is the
    /// backend's own tests' concern, not a driver's. Nothing elsewhere (a
    /// NATS bucket's settings are the processes').
    pub async fn prepare(&self) -> Result<(), Error> {
        if matches!(self.place, Place::Sqlite(_) | Place::Postgres(_)) {
            let url = BackendUrl::parse(&self.url()).map_err(election_url::Error::from)?;
            drop(url.open(&Settings::default()).await?);
        }
        Ok(())
    }
}

/// What only some backends have, injected or checked by a driver through
/// one trait, implemented per backend by [`Store`].
pub trait Faults {
    /// Whether a client stopped now (`SIGSTOP`) keeps nothing the others
    /// need to take its claims over once they expire: SQLite's write lock
    /// (a writer stopped inside a transaction keeps it), PostgreSQL's row
    /// locks (a session idle in a transaction), nothing on NATS (the
    /// server holds no lock for a client). Always true where claims do not
    /// expire (the scenario does not apply there).
    fn frozen_client_blocks_nobody(&self) -> impl Future<Output = bool> + Send;
}

impl Faults for Store {
    async fn frozen_client_blocks_nobody(&self) -> bool {
        match &self.place {
            Place::Sqlite(db) => sqlite_write_lock_is_free(db).await,
            Place::Postgres(server) => {
                // The lease steps are single statements, which the server
                // finishes without the frozen client.
                let open = server
                    .sql(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()",
                    )
                    .expect("pg_stat_activity");
                open == "0"
            }
            Place::File(_) | Place::Nats(_) | Place::NatsCluster(_) => true,
        }
    }
}

/// Whether a writer can take the database's write lock within two seconds.
/// A running process holds it for a transaction at a time (well under a
/// second); a process stopped inside a transaction holds it until it runs
/// again.
async fn sqlite_write_lock_is_free(db: &Path) -> bool {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .busy_timeout(Duration::from_secs(2));
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("connect");
    match sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await {
        Ok(_) => {
            sqlx::query("ROLLBACK")
                .execute(&mut conn)
                .await
                .expect("rollback");
            true
        }
        Err(sqlx::Error::Database(e)) if e.message().contains("locked") => false,
        Err(e) => panic!("BEGIN IMMEDIATE: {e}"),
    }
}
