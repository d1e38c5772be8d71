//! Backend URLs and opening the backend they name.
//!
//! - `file:///dir`: one host; a directory on a local filesystem.
//! - `sqlite:///path/to/app.db`: a lease row in a SQLite database.
//! - `nats://[user:password@]host:port[,host:port...][?bucket=B&replicas=N&creds=FILE&token=T&single_replica_ok=1]`.
//!
//! No URL: the file backend in a per-user runtime directory
//! (`$XDG_RUNTIME_DIR/elect`, else `/tmp/elect-<uid>`, mode 0700).

use std::path::{Path, PathBuf};
use std::time::Duration;

use election_file::FileElection;
use election_nats::{NatsElection, NatsOptions};
use election_sqlite::{SqliteElection, SqliteOptions};

use crate::exit::{self, Failure};

/// Lease timing flags; `None` keeps the backend's default.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timing {
    pub(crate) ttl: Option<Duration>,
    pub(crate) renew: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    /// Only reads (`leader`, `observe`): accept the bucket's own TTL.
    pub(crate) observer: bool,
}

/// What a backend URL names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Url {
    File(PathBuf),
    Sqlite(PathBuf),
    Nats(NatsUrl),
}

/// A parsed `nats://` URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NatsUrl {
    /// `nats://host:port`, one per server.
    pub(crate) servers: Vec<String>,
    pub(crate) user: Option<(String, String)>,
    pub(crate) bucket: Option<String>,
    pub(crate) replicas: Option<usize>,
    pub(crate) creds: Option<PathBuf>,
    pub(crate) token: Option<String>,
    /// `single_replica_ok=1`: the user knows an R1 bucket can lose its last
    /// writes on a host crash (no warning).
    pub(crate) single_replica_ok: bool,
}

fn bad(url: &str, reason: impl std::fmt::Display) -> Failure {
    Failure::config(format!("bad backend URL {url:?}: {reason}")).hint(
        "use file:///dir, sqlite:///path/to/db or nats://host:port?bucket=name (see elect --help)",
    )
}

fn absolute(url: &str, rest: &str) -> Result<PathBuf, Failure> {
    // `file:///dir` → `/dir`; `file://host/dir` is not supported.
    if !rest.starts_with('/') {
        return Err(bad(
            url,
            "the path must be absolute (three slashes: scheme:///path)",
        ));
    }
    if rest.len() == 1 {
        return Err(bad(url, "no path"));
    }
    Ok(PathBuf::from(rest))
}

impl Url {
    /// Parses a backend URL.
    pub(crate) fn parse(url: &str) -> Result<Url, Failure> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad(url, "no scheme (file://, sqlite:// or nats://)"))?;
        match scheme {
            "file" => Ok(Url::File(absolute(url, rest)?)),
            "sqlite" => Ok(Url::Sqlite(absolute(url, rest)?)),
            "nats" => Self::parse_nats(url, rest).map(Url::Nats),
            other => Err(bad(
                url,
                format!("unknown scheme {other:?} (file, sqlite or nats)"),
            )),
        }
    }

    fn parse_nats(url: &str, rest: &str) -> Result<NatsUrl, Failure> {
        let (hosts, query) = rest.split_once('?').unwrap_or((rest, ""));
        let hosts = hosts.trim_end_matches('/');
        let mut n = NatsUrl::default();
        let hosts = match hosts.rsplit_once('@') {
            Some((userinfo, hosts)) => {
                let (user, password) = userinfo
                    .split_once(':')
                    .ok_or_else(|| bad(url, "user info must be user:password"))?;
                n.user = Some((user.to_owned(), password.to_owned()));
                hosts
            }
            None => hosts,
        };
        for host in hosts.split(',') {
            let host = host.trim().trim_start_matches("nats://");
            let (name, port) = host
                .rsplit_once(':')
                .ok_or_else(|| bad(url, format!("{host:?} has no port")))?;
            if name.is_empty() || port.parse::<u16>().is_err() {
                return Err(bad(url, format!("{host:?} is not host:port")));
            }
            n.servers.push(format!("nats://{host}"));
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(url, format!("{pair:?} is not key=value")))?;
            match k {
                "bucket" => n.bucket = Some(v.to_owned()),
                "replicas" => {
                    n.replicas = Some(
                        v.parse()
                            .map_err(|_| bad(url, format!("replicas={v:?} is not a number")))?,
                    )
                }
                "creds" => n.creds = Some(PathBuf::from(v)),
                "token" => n.token = Some(v.to_owned()),
                "single_replica_ok" => {
                    n.single_replica_ok = match v {
                        "1" | "true" => true,
                        "0" | "false" => false,
                        _ => {
                            return Err(bad(url, format!("single_replica_ok={v:?} is not 1 or 0")));
                        }
                    }
                }
                other => {
                    return Err(bad(
                        url,
                        format!(
                            "unknown option {other:?} (bucket, replicas, creds, token, \
                             single_replica_ok)"
                        ),
                    ));
                }
            }
        }
        Ok(n)
    }

    /// How the URL is shown in progress lines (no password or token).
    pub(crate) fn shown(&self) -> String {
        match self {
            Url::File(p) => format!("file://{}", p.display()),
            Url::Sqlite(p) => format!("sqlite://{}", p.display()),
            Url::Nats(n) => {
                let mut s = n.servers.join(",");
                if let Some(b) = &n.bucket {
                    s.push_str(&format!("?bucket={b}"));
                }
                s
            }
        }
    }
}

