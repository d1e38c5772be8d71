//! The one list of backends the test drivers run on (issue 41, ADR 0102).
//!
//! A test driver (the candidate test kit's lease-set tests, torture, the
//! bench) takes a [`Kind`], starts what it needs with [`Kind::start`] (a
//! directory, a PostgreSQL server through `postgres-testkit`, a nats-server
//! or a cluster through `nats-testkit`, an etcd member through
//! `etcd-testkit`), hands the [`Store::url`] to the
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

/// The key prefix of the etcd store's URL (its elections' keys are
/// `<prefix>/e/<name>`).
const ETCD_PREFIX: &str = "election";

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
    /// `election-etcd` on one etcd member (etcd-testkit).
    Etcd,
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
        $mac!(etcd, Etcd);
    };
}

/// As [`for_each_kind!`], for the kinds a scenario applies to:
/// `single_node` (every kind but a replicated deployment of one already
/// listed: [`Kind::is_replicated`]) or `expiring_single_node` (of those,
/// the ones whose claims expire: [`Kind::expires`]). A scenario that does
/// not apply to a kind is then not made for it, rather than made to pass
/// without checking anything.
///
/// ```
/// let mut kinds = Vec::new();
/// macro_rules! push {
///     ($name:ident, $kind:ident) => {
///         kinds.push(backend_kit::Kind::$kind);
///     };
/// }
/// backend_kit::for_each_kind_where!(expiring_single_node, push);
/// assert!(kinds.iter().all(|k| k.expires() && !k.is_replicated()));
/// ```
#[macro_export]
macro_rules! for_each_kind_where {
    (single_node, $mac:ident) => {
        $mac!(file, File);
        $mac!(sqlite, Sqlite);
        $mac!(postgres, Postgres);
        $mac!(nats, Nats);
        $mac!(etcd, Etcd);
    };
    (expiring_single_node, $mac:ident) => {
        $mac!(sqlite, Sqlite);
        $mac!(postgres, Postgres);
        $mac!(nats, Nats);
        $mac!(etcd, Etcd);
    };
}

