//! The file backend behind `election-url`'s boundary
//! ([`election_driver`]): `file:///dir[?volatile_ok=1&unknown_fs_ok=1]`
//! parsed ([`FileUrl`]), opened, and what only the file backend has (a
//! lock a child may inherit, inotify changes, the epoch record).

use std::any::Any;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use election_core::{Epoch, Identity, Leader, PerKeyClaims};
use election_driver::grammar::{absolute, encode, flag, query, split_query};
use election_driver::{
    AnyKeyedClaims, Changes, Driver, EpochRepair, Error, LeaseCheck, Opened, ParseError, Settings,
    Target,
};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::FileElection;

/// The options `file://` knows, in the order they are printed.
pub const FILE_OPTIONS: &[&str] = &["volatile_ok", "unknown_fs_ok"];

/// The file backend's entry in `election-url`'s table of schemes.
///
/// ```
/// use election_driver::Driver;
///
/// let url = election_file::FileDriver.parse("/var/lib/elect")?;
/// assert_eq!(url.scheme(), "file");
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct FileDriver;

impl Driver for FileDriver {
    fn schemes(&self) -> &'static [&'static str] {
        &["file"]
    }

    fn parse(&self, rest: &str) -> Result<Box<dyn Target>, ParseError> {
        let (path, q) = split_query(rest)?;
        let mut file = FileUrl::new(absolute(path)?);
        for (k, v) in query("file", q, FILE_OPTIONS)? {
            let on = flag(&k, &v)?;
            match k.as_str() {
                "volatile_ok" => file.volatile_ok = on,
                _ => file.unknown_fs_ok = on,
            }
        }
        Ok(Box::new(file))
    }

    fn probe(&self) -> election_core::Probe {
        election_core::probe::<crate::Error>
    }
}

/// A parsed `file://` URL: `file:///dir[?volatile_ok=1&unknown_fs_ok=1]`.
///
/// The directory must be on a filesystem known to be local and on a disk;
/// the options accept, by name, what the file backend refuses otherwise
/// (see [`FileUrl::options`]).
///
/// ```
/// use election_driver::Driver;
/// use election_file::{FileDriver, FileUrl};
///
/// let url = FileDriver.parse("/run/elect?volatile_ok=1")?;
/// let file = url.as_any().downcast_ref::<FileUrl>().expect("a file URL");
/// assert_eq!(file.dir, std::path::Path::new("/run/elect"));
/// assert!(file.volatile_ok && !file.unknown_fs_ok);
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileUrl {
    /// The directory (absolute).
    pub dir: PathBuf,
    /// `?volatile_ok=1`: accept a directory on tmpfs or ramfs, which a
    /// reboot empties (epochs start again after it):
    /// [`FileOptions::allow_volatile`](crate::FileOptions::allow_volatile).
    pub volatile_ok: bool,
    /// `?unknown_fs_ok=1`: accept a directory on a filesystem of a type not
    /// known to be local:
    /// [`FileOptions::allow_unknown_filesystem`](crate::FileOptions::allow_unknown_filesystem).
    pub unknown_fs_ok: bool,
}

impl FileUrl {
    /// `file://dir`, without options.
    ///
    /// ```
    /// let url = election_file::FileUrl::new("/var/lib/elect");
    /// assert!(!url.volatile_ok);
    /// ```
    pub fn new(dir: impl Into<PathBuf>) -> FileUrl {
        FileUrl {
            dir: dir.into(),
            ..FileUrl::default()
        }
    }

    /// The file backend's options this URL gives.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let mut url = election_file::FileUrl::new(tmp.path());
    /// url.volatile_ok = true;
    /// let election = election_file::FileElection::with_options(&url.dir, url.options())?;
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> crate::FileOptions {
        crate::FileOptions::default()
            .allow_volatile(self.volatile_ok)
            .allow_unknown_filesystem(self.unknown_fs_ok)
    }

    /// The options given, as printed.
    fn given(&self) -> impl Iterator<Item = &'static str> {
        [
            ("volatile_ok", self.volatile_ok),
            ("unknown_fs_ok", self.unknown_fs_ok),
        ]
        .into_iter()
        .filter(|&(_, on)| on)
        .map(|(k, _)| k)
    }
}

