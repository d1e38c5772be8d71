//! Backend URLs and opening the backend they name.
//!
//! - `file:///dir`: one host; a directory on a local filesystem.
//! - `sqlite:///path/to/app.db`: a lease row in a SQLite database.
//! - `nats://[user:password@]host:port[,host:port...][?bucket=B&replicas=N&creds=FILE&token=T&single_replica_ok=1]`.
//! - `postgres://user@host:port/db[?schema=S&ttl=D&renew=D&passfile=FILE&sslmode=M]`
//!   (or `postgresql://`): the password from `PGPASSWORD`, the passfile,
//!   `PGPASSFILE` or `~/.pgpass`, never needed on the command line.
//!
//! No URL: the file backend in the default directory, on a disk so that
//! epochs outlive a reboot (see [`crate::default_dir`]).
//!
//! What a backend's error means for `elect` is the error's own
//! ([`election_core::Classify`]), turned into an exit code in one place,
//! [`exit::failure`] (ADR 0100).

use std::time::Duration;

pub(crate) use election_url::Backend;
pub(crate) use election_url::BackendUrl as Url;
use election_url::{Opening, Settings};

use crate::default_dir::{default_dir, default_dir_path};
use crate::exit::{self, Failure};
pub(crate) use crate::timing::Timing;
use crate::timing::{flag_failure, lease_failure, refuse_timing};

fn bad(url: &str, reason: impl std::fmt::Display) -> Failure {
    let url = election_url::redact(url);
    Failure::config(format!("bad backend URL {url:?}: {reason}")).hint(
        "use file:///dir, sqlite:///path/to/db, nats://host:port?bucket=name, \
         postgres://user@host:port/db or etcd://host:port/prefix (see elect --help); \
         write %XX for a '%', '?', '#' or '&' inside a path or value",
    )
}

/// Parses a backend URL (the grammar of `election-url`, see ADR 0018 and
/// ADR 0021); a bad one is a configuration error quoting the URL with its
/// secrets redacted.
pub(crate) fn parse_url(url: &str) -> Result<Url, Failure> {
    Url::parse(url).map_err(|e| bad(url, e))
}

/// How a URL is shown in progress lines: the servers and the bucket, no
/// credentials ([`Url::shown`]).
pub(crate) fn shown_url(url: &Url) -> String {
    url.shown()
}

/// An open backend.
pub(crate) enum Opened {
    /// The backend, open.
    Ready(Backend),
    /// For an observer, a store that does not exist yet (a NATS bucket):
    /// nobody has ever been elected there. Opened again by
    /// [`Opened::ready`], on the same connection.
    Pending(Box<election_url::Pending>),
    /// A read-only command's directory or database that does not exist
    /// (or has no election tables): nobody was ever elected there, and
    /// nothing is created. Opened again by [`Opened::ready`].
    Absent(Box<Absent>),
}

/// What [`Opened::Absent`] names.
pub(crate) struct Absent {
    /// The URL, to open it again (`None`: the default directory).
    url: Option<Url>,
    /// What is missing, for a note on stderr.
    pub(crate) note: String,
}

impl Opened {
    /// A backend that did not exist when opened, opened again: `None`
    /// while it still does not (a NATS bucket, or a read-only command's
    /// directory or database).
    pub(crate) async fn ready(&self) -> Result<Option<Opened>, Failure> {
        match self {
            Opened::Pending(pending) => Ok(pending
                .ready()
                .await
                .map_err(|e| backend_failure(&e))?
                .map(Opened::Ready)),
            Opened::Absent(absent) => {
                let timing = Timing {
                    observer: true,
                    ..Timing::default()
                };
                match Opened::open(absent.url.as_ref(), timing, None).await? {
                    Opened::Absent(_) => Ok(None),
                    opened => Ok(Some(opened)),
                }
            }
            _ => Ok(None),
        }
    }

    /// Closes the backend before `elect` exits, waiting at most `bound`
    /// ([`Backend::close_within`]: SQLite checkpoints its WAL, PostgreSQL
    /// waits its close grace). Called after the term ended, never before.
    pub(crate) async fn close(&self, bound: Duration) {
        if let Opened::Ready(backend) = self {
            backend.close_within(bound).await;
        }
    }