/// The per-user default directory: `$XDG_RUNTIME_DIR/elect`, else
/// `/tmp/elect-<uid>`; created with mode 0700 if missing, and refused if
/// another user owns it.
pub(crate) fn default_dir() -> Result<PathBuf, Failure> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::getuid();
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(runtime) => Path::new(&runtime).join("elect"),
        None => PathBuf::from(format!("/tmp/elect-{uid}")),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Failure::config(format!(
                "cannot create the default directory {}: {e}",
                dir.display()
            ))
            .hint("pass --backend file:///some/dir you can write to"));
        }
    }
    let meta =
        std::fs::metadata(&dir).map_err(|e| Failure::config(format!("{}: {e}", dir.display())))?;
    if meta.uid() != uid.as_raw() {
        return Err(Failure::config(format!(
            "the default directory {} belongs to another user",
            dir.display()
        ))
        .hint("pass --backend file:///some/dir of your own"));
    }
    Ok(dir)
}

/// An open backend.
pub(crate) enum Backend {
    File(FileElection),
    Sqlite(SqliteElection),
    Nats(NatsElection),
    /// NATS for an observer, whose bucket does not exist yet: nobody has
    /// ever been elected there. Opened again by [`Backend::ready`].
    NatsPending(Box<(async_nats::Client, NatsOptions)>),
}

fn file_failure(e: election_file::Error) -> Failure {
    use election_file::Error as E;
    let message = exit::chain(&e);
    match e {
        E::Io { .. } => Failure::new(exit::UNAVAILABLE, message),
        _ => Failure::config(message)
            .hint("point --backend at a writable directory on a local filesystem"),
    }
}

pub(crate) fn sqlite_failure(e: election_sqlite::Error) -> Failure {
    use election_sqlite::Error as E;
    let message = exit::chain(&e);
    match e {
        E::Busy(_) | E::Database(_) | E::OutcomeUnknown { .. } => {
            Failure::new(exit::UNAVAILABLE, message)
                .hint("the database is busy or failing; try again later")
        }
        _ => Failure::config(message).hint("check the path and permissions of the database file"),
    }
}

pub(crate) fn nats_failure(e: election_nats::Error) -> Failure {
    use election_nats::Error as E;
    let message = exit::chain(&e);
    match e {
        E::Connect { .. } | E::Unavailable { .. } | E::OutcomeUnknown { .. } => Failure::new(
            exit::UNAVAILABLE,
            message,
        )
        .hint(
            "check that nats-server runs with JetStream enabled (nats-server -js) and is reachable",
        ),
        _ => Failure::config(message).hint("check the URL's options and the bucket's settings"),
    }
}

fn refuse_timing(backend: &str, timing: &Timing) -> Result<(), Failure> {
    if timing.ttl.is_some() || timing.renew.is_some() || timing.grace.is_some() {
        return Err(Failure::config(format!(
            "--ttl, --renew and --grace have no meaning for the {backend} backend"
        ))
        .hint("a file lock is held until the process ends or resigns: drop those flags"));
    }
    Ok(())
}