impl Target for FileUrl {
    fn scheme(&self) -> &'static str {
        "file"
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, _whole: bool) -> fmt::Result {
        write!(
            f,
            "file://{}",
            encode(self.dir.as_os_str().as_bytes(), true)
        )?;
        for (i, k) in self.given().enumerate() {
            write!(f, "{}{k}=1", if i == 0 { '?' } else { '&' })?;
        }
        Ok(())
    }

    fn clone_target(&self) -> Box<dyn Target> {
        Box::new(self.clone())
    }

    fn lease_settings(&self) -> &'static [&'static str] {
        &[]
    }

    fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck> {
        if settings.ttl.is_some() || settings.renew.is_some() || settings.grace.is_some() {
            return Err(LeaseCheck::NoLease { scheme: "file" });
        }
        Ok(())
    }

    fn check_settings(&self, _settings: &Settings) -> Result<(), Error> {
        Ok(())
    }

    fn created_on_open(&self) -> Option<(&'static str, &Path)> {
        Some(("the directory", &self.dir))
    }

    fn shown(&self) -> String {
        let mut s = format!("file://{}", self.dir.display());
        for (i, k) in self.given().enumerate() {
            s.push_str(&format!("{}{k}=1", if i == 0 { '?' } else { '&' }));
        }
        s
    }

    fn open<'a>(&'a self, settings: &'a Settings) -> BoxFuture<'a, Result<Box<dyn Opened>, Error>> {
        async move {
            if settings.observer && std::fs::symlink_metadata(&self.dir).is_err() {
                return Err(Error::Absent {
                    what: format!("the directory {}", self.dir.display()),
                });
            }
            let election = FileElection::with_options(self.dir.clone(), self.options())?;
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
        Error::backend("the file backend", e)
    }
}

impl Opened for FileElection {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn keyed_claims<'a>(
        &'a self,
        identity: &'a str,
        poll: Option<Duration>,
    ) -> BoxFuture<'a, Result<AnyKeyedClaims, Error>> {
        async move {
            let id = Identity::new(identity)?;
            if tokio::runtime::Handle::try_current().is_err() {
                return Err(election_core::ConfigError::BadSetting {
                    setting: "runtime",
                    reason: "a lease set must be started inside a tokio runtime".into(),
                }
                .into());
            }
            let election = self.clone();
            let who = id.clone();
            let claims = PerKeyClaims::new(id, move |key| {
                election
                    .claim(key.as_str(), who.as_str())
                    .map_err(|e| e.into_core(key))
            })
            .with_backend("file");
            let claims = match poll {
                Some(poll) => claims.with_poll_interval(poll)?,
                None => claims,
            };
            Ok(AnyKeyedClaims::new(claims))
        }
        .boxed()
    }

    fn inheritable_lock(&self, name: &str) -> Option<PathBuf> {
        Some(self.dir().join(format!("{name}.lock")))
    }

    fn changes(&self, name: &str) -> Option<Result<Changes, Error>> {
        Some(
            FileElection::changes(self, name)
                .map_err(Error::from)
                .map(|c| {
                    let stream = futures::stream::unfold(c, |mut c| async move {
                        let r = c.changed().await.map_err(Error::from);
                        Some((r, c))
                    });
                    Changes::new(Box::pin(stream))
                }),
        )
    }

    fn last_term(&self, name: &str) -> Result<Option<Leader>, Error> {
        Ok(FileElection::last_term(self, name)?)
    }

    fn local_path(&self) -> Option<&Path> {
        Some(self.dir())
    }

    fn repair_epoch(&self, name: &str, epoch: Epoch) -> Option<Result<EpochRepair, Error>> {
        Some(
            FileElection::repair_epoch(self, name, epoch)
                .map(|r| EpochRepair::new(r.epoch, r.highest_seen))
                .map_err(Error::from),
        )
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use election_testkit::display::{assert_chains, chain};
    use election_testkit::driver::{Printed, absolute_path, round_trip};
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn print_then_parse_is_the_same_url(
            dir in absolute_path(),
            volatile_ok in any::<bool>(),
            unknown_fs_ok in any::<bool>(),
        ) {
            let mut url = FileUrl::new(dir);
            url.volatile_ok = volatile_ok;
            url.unknown_fs_ok = unknown_fs_ok;
            round_trip(&FileDriver, &url)?;
            let whole = Printed(&url, true).to_string();
            let again = FileDriver.parse(&whole["file://".len()..]);
            let again = again.as_ref().ok().and_then(|t| t.as_any().downcast_ref::<FileUrl>());
            prop_assert_eq!(again, Some(&url), "{}", whole);
        }
    }

    #[test]
    fn the_file_backends_errors_say_what_and_why() {
        assert_chains([(
            Error::from(crate::Error::NotADirectory {
                path: PathBuf::from("/srv/file"),
            }),
            "the file backend: /srv/file is not a directory",
        )]);
        // A backend error with a source below it: named once.
        let e = Error::from(crate::Error::PermissionDenied {
            path: PathBuf::from("/srv/e"),
            source: std::io::Error::from_raw_os_error(13),
        });
        assert_eq!(
            chain(&e),
            "the file backend: permission denied: /srv/e; give this process read and write \
             access: Permission denied (os error 13)"
        );
    }
}