/// A name [`Kind::parse`] does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend {0:?} (file, sqlite, postgres, nats, nats-cluster, etcd)")]
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
    /// An etcd member could not be started or driven.
    #[error(transparent)]
    Etcd(#[from] etcd_testkit::Error),
    /// The backend could not be opened.
    #[error(transparent)]
    Open(#[from] election_url::Error),
    /// A fault on the backend's own state (a lease row) could not be
    /// injected.
    #[error("{what}: {reason}")]
    Fault {
        /// What was being done.
        what: String,
        /// Why it failed.
        reason: String,
    },
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
    pub const ALL: [Kind; 6] = [
        Kind::File,
        Kind::Sqlite,
        Kind::Postgres,
        Kind::Nats,
        Kind::NatsCluster,
        Kind::Etcd,
    ];

    /// The name a driver's command line takes: `file`, `sqlite`,
    /// `postgres`, `nats`, `nats-cluster`, `etcd`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::Nats => "nats",
            Kind::NatsCluster => "nats-cluster",
            Kind::Etcd => "etcd",
        }
    }

    /// How a report names it, as a row's or a note's prefix: `file`,
    /// `SQLite`, `PostgreSQL`, `NATS`, `NATS R3`, `etcd`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Sqlite => "SQLite",
            Kind::Postgres => "PostgreSQL",
            Kind::Nats => "NATS",
            Kind::NatsCluster => "NATS R3",
            Kind::Etcd => "etcd",
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

    /// Whether the store is a directory of files on this host (the file
    /// backend: one lock file and one epoch record per election), what
    /// `elect` keeps its elections in without `--backend`.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// let dirs: Vec<Kind> = Kind::ALL.into_iter().filter(|k| k.is_directory()).collect();
    /// assert_eq!(dirs, [Kind::File]);
    /// ```
    pub fn is_directory(self) -> bool {
        matches!(self, Kind::File)
    }

    /// Whether the store is one database file on this host (SQLite): a
    /// driver can give it a second name (a hard link), and fence a
    /// resource with the same engine's fence in a database beside it.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().all(|k| !(k.is_database_file() && k.is_directory())));
    /// ```
    pub fn is_database_file(self) -> bool {
        matches!(self, Kind::Sqlite)
    }

    /// Whether the processes write a wall clock into the store (for
    /// people to read; expiry is judged on the monotonic clock) that a
    /// driver can shift in each process
    /// (`election_url::Backend::with_clock`): SQLite, PostgreSQL.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().filter(|k| k.has_wall_clock()).all(|k| k.expires()));
    /// ```
    pub fn has_wall_clock(self) -> bool {
        matches!(self, Kind::Sqlite | Kind::Postgres)
    }

    /// Whether leases are rows of a table an operator could delete
    /// ([`Faults::delete_lease_row`]): SQLite, PostgreSQL.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(!Kind::File.has_lease_rows());
    /// ```
    pub fn has_lease_rows(self) -> bool {
        matches!(self, Kind::Sqlite | Kind::Postgres)
    }

    /// Whether elections are keys of a key-value store that an operator
    /// could delete by hand while a holder's lease runs
    /// ([`Faults::delete_election_key`]): etcd.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::Etcd.has_election_keys());
    /// assert!(!Kind::Sqlite.has_election_keys()); // rows: `has_lease_rows`
    /// ```
    pub fn has_election_keys(self) -> bool {
        matches!(self, Kind::Etcd)
    }

    /// Whether the store keeps a history of revisions that an operator
    /// compacts ([`Faults::compact`]): etcd.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert_eq!(
    ///     Kind::ALL.iter().filter(|k| k.has_compaction()).collect::<Vec<_>>(),
    ///     [&Kind::Etcd]
    /// );
    /// ```
    pub fn has_compaction(self) -> bool {
        matches!(self, Kind::Etcd)
    }

    /// Whether an operator can revoke a term through the backend's
    /// `Election::revoke` (ADR 0111: every backend, etcd since its revoke
    /// key). A driver that revokes still refuses an `Unsupported` answer
    /// loudly, so a backend that loses revoke is noticed here.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().all(|k| k.revokes()));
    /// ```
    pub fn revokes(self) -> bool {
        match self {
            Kind::File | Kind::Sqlite | Kind::Postgres => true,
            Kind::Nats | Kind::NatsCluster | Kind::Etcd => true,
        }
    }

    /// Whether the deployment is one server a driver can kill and start
    /// again ([`Faults::kill_server`]): one nats-server, PostgreSQL, one
    /// etcd member (a
    /// cluster's are nodes: [`is_replicated`](Kind::is_replicated)).
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().all(|k| !(k.has_server() && k.is_replicated())));
    /// ```
    pub fn has_server(self) -> bool {
        matches!(self, Kind::Nats | Kind::Postgres | Kind::Etcd)
    }

    /// Whether the server can be paused, its sessions hanging, none
    /// ended ([`Faults::pause_server`]): PostgreSQL.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().filter(|k| k.has_pausable_server()).all(|k| k.has_server()));
    /// ```
    pub fn has_pausable_server(self) -> bool {
        matches!(self, Kind::Postgres)
    }

    /// Whether the server keeps a session per client connection that a
    /// driver can end from the server's side
    /// ([`Faults::terminate_sessions`]): PostgreSQL.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().filter(|k| k.has_sessions()).all(|k| k.has_server()));
    /// ```
    pub fn has_sessions(self) -> bool {
        matches!(self, Kind::Postgres)
    }

    /// Whether a driver puts each client behind a TCP proxy of its own,
    /// to black-hole, drop or deafen its connections (one nats-server, one
    /// etcd member: [`Faults::proxied_port`] is what the proxies forward
    /// to, [`Faults::url_through`] the URL through one).
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().filter(|k| k.is_proxied()).all(|k| k.has_server()));
    /// ```
    pub fn is_proxied(self) -> bool {
        matches!(self, Kind::Nats | Kind::Etcd)
    }

    /// The shortest lease TTL a driver may give this backend's processes,
    /// and the step a TTL must be a whole number of: etcd's leases are in
    /// whole seconds (its smallest lease, with its default election
    /// timeout, is 2 s); 1 ms elsewhere.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().all(|k| k.ttl_step() <= Duration::from_secs(1)));
    /// ```
    pub fn ttl_step(self) -> Duration {
        match self {
            Kind::Etcd => Duration::from_secs(1),
            _ => Duration::from_millis(1),
        }
    }

    /// Whether the store is buckets (NATS JetStream key-value) a driver
    /// can recreate, reconfigure, or roll back on a server's disk
    /// ([`Faults::nats_urls`], [`Faults::nats_node_mut`]).
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().filter(|k| k.is_replicated()).all(|k| k.has_buckets()));
    /// ```
    pub fn has_buckets(self) -> bool {
        matches!(self, Kind::Nats | Kind::NatsCluster)
    }

    /// Whether a lease set keeps its keys apart from the elections single
    /// candidates campaign in (NATS: buckets of their own), so that a set
    /// meant to contend with candidates for one election is made of the
    /// candidates' own claims (`PerKeyClaims`) instead.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert!(Kind::ALL.iter().filter(|k| k.lease_sets_apart()).all(|k| k.has_buckets()));
    /// ```
    pub fn lease_sets_apart(self) -> bool {
        matches!(self, Kind::Nats | Kind::NatsCluster)
    }

    /// What the deployment may add, after a server or node was killed and
    /// started again, before its clients count a TTL: PostgreSQL's crash
    /// recovery and the pools' reconnection (5 s), a cluster's new meta
    /// leader (10 s: the server's own ~6 s); nothing elsewhere.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use backend_kit::Kind;
    ///
    /// assert_eq!(Kind::File.recovery(), Duration::ZERO);
    /// assert!(Kind::ALL.iter().filter(|k| k.recovery() > Duration::ZERO).all(|k| k.expires()));
    /// ```
    pub fn recovery(self) -> Duration {
        match self {
            Kind::Postgres => Duration::from_secs(5),
            Kind::NatsCluster => Duration::from_secs(10),
            Kind::File | Kind::Sqlite | Kind::Nats | Kind::Etcd => Duration::ZERO,
        }
    }

    /// How long after a holder died its keys may stay unclaimed by the
    /// protocol itself, with `timing`: the file backend's lock is freed
    /// at once (a contender sees it at its next poll); a SQL lease is
    /// taken once a contender saw no renewal for a full TTL (the last
    /// renewal at most a renew interval before the death, noticed within
    /// a poll, claimed at the next); a NATS session ages out within a TTL,
    /// then the failover grace runs; etcd deletes a dead holder's key when
    /// its lease runs out (a TTL after its last keep-alive, plus the
    /// server's expiry check), then a woken waiter claims.
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
            Kind::Etcd => timing.ttl + timing.renew + 2 * timing.poll,
        }
    }

    /// The URL of this kind's store kept at `path` on this host (the file
    /// backend's directory, SQLite's database file, as
    /// [`Store::local_path`] gives them): for another name of a store (a
    /// hard link, a bind mount). `None` for a server's kind.
    ///
    /// ```
    /// use backend_kit::Kind;
    ///
    /// assert_eq!(Kind::File.url_at("/srv/e".as_ref()).as_deref(), Some("file:///srv/e"));
    /// assert_eq!(Kind::Postgres.url_at("/srv/e".as_ref()), None);
    /// ```
    pub fn url_at(self, path: &Path) -> Option<String> {
        match self {
            Kind::File => Some(BackendUrl::file(path).to_string()),
            Kind::Sqlite => Some(
                BackendUrl::new(election_sqlite::SqliteUrl::new(path.to_path_buf())).to_string(),
            ),
            Kind::Postgres | Kind::Nats | Kind::NatsCluster | Kind::Etcd => None,
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
        self.start_at(Dir::Temp(dir))
    }

    /// As [`start`](Kind::start), its files in `dir` itself (which must
    /// exist and is kept: a driver's run directory): the file backend's
    /// elections in `dir/election`, SQLite's database `dir/election.db`.
    pub fn start_in(self, dir: &Path) -> Result<Store, Error> {
        self.start_at(Dir::Kept(dir.to_path_buf()))
    }

    fn start_at(self, dir: Dir) -> Result<Store, Error> {
        let place = match self {
            Kind::File => Place::File(dir.path().join("election")),
            Kind::Sqlite => Place::Sqlite(dir.path().join("election.db")),
            Kind::Postgres => Place::Postgres(Box::new(postgres_testkit::Server::start()?)),
            Kind::Nats => Place::Nats(Box::new(nats_testkit::Server::start()?)),
            Kind::NatsCluster => Place::NatsCluster(nats_testkit::Cluster::start(3)?),
            Kind::Etcd => Place::Etcd(Box::new(etcd_testkit::Member::start()?)),
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
    Etcd(Box<etcd_testkit::Member>),
}

/// The directory of a store: its own (removed with it) or a driver's.
#[derive(Debug)]
enum Dir {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl Dir {
    fn path(&self) -> &Path {
        match self {
            Dir::Temp(dir) => dir.path(),
            Dir::Kept(dir) => dir,
        }
    }
}

/// A started backend: its URL for the processes under test, and its
/// [`Faults`]. Dropping it stops its servers and removes its directory
/// (unless it was [`Kind::start_in`] a driver's).
#[derive(Debug)]
pub struct Store {
    kind: Kind,
    dir: Dir,
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
            Place::File(path) | Place::Sqlite(path) => {
                self.kind.url_at(path).expect("a store on this host")
            }
            Place::Postgres(server) => server.url(),
            Place::Nats(server) => server.url(),
            Place::NatsCluster(cluster) => format!("{}?replicas=3", cluster.urls().join(",")),
            Place::Etcd(member) => format!("etcd://{}/{ETCD_PREFIX}", member.endpoint()),
        }
    }

    /// What keeps the elections on this host: the file backend's
    /// directory, SQLite's database file; `None` for a server's store.
    ///
    /// ```
    /// # fn main() -> Result<(), backend_kit::Error> {
    /// let scratch = tempfile::tempdir().expect("a directory");
    /// let store = backend_kit::Kind::Sqlite.start_in(scratch.path())?;
    /// assert_eq!(store.local_path(), Some(scratch.path().join("election.db").as_path()));
    /// # Ok(()) }
    /// ```
    pub fn local_path(&self) -> Option<&Path> {
        match &self.place {
            Place::File(path) | Place::Sqlite(path) => Some(path),
            Place::Postgres(_) | Place::Nats(_) | Place::NatsCluster(_) | Place::Etcd(_) => None,
        }
    }

    /// The directory on this host holding the elections' files (the file
    /// backend's directory, the directory of SQLite's database), for a
    /// driver to reach them another way (a bind mount of it, with
    /// [`url_in`](Store::url_in)); `None` for a server's store.
    ///
    /// ```
    /// # fn main() -> Result<(), backend_kit::Error> {
    /// let scratch = tempfile::tempdir().expect("a directory");
    /// let store = backend_kit::Kind::File.start_in(scratch.path())?;
    /// assert_eq!(store.local_dir(), Some(scratch.path().join("election").as_path()));
    /// # Ok(()) }
    /// ```
    pub fn local_dir(&self) -> Option<&Path> {
        match &self.place {
            Place::File(dir) => Some(dir),
            Place::Sqlite(db) => db.parent(),
            Place::Postgres(_) | Place::Nats(_) | Place::NatsCluster(_) | Place::Etcd(_) => None,
        }
    }

    /// The URL of this store reached through `dir` standing in for its
    /// [`local_dir`](Store::local_dir) (the same files under `dir`, e.g.
    /// a bind mount); `None` for a server's store.
    ///
    /// ```
    /// # fn main() -> Result<(), backend_kit::Error> {
    /// let scratch = tempfile::tempdir().expect("a directory");
    /// let store = backend_kit::Kind::Sqlite.start_in(scratch.path())?;
    /// assert_eq!(store.url_in("/mnt/other".as_ref()).as_deref(), Some("sqlite:///mnt/other/election.db"));
    /// let store = backend_kit::Kind::File.start_in(scratch.path())?;
    /// assert_eq!(store.url_in("/mnt/other".as_ref()).as_deref(), Some("file:///mnt/other"));
    /// # Ok(()) }
    /// ```
    pub fn url_in(&self, dir: &Path) -> Option<String> {
        let local = self.local_path()?;
        let within = local.strip_prefix(self.local_dir()?).ok()?;
        if within.as_os_str().is_empty() {
            // The store is the directory itself (no trailing `/`).
            return self.kind.url_at(dir);
        }
        self.kind.url_at(&dir.join(within))
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
/// one trait, implemented per backend by [`Store`]. A fault that does not
/// apply to a backend does nothing there (and says so: `false`, `None`).
pub trait Faults {
    /// Whether a client stopped now (`SIGSTOP`) keeps nothing the others
    /// need to take its claims over once they expire: SQLite's write lock
    /// (a writer stopped inside a transaction keeps it), PostgreSQL's row
    /// locks (a session idle in a transaction), nothing on NATS (the
    /// server holds no lock for a client). Always true where claims do not
    /// expire (the scenario does not apply there).
    fn frozen_client_blocks_nobody(&self) -> impl Future<Output = bool> + Send;

    /// The name of the one server that [`kill_server`](Faults::kill_server)
    /// kills (`nats`, `postgres`); `None` without one (file, SQLite, and a
    /// cluster, whose nodes are [`kill_node`](Faults::kill_node)'s).
    fn server(&self) -> Option<&'static str>;

    /// SIGKILLs the one server (nothing without one). Blocks.
    fn kill_server(&mut self) -> Result<(), Error>;

    /// Starts the killed server again on its port and data. Blocks.
    fn restart_server(&mut self) -> Result<(), Error>;

    /// The name of the server that [`pause_server`](Faults::pause_server)
    /// stops (`postgres`); `None` elsewhere.
    fn pausable_server(&self) -> Option<&'static str>;

    /// SIGSTOPs the PostgreSQL server (its sessions hang, none ends);
    /// nothing elsewhere. Blocks.
    fn pause_server(&mut self) -> Result<(), Error>;

    /// SIGCONTs the paused server. Blocks.
    fn resume_server(&mut self) -> Result<(), Error>;

    /// The port of the server whose sessions
    /// [`terminate_sessions`](Faults::terminate_sessions) ends
    /// (PostgreSQL's); `None` elsewhere.
    fn session_port(&self) -> Option<u16>;

    /// Ends the server's sessions of the clients connected from the local
    /// `ports` (`pg_terminate_backend`): the server pids ended, in order,
    /// comma-separated (empty when `ports` is, or elsewhere). Blocks.
    fn terminate_sessions(&self, ports: &[u16]) -> Result<String, Error>;

    /// Whether leases are rows of a table an operator could delete
    /// ([`delete_lease_row`](Faults::delete_lease_row)): SQLite,
    /// PostgreSQL.
    fn lease_rows(&self) -> bool;

    /// Deletes `election`'s lease row, as an operator would by hand, then
    /// tries to delete its epoch record too (a separate statement): the
    /// backend's triggers must refuse that (ADR 0039). Returns what
    /// happened to the epoch record (`epoch-record-refused`,
    /// `epoch-record-deleted=N`, `epoch-record-error=...`) and to the lease
    /// sets' heartbeats, all deleted too (`heartbeats-deleted=N`, ADR 0110),
    /// for a history; `None` where leases are no rows.
    fn delete_lease_row(
        &self,
        election: &str,
    ) -> impl Future<Output = Result<Option<String>, Error>> + Send;

    /// Deletes `election`'s key by hand, as an operator would, while its
    /// holder's lease still runs (etcd's `<prefix>/e/<name>`, the lease
    /// left alone). Returns what happened, for a history (`deleted=N`);
    /// `None` where elections are no such keys
    /// ([`Kind::has_election_keys`]), which the default does.
    fn delete_election_key(
        &self,
        election: &str,
    ) -> impl Future<Output = Result<Option<String>, Error>> + Send {
        let _ = election;
        std::future::ready(Ok(None))
    }

    /// Compacts the store's history up to its revision now, as an
    /// operator (or the server's auto-compaction) would: every watch
    /// started at an older revision is cancelled. Returns what happened,
    /// for a history (`revision=N`); `None` where there is no such history
    /// ([`Kind::has_compaction`]), which the default does.
    fn compact(&self) -> impl Future<Output = Result<Option<String>, Error>> + Send {
        std::future::ready(Ok(None))
    }

    /// The NATS client port of the one nats-server (a driver's proxies
    /// forward to it); `None` elsewhere.
    fn nats_client_port(&self) -> Option<u16>;

    /// The port a driver's per-client proxies forward to (the one
    /// server's client port: NATS, etcd); `None` elsewhere.
    fn proxied_port(&self) -> Option<u16>;

    /// This store's URL reached through a proxy on `127.0.0.1:port`
    /// instead of its server; `None` where clients are not proxied.
    fn url_through(&self, port: u16) -> Option<String>;

    /// The NATS servers' URLs, comma-separated (the one server, or every
    /// node of the cluster), for a driver's own connections; `None`
    /// elsewhere.
    fn nats_urls(&self) -> Option<String>;

    /// The nats-server `node` of the cluster (the one server, whatever
    /// `node`); `None` elsewhere.
    fn nats_node_mut(&mut self, node: usize) -> Option<&mut nats_testkit::Server>;

    /// How many nodes the node faults pick from: the cluster's; 0
    /// elsewhere.
    fn nodes(&self) -> usize;

    /// The name of node `node` of the cluster.
    fn node_name(&self, node: usize) -> Option<String>;

    /// The node that is the cluster's meta leader (waiting for one).
    /// Blocks.
    fn meta_leader(&self) -> Result<usize, Error>;

    /// SIGKILLs node `node` of the cluster. Blocks.
    fn kill_node(&mut self, node: usize) -> Result<(), Error>;

    /// Starts node `node` of the cluster again. Blocks.
    fn restart_node(&mut self, node: usize) -> Result<(), Error>;
}

/// `f`, letting the runtime move its other tasks off this thread while it
/// blocks where it can (a multi-thread runtime).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
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
            Place::File(_) | Place::Nats(_) | Place::NatsCluster(_) | Place::Etcd(_) => true,
        }
    }

    fn server(&self) -> Option<&'static str> {
        self.kind.has_server().then(|| self.kind.name())
    }

    fn kill_server(&mut self) -> Result<(), Error> {
        match &mut self.place {
            Place::Nats(server) => server.kill()?,
            Place::Postgres(server) => server.kill()?,
            Place::Etcd(member) => member.kill()?,
            Place::File(_) | Place::Sqlite(_) | Place::NatsCluster(_) => {}
        }
        Ok(())
    }

    fn restart_server(&mut self) -> Result<(), Error> {
        match &mut self.place {
            Place::Nats(server) => server.restart()?,
            Place::Postgres(server) => server.restart()?,
            Place::Etcd(member) => member.restart()?,
            Place::File(_) | Place::Sqlite(_) | Place::NatsCluster(_) => {}
        }
        Ok(())
    }

    fn pausable_server(&self) -> Option<&'static str> {
        self.kind.has_pausable_server().then(|| self.kind.name())
    }

    fn pause_server(&mut self) -> Result<(), Error> {
        if let Place::Postgres(server) = &mut self.place {
            server.pause()?;
        }
        Ok(())
    }

    fn resume_server(&mut self) -> Result<(), Error> {
        if let Place::Postgres(server) = &mut self.place {
            server.resume()?;
        }
        Ok(())
    }

    fn session_port(&self) -> Option<u16> {
        match &self.place {
            Place::Postgres(server) => Some(server.port()),
            _ => None,
        }
    }

    fn terminate_sessions(&self, ports: &[u16]) -> Result<String, Error> {
        let Place::Postgres(server) = &self.place else {
            return Ok(String::new());
        };
        if ports.is_empty() {
            return Ok(String::new());
        }
        let list = ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",");
        Ok(server.sql(&format!(
            "SELECT coalesce(string_agg(pid::text, ',' ORDER BY pid), '') \
             FROM (SELECT pid FROM pg_stat_activity \
             WHERE client_addr = '127.0.0.1' AND client_port IN ({list}) \
             AND pid <> pg_backend_pid() OFFSET 0) s \
             WHERE pg_terminate_backend(pid)"
        ))?)
    }

    fn lease_rows(&self) -> bool {
        self.kind.has_lease_rows()
    }

    async fn delete_lease_row(&self, election: &str) -> Result<Option<String>, Error> {
        match &self.place {
            Place::Sqlite(db) => sqlite_delete_lease_row(db, election)
                .await
                .map(Some)
                .map_err(|reason| Error::Fault {
                    what: "delete the lease row".to_owned(),
                    reason,
                }),
            Place::Postgres(server) => {
                let schema = election_postgres::DEFAULT_SCHEMA;
                blocking(|| {
                    server.sql(&format!(
                        "DELETE FROM {schema}.leases WHERE name = '{election}'"
                    ))
                })?;
                let record = match blocking(|| {
                    server.sql(&format!(
                        "DELETE FROM {schema}.epochs WHERE name = '{election}'"
                    ))
                }) {
                    Ok(out) => format!("epoch-record-deleted={}", out.replace(' ', "_")),
                    Err(e) if e.to_string().contains("refused") => {
                        "epoch-record-refused".to_owned()
                    }
                    Err(e) => format!("epoch-record-error={}", e.to_string().replace(' ', "_")),
                };
                // And every lease set's heartbeat (ADR 0110): takeovers
                // then wait out the per-row rule until the sets beat again.
                let beats = blocking(|| {
                    server.sql(&format!(
                        "WITH d AS (DELETE FROM {schema}.heartbeats RETURNING 1) SELECT count(*) FROM d"
                    ))
                })?;
                Ok(Some(format!("{record} heartbeats-deleted={beats}")))
            }
            Place::File(_) | Place::Nats(_) | Place::NatsCluster(_) | Place::Etcd(_) => Ok(None),
        }
    }

    async fn delete_election_key(&self, election: &str) -> Result<Option<String>, Error> {
        let Place::Etcd(member) = &self.place else {
            return Ok(None);
        };
        // `election-etcd`'s layout: `<prefix>/e/<name>` (ADR 0109).
        let key = format!("{ETCD_PREFIX}/e/{election}");
        let deleted =
            blocking(|| etcd_testkit::gateway::delete(&member.endpoint(), key.as_bytes()))?;
        Ok(Some(format!("deleted={deleted}")))
    }

    async fn compact(&self) -> Result<Option<String>, Error> {
        let Place::Etcd(member) = &self.place else {
            return Ok(None);
        };
        let endpoint = member.endpoint();
        blocking(|| {
            let now = etcd_testkit::gateway::revision(&endpoint)?;
            match etcd_testkit::gateway::compact(&endpoint, now) {
                Ok(()) => Ok(Some(format!("revision={now}"))),
                // Nothing written since the last compaction.
                Err(e)
                    if e.to_string()
                        .contains("required revision has been compacted") =>
                {
                    Ok(Some(format!("revision={now} already-compacted")))
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    fn nats_client_port(&self) -> Option<u16> {
        match &self.place {
            Place::Nats(server) => Some(server.client_port()),
            _ => None,
        }
    }

    fn proxied_port(&self) -> Option<u16> {
        match &self.place {
            Place::Nats(server) => Some(server.client_port()),
            Place::Etcd(member) => Some(member.client_port()),
            _ => None,
        }
    }

    fn url_through(&self, port: u16) -> Option<String> {
        match &self.place {
            Place::Nats(_) => Some(format!("nats://127.0.0.1:{port}")),
            Place::Etcd(_) => Some(format!("etcd://127.0.0.1:{port}/{ETCD_PREFIX}")),
            _ => None,
        }
    }

    fn nats_urls(&self) -> Option<String> {
        match &self.place {
            Place::Nats(server) => Some(server.url()),
            Place::NatsCluster(cluster) => Some(cluster.urls().join(",")),
            Place::File(_) | Place::Sqlite(_) | Place::Postgres(_) | Place::Etcd(_) => None,
        }
    }

    fn nats_node_mut(&mut self, node: usize) -> Option<&mut nats_testkit::Server> {
        match &mut self.place {
            Place::Nats(server) => Some(&mut **server),
            Place::NatsCluster(cluster) => Some(cluster.node_mut(node)),
            Place::File(_) | Place::Sqlite(_) | Place::Postgres(_) | Place::Etcd(_) => None,
        }
    }

    fn nodes(&self) -> usize {
        match &self.place {
            Place::NatsCluster(cluster) => cluster.nodes().len(),
            _ => 0,
        }
    }

    fn node_name(&self, node: usize) -> Option<String> {
        match &self.place {
            Place::NatsCluster(cluster) => Some(cluster.node(node).name().to_owned()),
            _ => None,
        }
    }

    fn meta_leader(&self) -> Result<usize, Error> {
        match &self.place {
            Place::NatsCluster(cluster) => {
                let leader = cluster.wait_for_meta_leader()?;
                Ok(cluster.index_of(&leader).unwrap_or(0))
            }
            _ => Ok(0),
        }
    }

    fn kill_node(&mut self, node: usize) -> Result<(), Error> {
        if let Place::NatsCluster(cluster) = &mut self.place {
            cluster.kill(node)?;
        }
        Ok(())
    }

    fn restart_node(&mut self, node: usize) -> Result<(), Error> {
        if let Place::NatsCluster(cluster) = &mut self.place {
            cluster.restart(node)?;
        }
        Ok(())
    }
}

/// Deletes `election`'s row from `election_leases` in the SQLite
/// database `db`, then tries its `election_epochs` record (see
/// [`Faults::delete_lease_row`]).
async fn sqlite_delete_lease_row(db: &Path, election: &str) -> Result<String, String> {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    let options = SqliteConnectOptions::new()
        .filename(db)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .map_err(|e| e.to_string())?;
    let deleted = sqlx::query("DELETE FROM election_leases WHERE name = ?1")
        .bind(election)
        .execute(&pool)
        .await
        .map_err(|e| e.to_string());
    let record = match sqlx::query("DELETE FROM election_epochs WHERE name = ?1")
        .bind(election)
        .execute(&pool)
        .await
    {
        Ok(r) => format!("epoch-record-deleted={}", r.rows_affected()),
        Err(e) if e.to_string().contains("refused") => "epoch-record-refused".to_owned(),
        Err(e) => format!("epoch-record-error={}", e.to_string().replace(' ', "_")),
    };
    // And every lease set's heartbeat (ADR 0110).
    let beats = match sqlx::query("DELETE FROM election_heartbeats")
        .execute(&pool)
        .await
    {
        Ok(r) => format!("heartbeats-deleted={}", r.rows_affected()),
        Err(e) => format!("heartbeats-error={}", e.to_string().replace(' ', "_")),
    };
    pool.close().await;
    deleted.map(|_| format!("{record} {beats}"))
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

#[cfg(test)]
mod tests {
    use super::Kind;

    /// The kinds `$mac!` is called with, in order.
    macro_rules! collect {
        ($($how:tt)*) => {{
            let mut kinds = Vec::new();
            macro_rules! push {
                ($name:ident, $kind:ident) => {
                    kinds.push(Kind::$kind);
                };
            }
            $($how)*;
            kinds
        }};
    }

    #[test]
    fn the_filtered_lists_are_the_kinds_with_those_properties() {
        let all = collect!(crate::for_each_kind!(push));
        assert_eq!(all, Kind::ALL);
        let single = collect!(crate::for_each_kind_where!(single_node, push));
        let want: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| !k.is_replicated())
            .collect();
        assert_eq!(single, want);
        let expiring = collect!(crate::for_each_kind_where!(expiring_single_node, push));
        let want: Vec<Kind> = want.into_iter().filter(|k| k.expires()).collect();
        assert_eq!(expiring, want);
    }
}