impl Backend {
    /// A pending NATS backend whose bucket now exists, opened; `None` while
    /// it still does not.
    pub(crate) async fn ready(&self) -> Result<Option<Backend>, Failure> {
        let Backend::NatsPending(pending) = self else {
            return Ok(None);
        };
        let (client, options) = &**pending;
        match NatsElection::with_client(client.clone(), options.clone()).await {
            Ok(e) => Ok(Some(Backend::Nats(e))),
            Err(election_nats::Error::NoBucket { .. }) => Ok(None),
            Err(e) => Err(nats_failure(e)),
        }
    }

    /// `elect repair-epoch`: sets the file backend's epoch record of `name`
    /// to `epoch`; other backends keep their epochs in state the library
    /// never deletes and have no such record to repair.
    pub(crate) fn repair_epoch(
        &self,
        name: &str,
        epoch: election_core::Epoch,
        reporter: crate::report::Reporter,
    ) -> Result<u8, Failure> {
        let Backend::File(election) = self else {
            return Err(Failure::config(
                "repair-epoch is for the file backend's epoch records only",
            )
            .hint("use --backend file:///dir (or no --backend for the default directory)"));
        };
        let repaired = election.repair_epoch(name, epoch).map_err(|e| match e {
            election_file::Error::ClaimHeld { .. } => {
                Failure::new(exit::UNAVAILABLE, exit::chain(&e))
                    .hint("stop every process of this election first, then repair")
            }
            election_file::Error::EpochTooLow { .. } => Failure::config(exit::chain(&e))
                .hint("give an epoch at least as high as any token your resources hold"),
            e => file_failure(e),
        })?;
        let seen = repaired
            .highest_seen
            .map_or_else(|| "none".to_owned(), |e| e.to_string());
        reporter.event(
            "repaired",
            &format!(
                "the epoch record of {name} now holds epoch {} (highest seen before: {seen}); \
                 the next term gets a higher one",
                repaired.epoch
            ),
            serde_json::json!({
                "name": name,
                "epoch": repaired.epoch.get(),
                "highest_seen": repaired.highest_seen.map(|e| e.get()),
            }),
        );
        Ok(exit::OK)
    }

    /// How the backend is shown in progress lines (no secrets).
    pub(crate) fn shown(&self, url: Option<&Url>) -> String {
        match (url, self) {
            (Some(u), _) => u.shown(),
            (None, Backend::File(e)) => format!("file://{}", e.dir().display()),
            (None, _) => String::new(),
        }
    }

