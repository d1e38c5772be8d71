//! The SQLite backend behind `election-url`'s boundary
//! ([`election_driver`]): `sqlite:///path/to/app.db` parsed
//! ([`SqliteUrl`]), opened, and what only SQLite has among the leased
//! backends (a same-host lock a child may inherit).

use std::any::Any;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use election_core::Clock;
use election_driver::grammar::{absolute, encode, query, split_query};
use election_driver::{
    AnyKeyedClaims, Driver, Error, LeaseCheck, LeaseTiming, Opened, ParseError, Settings, Target,
    Warning,
};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::{SqliteElection, SqliteKeyedClaims, SqliteOptions};

/// The SQLite backend's entry in `election-url`'s table of schemes:
/// `sqlite:///path/to/app.db`, no options.
///
/// ```
/// use election_driver::Driver;
///
/// let url = election_sqlite::SqliteDriver.parse("/srv/app.db")?;
/// assert_eq!(url.scheme(), "sqlite");
/// assert!(election_sqlite::SqliteDriver.parse("/srv/app.db?mode=ro").is_err());
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SqliteDriver;

impl Driver for SqliteDriver {
    fn schemes(&self) -> &'static [&'static str] {
        &["sqlite"]
    }

    fn parse(&self, rest: &str) -> Result<Box<dyn Target>, ParseError> {
        let (path, q) = split_query(rest)?;
        query("sqlite", q, &[])?;
        Ok(Box::new(SqliteUrl::new(absolute(path)?)))
    }

    fn probe(&self) -> election_core::Probe {
        election_core::probe::<crate::Error>
    }
}

/// A parsed `sqlite://` URL: `sqlite:///path/to/app.db`, the database
/// file (absolute), percent-decoded.
///
/// ```
/// use election_driver::Driver;
/// use election_sqlite::{SqliteDriver, SqliteUrl};
///
/// let url = SqliteDriver.parse("/srv/my%20app.db")?;
/// let sqlite = url.as_any().downcast_ref::<SqliteUrl>().expect("a sqlite URL");
/// assert_eq!(sqlite.path, std::path::Path::new("/srv/my app.db"));
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteUrl {
    /// The database file (absolute).
    pub path: PathBuf,
}

impl SqliteUrl {
    /// `sqlite://path`.
    ///
    /// ```
    /// let url = election_sqlite::SqliteUrl::new("/srv/app.db");
    /// assert_eq!(url.path, std::path::Path::new("/srv/app.db"));
    /// ```
    pub fn new(path: impl Into<PathBuf>) -> SqliteUrl {
        SqliteUrl { path: path.into() }
    }

    /// The SQLite options `settings` give: the backend's defaults, a
    /// renew interval of a third of a given TTL.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut settings = election_driver::Settings::default();
    /// settings.ttl = Some(Duration::from_secs(9));
    /// let options = election_sqlite::SqliteUrl::new("/srv/app.db").options(&settings)?;
    /// assert_eq!(options.renew_interval(), Duration::from_secs(3)); // a third of the TTL
    /// # Ok(()) }
    /// ```
    pub fn options(&self, settings: &Settings) -> Result<SqliteOptions, Error> {
        Ok(match (settings.ttl, settings.renew) {
            (None, None) => SqliteOptions::default(),
            (Some(ttl), None) => SqliteOptions::new(ttl, ttl / 3)?,
            (None, Some(renew)) => SqliteOptions::new(crate::DEFAULT_TTL, renew)?,
            (Some(ttl), Some(renew)) => SqliteOptions::new(ttl, renew)?,
        })
    }
}