    /// Not there yet (a bucket, a directory or a database): nobody was
    /// ever elected there.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self, Opened::Pending(..) | Opened::Absent(..))
    }

    /// How the backend is shown in progress lines (no secrets).
    pub(crate) fn shown(&self, url: Option<&Url>) -> String {
        match (url, self) {
            // With what the backend picked that the URL does not say.
            (Some(u), Opened::Ready(b)) => u.shown_opened(b),
            (Some(u), _) => shown_url(u),
            // The default directory.
            (None, Opened::Ready(b)) => b
                .local_path()
                .map(|p| format!("{}://{}", b.kind(), p.display()))
                .unwrap_or_default(),
            (None, _) => String::new(),
        }
    }

    /// Opens the backend `url` names (the default file backend for `None`).
    ///
    /// For a read-only command (`timing.observer`) nothing is created: a
    /// missing directory or database (or one without election tables)
    /// opens as [`Opened::Absent`]. For `run`, a directory or database
    /// that is created is said on stderr through `report`.
    pub(crate) async fn open(
        url: Option<&Url>,
        timing: Timing,
        report: Option<crate::report::Reporter>,
    ) -> Result<Opened, Failure> {
        let absent = |note: String| {
            Ok(Opened::Absent(Box::new(Absent {
                url: url.cloned(),
                note,
            })))
        };
        let default;
        let url = match url {
            Some(url) => url,
            None if timing.observer => {
                refuse_timing(&timing)?;
                let dir = default_dir_path()?;
                if !dir.exists() {
                    return absent(format!(
                        "the default directory {} does not exist: no election has run there",
                        dir.display()
                    ));
                }
                default = Url::file(dir);
                &default
            }
            None => {
                refuse_timing(&timing)?;
                default = Url::file(default_dir()?);
                &default
            }
        };
        let settings = Settings {
            ttl: timing.ttl,
            renew: timing.renew,
            grace: timing.grace,
            observer: timing.observer,
            operator: timing.operator,
            connect_timeout: Some(Duration::from_secs(3)),
        };
        // The lease flags, checked by the URL, worded in elect's flags.
        url.check_lease(&settings).map_err(|e| lease_failure(&e))?;
        url.check_settings(&settings).map_err(open_failure)?;
        // A candidate's directory or database that does not exist is
        // created: said on stderr (a typo shows at once).
        if !timing.observer
            && let Some(report) = &report
            && let Some((what, path)) = url.created_on_open()
            && std::fs::symlink_metadata(path).is_err()
        {
            report.event(
                "creating",
                &format!("{what} {} does not exist: creating it", path.display()),
                serde_json::json!({ "created": what, "path": path.display().to_string() }),
            );
        }
        // An observer's missing bucket is opened again later on the same
        // connection; its missing directory or database is absent.
        match url.open_or_pending(&settings).await {
            Ok(Opening::Ready(backend)) => Ok(Opened::Ready(backend)),
            Ok(Opening::Pending(pending)) => Ok(Opened::Pending(pending)),
            Err(election_url::Error::Absent { what }) => absent(format!(
                "{what} does not exist: no election has run there (check --backend)"
            )),
            Err(e) => Err(open_failure(e)),
        }
    }
}

/// Why the backend could not be opened: the backend's error, in its own
/// words (not wrapped in the URL's), answered as [`exit::failure`] does.
fn open_failure(e: election_url::Error) -> Failure {
    use election_core::ConfigError::BadSetting;
    if let election_url::Error::Config(
        c @ BadSetting {
            setting:
                "ttl" | "renew_interval" | "failover_grace" | "request_timeout" | "busy_timeout",
            ..
        },
    ) = &e
    {
        return flag_failure(c);
    }
    if let election_url::Error::Config(c) = &e {
        return Failure::config(exit::chain(c)).hint("fix the URL's options");
    }
    backend_failure(&e)
}

/// A failure of an open backend, answered as [`exit::failure`] does, in
/// the backend's own words (not wrapped in the URL's).
pub(crate) fn backend_failure(e: &election_url::Error) -> Failure {
    let mut failure = exit::failure(e);
    if let Some(inner) = e.backend_error() {
        failure.message = exit::chain(inner);
    }
    failure
}

impl From<election_core::Error> for Failure {
    /// Answered by the error's class ([`exit::failure`]).
    fn from(e: election_core::Error) -> Self {
        exit::failure(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_are_configuration_errors_with_a_hint() {
        // The grammar itself is election-url's (and tested there).
        for bad in [
            "/tmp/x",
            "file://relative",
            "ftp://x",
            "nats://host",
            "nats://h:4222?colour=red",
            "file:///d/fb?x=1",
            "file:///d/f%zz",
            "nats://h:1?bucket=a&bucket=b",
        ] {
            let f = parse_url(bad).unwrap_err();
            assert_eq!(f.code, exit::CONFIG, "{bad}");
            assert!(
                f.message.starts_with(&format!("bad backend URL {bad:?}: ")),
                "{bad}: {}",
                f.message
            );
            assert!(f.hint.is_some());
        }
    }

    #[test]
    fn secrets_are_not_shown() {
        let f = parse_url("nats://u:s3cret@h:1?token=t0ken&colour=red").unwrap_err();
        assert!(
            !f.message.contains("s3cret") && !f.message.contains("t0ken"),
            "{}",
            f.message
        );
        assert!(f.message.contains("colour"), "{}", f.message);
        let shown = shown_url(&parse_url("nats://u:s3cret@h:1?token=t0ken&bucket=b").unwrap());
        assert_eq!(shown, "nats://h:1?bucket=b");
    }
}