    /// Opens the backend `url` names (the default file backend for `None`).
    pub(crate) async fn open(url: Option<&Url>, timing: Timing) -> Result<Backend, Failure> {
        match url {
            None => {
                refuse_timing("file", &timing)?;
                let dir = default_dir()?;
                FileElection::new(dir)
                    .map(Backend::File)
                    .map_err(file_failure)
            }
            Some(Url::File(dir)) => {
                refuse_timing("file", &timing)?;
                FileElection::new(dir.clone())
                    .map(Backend::File)
                    .map_err(file_failure)
            }
            Some(Url::Sqlite(path)) => {
                if timing.grace.is_some() {
                    return Err(Failure::config(
                        "--grace has no meaning for the sqlite backend (a contender waits a full TTL)",
                    ));
                }
                let defaults = SqliteOptions::default();
                let ttl = timing.ttl.unwrap_or(defaults.ttl());
                let renew = timing.renew.unwrap_or(if timing.ttl.is_some() {
                    ttl / 3
                } else {
                    defaults.renew_interval()
                });
                let options =
                    SqliteOptions::new(ttl, renew).map_err(|e| Failure::config(exit::chain(&e)))?;
                SqliteElection::open(path, options)
                    .await
                    .map(Backend::Sqlite)
                    .map_err(sqlite_failure)
            }
            Some(Url::Nats(n)) => {
                let mut options = match timing.ttl {
                    Some(ttl) => NatsOptions::new(ttl),
                    None => Ok(NatsOptions::default()),
                }
                .map_err(|e| Failure::config(exit::chain(&e)))?;
                let config = |e: election_core::ConfigError| Failure::config(exit::chain(&e));
                // The grace must not exceed the renew interval: lower it
                // first (to the renew interval if only that was given).
                let grace = timing
                    .grace
                    .or(timing.renew.map(|r| r.min(options.grace())));
                if let Some(grace) = grace {
                    options = options.failover_grace(grace).map_err(config)?;
                }
                if let Some(renew) = timing.renew {
                    options = options.renew_interval(renew).map_err(config)?;
                }
                options = options
                    .observer(timing.observer)
                    .single_replica_ok(n.single_replica_ok);
                if let Some(bucket) = &n.bucket {
                    options = options.bucket(bucket.clone()).map_err(config)?;
                }
                if let Some(r) = n.replicas {
                    options = options.replicas(r).map_err(config)?;
                }
                let mut connect = async_nats::ConnectOptions::new()
                    .connection_timeout(Duration::from_secs(3))
                    .ping_interval(options.renew_every());
                if let Some((user, password)) = &n.user {
                    connect = connect.user_and_password(user.clone(), password.clone());
                }
                if let Some(token) = &n.token {
                    connect = connect.token(token.clone());
                }
                if let Some(creds) = &n.creds {
                    connect = connect.credentials_file(creds).await.map_err(|e| {
                        Failure::config(format!(
                            "cannot read the NATS credentials file {}: {e}",
                            creds.display()
                        ))
                    })?;
                }
                let servers: Vec<async_nats::ServerAddr> = n
                    .servers
                    .iter()
                    .map(|s| s.parse())
                    .collect::<Result<_, _>>()
                    .map_err(|e| Failure::config(format!("bad NATS server address: {e}")))?;
                let client = connect.connect(servers).await.map_err(|e| {
                    use async_nats::ConnectErrorKind as K;
                    if matches!(e.kind(), K::AuthorizationViolation | K::Authentication) {
                        // Retrying with the same credentials cannot help.
                        return Failure::config(format!(
                            "NATS at {} refused the credentials: {}",
                            n.servers.join(","),
                            exit::chain(&e)
                        ))
                        .hint(
                            "give the credentials the server expects: ELECT_NATS_TOKEN or \
                             --nats-token-file; ELECT_NATS_USER with ELECT_NATS_PASSWORD or \
                             --nats-password-file; ELECT_NATS_CREDS or --nats-creds",
                        );
                    }
                    Failure::new(
                        exit::UNAVAILABLE,
                        format!(
                            "cannot connect to NATS at {}: {}",
                            n.servers.join(","),
                            exit::chain(&e)
                        ),
                    )
                    .hint("check that nats-server runs (with -js) and the address is right")
                })?;
                match NatsElection::with_client(client.clone(), options.clone()).await {
                    Ok(e) => Ok(Backend::Nats(e)),
                    Err(election_nats::Error::NoBucket { .. }) if options.is_observer() => {
                        Ok(Backend::NatsPending(Box::new((client, options))))
                    }
                    Err(e) => Err(nats_failure(e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_why_not() {
        assert_eq!(
            Url::parse("file:///var/lib/x").unwrap(),
            Url::File("/var/lib/x".into())
        );
        assert_eq!(
            Url::parse("sqlite:///srv/app.db").unwrap(),
            Url::Sqlite("/srv/app.db".into())
        );
        let Url::Nats(n) =
            Url::parse("nats://u:p@h1:4222,h2:4223?bucket=jobs&replicas=3&creds=/c").unwrap()
        else {
            panic!("not nats");
        };
        assert_eq!(n.servers, ["nats://h1:4222", "nats://h2:4223"]);
        assert_eq!(n.user, Some(("u".into(), "p".into())));
        assert_eq!((n.bucket.as_deref(), n.replicas), (Some("jobs"), Some(3)));
        assert_eq!(n.creds, Some(PathBuf::from("/c")));
        assert!(!n.single_replica_ok);
        let Url::Nats(n) = Url::parse("nats://h:1?single_replica_ok=1").unwrap() else {
            panic!("not nats");
        };
        assert!(n.single_replica_ok);
        for bad in [
            "/tmp/x",
            "file://relative",
            "file:///",
            "ftp://x",
            "nats://host",
            "nats://h:99999",
            "nats://h:4222?colour=red",
            "nats://h:4222?replicas=three",
            "nats://h:4222?single_replica_ok=yes",
        ] {
            let f = Url::parse(bad).unwrap_err();
            assert_eq!(f.code, exit::CONFIG, "{bad}");
            assert!(f.hint.is_some());
        }
        let shown = Url::parse("nats://u:secret@h:1?token=t0k&bucket=b")
            .unwrap()
            .shown();
        assert!(
            !shown.contains("secret") && !shown.contains("t0k"),
            "{shown}"
        );
    }
}