impl Target for SqliteUrl {
    fn scheme(&self) -> &'static str {
        "sqlite"
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, _whole: bool) -> fmt::Result {
        write!(
            f,
            "sqlite://{}",
            encode(self.path.as_os_str().as_bytes(), true)
        )
    }

    fn clone_target(&self) -> Box<dyn Target> {
        Box::new(self.clone())
    }

    fn lease_settings(&self) -> &'static [&'static str] {
        &["ttl", "renew"]
    }

    fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck> {
        let scheme = "sqlite";
        if settings.grace.is_some() {
            return Err(LeaseCheck::NoGrace { scheme });
        }
        let defaults = SqliteOptions::default();
        let ttl = settings.ttl.unwrap_or(defaults.ttl());
        let renew = settings.renew.unwrap_or(if settings.ttl.is_some() {
            ttl / 3
        } else {
            defaults.renew_interval()
        });
        election_driver::check_lease(
            scheme,
            settings.ttl.is_some(),
            ttl,
            renew,
            Duration::from_millis(10),
        )
    }

    fn check_settings(&self, settings: &Settings) -> Result<(), Error> {
        self.options(settings).map(drop)
    }

    fn created_on_open(&self) -> Option<(&'static str, &Path)> {
        // Its directory must exist (else opening fails).
        if self.path.parent().is_some_and(Path::is_dir) {
            Some(("the database", &self.path))
        } else {
            None
        }
    }

    fn shown(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }

    fn open<'a>(&'a self, settings: &'a Settings) -> BoxFuture<'a, Result<Box<dyn Opened>, Error>> {
        async move {
            let options = self.options(settings)?;
            if settings.observer {
                if std::fs::symlink_metadata(&self.path).is_err() {
                    return Err(Error::Absent {
                        what: format!("the database {}", self.path.display()),
                    });
                }
                let Some(reader) = SqliteElection::open_read_only(&self.path, options).await?
                else {
                    return Err(Error::Absent {
                        what: format!("the election tables of {}", self.path.display()),
                    });
                };
                if !settings.operator {
                    return Ok(Box::new(reader) as Box<dyn Opened>);
                }
                // An operator (a revoke) writes to the tables it found.
                reader.pool().close().await;
            }
            let election = SqliteElection::open(&self.path, options).await?;
            Ok(Box::new(election) as Box<dyn Opened>)
        }
        .boxed()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Error {
        Error::backend("the SQLite backend", e)
    }
}

impl Opened for SqliteElection {
    /// The revocation and the marks in `election_fences` in one
    /// transaction ([`SqliteElection::revoke_fencing`]).
    fn revoke_fencing<'a>(
        &'a self,
        name: &'a str,
        by: &'a election_core::Identity,
        resources: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<election_core::Revoked>, Error>> {
        async move { Ok(SqliteElection::revoke_fencing(self, name, by, resources).await?) }.boxed()
    }

    fn warnings(&self) -> Vec<Warning> {
        match self.without_host_locks() {
            None => Vec::new(),
            Some(why) => vec![Warning::new(
                format!(
                    "no same-host lock for the SQLite database ({why}): waiters poll for the \
                     lease, a dead holder is taken over only after a full TTL, and if the \
                     filesystem is shared with another host SQLite's own locking may not hold. \
                     Keep the database on a local disk; for many hosts use postgres:// or \
                     nats://"
                ),
                Vec::new(),
            )],
        }
    }

    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn keyed_claims<'a>(
        &'a self,
        identity: &'a str,
        poll: Option<Duration>,
    ) -> BoxFuture<'a, Result<AnyKeyedClaims, Error>> {
        async move {
            let identity = election_sql::lease_set_identity(identity)?;
            let claims = SqliteKeyedClaims::new(self, identity);
            let claims = match poll {
                Some(poll) => claims.with_poll_interval(poll)?,
                None => claims,
            };
            Ok(AnyKeyedClaims::new(claims))
        }
        .boxed()
    }

    fn inheritable_lock(&self, name: &str) -> Option<PathBuf> {
        self.host_lock_path(name)
    }

    fn lease_timing(&self) -> Option<LeaseTiming> {
        let o = self.options();
        Some(LeaseTiming::new(
            o.ttl(),
            o.renew_interval(),
            o.margin(),
            Duration::ZERO,
        ))
    }

    fn close_within(&self, bound: Duration) -> BoxFuture<'_, ()> {
        async move {
            // The last connection to close checkpoints the WAL.
            let _ = tokio::time::timeout(bound, self.pool().close()).await;
        }
        .boxed()
    }

    fn with_clock(&self, clock: Arc<dyn Clock>) -> Result<Box<dyn Opened>, Error> {
        Ok(Box::new(self.clone().with_clock(clock)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use election_testkit::display::assert_chains;
    use election_testkit::driver::{absolute_path, round_trip};
    use proptest::prelude::*;

    use super::*;

    fn parse(rest: &str) -> Result<SqliteUrl, ParseError> {
        SqliteDriver.parse(rest).map(|t| {
            t.as_any()
                .downcast_ref::<SqliteUrl>()
                .expect("a sqlite URL")
                .clone()
        })
    }

    struct Printed<'a>(&'a dyn Target);

    impl fmt::Display for Printed<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.write(f, false)
        }
    }

    #[test]
    fn sqlite_urls_parse_or_say_why_not() {
        assert_eq!(parse("/srv/app.db").unwrap(), SqliteUrl::new("/srv/app.db"));
        assert_eq!(
            parse("/srv/a+b%23.db").unwrap(),
            SqliteUrl::new("/srv/a+b#.db")
        );
        for bad in [
            "/d/app.db?volatile_ok=1",
            "/d/app.db?mode=ro",
            "relative.db",
            "/",
            "/d/app.db#x",
            "/d/f%zz",
            "/d/f%00b",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
        assert_eq!(
            parse("/d?x=1").unwrap_err().to_string(),
            "unknown option \"x\" (sqlite:// URLs take no options)"
        );
    }

    #[test]
    fn printing_and_showing() {
        let url = SqliteUrl::new("/srv/my app?.db");
        assert_eq!(Printed(&url).to_string(), "sqlite:///srv/my%20app%3F.db");
        assert_eq!(url.shown(), "sqlite:///srv/my app?.db");
        let back = parse(&Printed(&url).to_string()["sqlite://".len()..]).unwrap();
        assert_eq!(back, url);
    }

    proptest! {
        #[test]
        fn print_then_parse_is_the_same_url(path in absolute_path()) {
            let url = SqliteUrl::new(path);
            round_trip(&SqliteDriver, &url)?;
            let whole = Printed(&url).to_string();
            prop_assert_eq!(parse(&whole["sqlite://".len()..]), Ok(url), "{}", whole);
        }
    }

    #[test]
    fn the_sqlite_backends_errors_say_what_and_why() {
        assert_chains([(
            Error::from(crate::Error::FileReplaced {
                path: PathBuf::from("/srv/app.db"),
            }),
            "the SQLite backend: the database file /srv/app.db was deleted or replaced after it \
             was opened; reopen it (epochs in a replaced file can repeat)",
        )]);
    }

    #[test]
    fn the_lease_settings_are_checked() {
        let url = SqliteUrl::new("/d/app.db");
        let ms = Duration::from_millis;
        let mut s = Settings::default();
        assert_eq!(url.check_lease(&s), Ok(()));
        s.grace = Some(ms(1));
        assert_eq!(
            url.check_lease(&s),
            Err(LeaseCheck::NoGrace { scheme: "sqlite" })
        );
        s.grace = None;
        s.ttl = Some(ms(5));
        assert_eq!(
            url.check_lease(&s),
            Err(LeaseCheck::TtlTooShort {
                scheme: "sqlite",
                ttl: ms(5),
                given: true,
                min: ms(10)
            })
        );
        s.ttl = Some(ms(100));
        s.renew = Some(ms(50));
        assert!(matches!(
            url.check_lease(&s),
            Err(LeaseCheck::RenewTooLong { .. })
        ));
        s.ttl = Some(ms(3000));
        s.renew = None;
        assert_eq!(url.check_lease(&s), Ok(()));
    }

    /// Issue 43, item 2: a database without same-host locks (here: a
    /// file where the lock directory belongs; on a FUSE or network
    /// filesystem for the same reason) is not accepted silently: the
    /// opened backend warns, and a tool shows it without `-v`.
    #[tokio::test]
    async fn a_database_without_same_host_locks_warns() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.db");
        std::fs::write(dir.path().join("app.db-election-locks"), b"not a directory").unwrap();
        let election = SqliteElection::open(&db, crate::SqliteOptions::default())
            .await
            .unwrap();
        let warnings = Opened::warnings(&election);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].text.contains("no same-host lock")
                && warnings[0].text.contains("postgres://"),
            "{:?}",
            warnings[0]
        );
        let fine =
            SqliteElection::open(dir.path().join("other.db"), crate::SqliteOptions::default())
                .await
                .unwrap();
        assert!(Opened::warnings(&fine).is_empty());
    }

    #[tokio::test]
    // `Settings` may be `#[non_exhaustive]`: no struct literal.
    #[allow(clippy::field_reassign_with_default)]
    async fn opening_through_the_driver() {
        let tmp = tempfile::tempdir().unwrap();
        let url = SqliteUrl::new(tmp.path().join("app.db"));
        assert_eq!(url.created_on_open().map(|(w, _)| w), Some("the database"));
        let mut observer = Settings::default();
        observer.observer = true;
        let e = url.open(&observer).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the database {} does not exist: no election has run there",
                url.path.display()
            )
        );
        let opened = url.open(&Settings::default()).await.unwrap();
        assert_eq!(opened.kind(), "sqlite");
        assert!(opened.lease_timing().is_some());
        assert!(opened.inheritable_lock("jobs").is_some());
        let set = election_core::LeaseSet::new(opened.keyed_claims("node-a", None).await.unwrap());
        assert!(set.ask("shard-1").await.unwrap());
        set.close().await;
        assert_eq!(opened.leader("shard-1").await.unwrap(), None);
        opened.close_within(Duration::from_secs(1)).await;
    }
}
