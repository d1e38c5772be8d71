//! The etcd backend behind `election-url`'s boundary
//! ([`election_driver`]): `etcd://[user[:password]@]host:port[,host:port...]
//! [/prefix][?passfile=FILE]` parsed ([`EtcdUrl`]), its password found
//! (the URL, `ETCDCTL_PASSWORD`, the passfile), connected, and opened.

use std::any::Any;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use election_core::{Class, Classify, Disposition};
use election_driver::grammar::{decode_text, encode, malformed, query, split_query};
use election_driver::{
    AnyKeyedClaims, Credentials, Driver, Error, LeaseCheck, LeaseTiming, Opened, ParseError,
    Secret, Settings, Target, Watch,
};
use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;

use crate::{EtcdElection, EtcdOptions};

/// The options an `etcd://` URL takes.
pub const ETCD_OPTIONS: &[&str] = &["passfile"];

/// The variable a password is read from when the URL names a user without
/// one (etcdctl's own).
pub const PASSWORD_ENV: &str = "ETCDCTL_PASSWORD";

/// The `etcd://` scheme.
///
/// ```
/// use election_driver::Driver;
/// use election_etcd::EtcdDriver;
///
/// assert_eq!(EtcdDriver.schemes(), ["etcd"]);
/// assert!(EtcdDriver.parse("127.0.0.1:2379/jobs").is_ok());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct EtcdDriver;

impl Driver for EtcdDriver {
    fn schemes(&self) -> &'static [&'static str] {
        &["etcd"]
    }

    fn parse(&self, rest: &str) -> Result<Box<dyn Target>, ParseError> {
        Ok(Box::new(parse_etcd(rest)?))
    }

    fn probe(&self) -> election_core::Probe {
        probe
    }
}

/// The backend's error or a [`PassfileError`], as a `&dyn Classify`.
fn probe<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a dyn Classify> {
    election_core::probe::<crate::Error>(e).or_else(|| election_core::probe::<PassfileError>(e))
}

/// A parsed `etcd://` URL:
/// `etcd://[user[:password]@]host:port[,host:port...][/prefix][?passfile=FILE]`.
///
/// The prefix is where the keys live (`election` if none). Without a
/// password in the URL, a user's password comes from `ETCDCTL_PASSWORD`,
/// then the `?passfile=` file (lines `host:port:user:password`, `*`
/// matching anything, the first line matching one of the URL's members
/// winning): it never has to be on a command line.
///
/// ```
/// use election_driver::Driver;
/// use election_etcd::{EtcdDriver, EtcdUrl};
///
/// let url = EtcdDriver.parse("app@10.0.0.1:2379,10.0.0.2:2379/jobs?passfile=/etc/etcdpass")?;
/// let etcd = url.as_any().downcast_ref::<EtcdUrl>().expect("an etcd URL");
/// assert_eq!(etcd.endpoints, ["10.0.0.1:2379", "10.0.0.2:2379"]);
/// assert_eq!(etcd.prefix.as_deref(), Some("jobs"));
/// assert_eq!(etcd.user.as_deref(), Some("app"));
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtcdUrl {
    /// The members, `host:port` each.
    pub endpoints: Vec<String>,
    /// The user (etcd's authentication), if any.
    pub user: Option<String>,
    /// The password given in the URL (better: `ETCDCTL_PASSWORD` or a
    /// passfile).
    pub password: Option<Secret>,
    /// The key prefix (the path), if given.
    pub prefix: Option<String>,
    /// `?passfile=`: a password file (`host:port:user:password` lines).
    pub passfile: Option<PathBuf>,
}

fn parse_etcd(rest: &str) -> Result<EtcdUrl, ParseError> {
    let (before, q) = split_query(rest)?;
    let (authority, prefix) = match before.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (before, None),
    };
    let mut u = EtcdUrl::default();
    let hosts = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (userinfo, None),
            };
            let user = decode_text(user, "the user")?;
            if user.is_empty() {
                return Err(malformed("the user is empty"));
            }
            u.user = Some(user);
            u.password = password
                .map(|p| decode_text(p, "the password").map(Secret::new))
                .transpose()?;
            hosts
        }
        None => authority,
    };
    for host in hosts.split(',') {
        let host = host.trim();
        let (name, port) = host
            .rsplit_once(':')
            .ok_or_else(|| malformed(format!("{host:?} has no port")))?;
        if name.is_empty()
            || port.parse::<u16>().is_err()
            || host.contains(['/', '%', '@', '?', '&', '=', ' '])
        {
            return Err(malformed(format!("{host:?} is not host:port")));
        }
        u.endpoints.push(host.to_owned());
    }
    if let Some(p) = prefix {
        let p = decode_text(p, "the prefix")?;
        let p = p.trim_matches('/');
        if !p.is_empty() {
            u.prefix = Some(p.to_owned());
        }
    }
    for (k, v) in query("etcd", q, ETCD_OPTIONS)? {
        if v.is_empty() {
            return Err(ParseError::BadValue {
                option: k,
                reason: "empty".into(),
            });
        }
        u.passfile = Some(PathBuf::from(v));
    }
    Ok(u)
}

/// A password file named by `?passfile=` that cannot be used: it cannot be
/// read, or others than its owner may read it. Fix the file (its class is
/// permanent, with the fix as the hint).
///
/// ```
/// use election_core::{Classify, Disposition};
/// use election_etcd::PassfileError;
///
/// let e = PassfileError::new("/etc/etcdpass", "No such file or directory (os error 2)");
/// assert_eq!(
///     e.to_string(),
///     "cannot use the password file /etc/etcdpass: No such file or directory (os error 2)"
/// );
/// assert_eq!(e.class().disposition, Disposition::Permanent);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot use the password file {}: {reason}", path.display())]
#[non_exhaustive]
pub struct PassfileError {
    /// The file.
    pub path: PathBuf,
    /// Why (never a password).
    pub reason: String,
}

impl PassfileError {
    /// The file at `path` cannot be used, for `reason`.
    ///
    /// ```
    /// let e = election_etcd::PassfileError::new("/etc/etcdpass", "group or others may read it");
    /// assert_eq!(e.path, std::path::Path::new("/etc/etcdpass"));
    /// ```
    pub fn new(path: impl Into<PathBuf>, reason: impl Into<String>) -> PassfileError {
        PassfileError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl Classify for PassfileError {
    fn class(&self) -> Class {
        Class::new(Disposition::Permanent).hint(
            "make the password file readable by this user only (chmod 0600), or give the \
             password in ETCDCTL_PASSWORD",
        )
    }
}

/// The password for `user` at one of `endpoints` in a password file's
/// text: `host:port:user:password` lines (`\:` a colon, `\\` a
/// backslash, `*` matching anything, `#` a comment), the first match
/// winning.
fn passfile_lookup(text: &str, endpoints: &[String], user: &str) -> Option<String> {
    let fields = |line: &str| {
        let mut fields = vec![String::new()];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        fields.last_mut().expect("one field").push(next);
                    }
                }
                ':' if fields.len() < 4 => fields.push(String::new()),
                c => fields.last_mut().expect("one field").push(c),
            }
        }
        fields
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(fields)
        .filter(|f| f.len() == 4)
        .find(|f| {
            let matches = |field: &str, want: &str| field == "*" || field == want;
            matches(&f[2], user)
                && endpoints.iter().any(|e| {
                    let (host, port) = e.rsplit_once(':').unwrap_or((e, ""));
                    matches(&f[0], host) && matches(&f[1], port)
                })
        })
        .map(|f| f[3].clone())
}

impl EtcdUrl {
    /// The options this URL and `settings` ask for.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_driver::{Driver, Settings};
    /// use election_etcd::{EtcdDriver, EtcdUrl};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = EtcdDriver.parse("127.0.0.1:2379/jobs")?;
    /// let etcd = url.as_any().downcast_ref::<EtcdUrl>().ok_or("not etcd")?;
    /// let mut settings = Settings::default();
    /// settings.ttl = Some(Duration::from_secs(6));
    /// let options = etcd.options(&settings)?;
    /// assert_eq!((options.ttl(), options.key_prefix()), (Duration::from_secs(6), "jobs"));
    /// # Ok(()) }
    /// ```
    pub fn options(&self, settings: &Settings) -> Result<EtcdOptions, Error> {
        let mut options = match settings.ttl {
            Some(ttl) => EtcdOptions::new(ttl)?,
            None => EtcdOptions::default(),
        };
        if let Some(renew) = settings.renew {
            options = options.renew_interval(renew)?;
        }
        if let Some(prefix) = &self.prefix {
            options = options.prefix(prefix)?;
        }
        Ok(options)
    }

    /// The password to connect with: the URL's, else `ETCDCTL_PASSWORD`,
    /// else the `?passfile=` file's matching line; `None` without a user.
    ///
    /// Failure model: [`Error::Opening`] with a [`PassfileError`] when the
    /// `?passfile=` file cannot be read or others than its owner may read
    /// it.
    ///
    /// ```
    /// use election_driver::Driver;
    /// use election_etcd::{EtcdDriver, EtcdUrl};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = EtcdDriver.parse("app:pw@127.0.0.1:2379")?;
    /// let etcd = url.as_any().downcast_ref::<EtcdUrl>().ok_or("not etcd")?;
    /// assert_eq!(etcd.password()?.as_ref().map(|p| p.expose()), Some("pw"));
    /// # Ok(()) }
    /// ```
    pub fn password(&self) -> Result<Option<Secret>, Error> {
        let Some(user) = &self.user else {
            return Ok(None);
        };
        if let Some(p) = &self.password {
            return Ok(Some(p.clone()));
        }
        if let Ok(p) = std::env::var(PASSWORD_ENV) {
            return Ok(Some(Secret::new(p)));
        }
        match &self.passfile {
            Some(path) => Ok(self
                .password_in_passfile(path, user)
                .map_err(Error::opening)?
                .map(Secret::new)),
            None => Ok(None),
        }
    }

    fn password_in_passfile(
        &self,
        path: &Path,
        user: &str,
    ) -> Result<Option<String>, PassfileError> {
        use std::os::unix::fs::PermissionsExt;
        let refuse = |reason: String| PassfileError::new(path, reason);
        let meta = std::fs::metadata(path).map_err(|e| refuse(e.to_string()))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(refuse("group or others may read it (chmod 0600 it)".into()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| refuse(e.to_string()))?;
        Ok(passfile_lookup(&text, &self.endpoints, user))
    }

    /// Connects with this URL's members, user and password.
    ///
    /// ```no_run
    /// use election_driver::{Driver, Settings};
    /// use election_etcd::{EtcdDriver, EtcdUrl};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = EtcdDriver.parse("127.0.0.1:2379/jobs")?;
    /// let etcd = url.as_any().downcast_ref::<EtcdUrl>().ok_or("not etcd")?;
    /// let election = etcd.connect(&Settings::default()).await?;
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub async fn connect(&self, settings: &Settings) -> Result<EtcdElection, Error> {
        let mut options = self.options(settings)?;
        if let Some(t) = settings.connect_timeout {
            let bound = t.min(options.renew_every());
            options = options.request_timeout(bound)?;
        }
        let endpoints = self.endpoints.join(",");
        let election = match (&self.user, self.password()?) {
            (Some(user), Some(password)) => {
                EtcdElection::connect_as(&endpoints, user, password.expose(), options).await
            }
            (Some(user), None) => EtcdElection::connect_as(&endpoints, user, "", options).await,
            (None, _) => EtcdElection::connect(&endpoints, options).await,
        };
        Ok(election?)
    }
}

impl Target for EtcdUrl {
    fn scheme(&self) -> &'static str {
        "etcd"
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, whole: bool) -> fmt::Result {
        f.write_str("etcd://")?;
        if let Some(user) = &self.user {
            f.write_str(&encode(user.as_bytes(), false))?;
            if let Some(p) = &self.password {
                write!(f, ":{}", p.printed(whole))?;
            }
            f.write_str("@")?;
        }
        f.write_str(&self.endpoints.join(","))?;
        if let Some(p) = &self.prefix {
            write!(f, "/{}", encode(p.as_bytes(), true))?;
        }
        if let Some(pf) = &self.passfile {
            write!(f, "?passfile={}", encode(pf.as_os_str().as_bytes(), true))?;
        }
        Ok(())
    }

    fn clone_target(&self) -> Box<dyn Target> {
        Box::new(self.clone())
    }

    fn lease_settings(&self) -> &'static [&'static str] {
        &["ttl", "renew"]
    }

    fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck> {
        if settings.grace.is_some() {
            return Err(LeaseCheck::NoGrace { scheme: "etcd" });
        }
        let ttl = settings.ttl.unwrap_or(EtcdOptions::default().ttl());
        let renew = settings.renew.unwrap_or(ttl / 3);
        let given = settings.ttl.is_some();
        election_driver::check_lease("etcd", given, ttl, renew, Duration::from_secs(1))
    }

    fn check_settings(&self, settings: &Settings) -> Result<(), Error> {
        self.options(settings).map(drop)
    }

    fn shown(&self) -> String {
        let mut s = format!("etcd://{}", self.endpoints.join(","));
        if let Some(p) = &self.prefix {
            s.push('/');
            s.push_str(p);
        }
        s
    }

    fn open<'a>(&'a self, settings: &'a Settings) -> BoxFuture<'a, Result<Box<dyn Opened>, Error>> {
        async move { Ok(Box::new(self.connect(settings).await?) as Box<dyn Opened>) }.boxed()
    }

    /// What the URL holds (for redaction checks). The password is not
    /// taken from a tool's flags (`with_credentials` says no): as libpq's,
    /// it comes from the URL, `ETCDCTL_PASSWORD` or the passfile.
    fn credentials(&self) -> Credentials {
        let mut c = Credentials::default();
        c.user = self.user.clone();
        c.password = self.password.clone();
        c
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Error {
        Error::backend("the etcd backend", e)
    }
}

impl Opened for EtcdElection {
    fn kind(&self) -> &'static str {
        "etcd"
    }

    fn keyed_claims<'a>(
        &'a self,
        identity: &'a str,
        poll: Option<Duration>,
    ) -> BoxFuture<'a, Result<AnyKeyedClaims, Error>> {
        async move {
            let mut claims = EtcdElection::keyed_claims(self, identity)?;
            if let Some(poll) = poll {
                claims = claims.with_poll_interval(poll)?;
            }
            Ok(AnyKeyedClaims::new(claims))
        }
        .boxed()
    }

    fn lease_timing(&self) -> Option<LeaseTiming> {
        let o = self.options();
        Some(LeaseTiming::new(
            o.ttl(),
            o.renew_every(),
            o.margin(),
            Duration::ZERO,
        ))
    }

    fn watch<'a, 'b>(
        &'a self,
        name: &'b str,
        _every: Duration,
    ) -> BoxFuture<'b, Result<Option<Watch<'a>>, Error>>
    where
        'a: 'b,
    {
        async move {
            let changes = EtcdElection::observe(self, name)
                .await?
                .map(|c| c.map_err(Error::from))
                .boxed();
            Ok(Some(Watch::new(changes, "the etcd watch")))
        }
        .boxed()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use election_testkit::driver::round_trip;
    use proptest::prelude::*;

    use super::*;

    fn parse(url: &str) -> Result<Box<dyn Target>, ParseError> {
        EtcdDriver.parse(url.strip_prefix("etcd://").expect("an etcd:// URL"))
    }

    fn etcd(url: &str) -> EtcdUrl {
        match parse(url) {
            Ok(t) => t.as_any().downcast_ref::<EtcdUrl>().expect("etcd").clone(),
            Err(e) => panic!("{url}: {e:?}"),
        }
    }

    struct Printed<'a>(&'a dyn Target, bool);

    impl fmt::Display for Printed<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.write(f, self.1)
        }
    }

    #[test]
    fn urls_parse_or_say_why_not() {
        let u = etcd("etcd://u:p@h1:2379,h2:2380/apps/jobs?passfile=/p");
        assert_eq!(u.endpoints, ["h1:2379", "h2:2380"]);
        assert_eq!(u.user.as_deref(), Some("u"));
        assert_eq!(u.password, Some(Secret::new("p")));
        assert_eq!(u.prefix.as_deref(), Some("apps/jobs"));
        assert_eq!(u.passfile, Some(PathBuf::from("/p")));
        assert_eq!(etcd("etcd://h:1").prefix, None);
        assert_eq!(etcd("etcd://h:1/").prefix, None);
        for bad in [
            "etcd://host",
            "etcd://h:99999",
            "etcd://:1",
            "etcd://h:1?colour=red",
            "etcd://h:1?passfile=a&passfile=b",
            "etcd://h:1?passfile=",
            "etcd://@h:1",
            "etcd://h%41:1",
            "etcd://h:1#x",
            "etcd://u:p%ZZ@h:1",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn secrets_are_never_shown() {
        let url = parse("etcd://u:s3cret@h:1/x").unwrap();
        let shown = format!("{} {url:?} {}", Printed(url.as_ref(), false), url.shown());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(Printed(url.as_ref(), true).to_string().contains("s3cret"));
        let e = parse("etcd://u:s3cret@h:1?passfile%s3cret").unwrap_err();
        assert!(!format!("{e} {e:?}").contains("s3cret"));
    }

    #[test]
    fn a_passfile_line_matches_one_member_and_the_user() {
        let text = "# etcd\nother:2379:app:no\n*:2380:app:p\\:w\nh1:*:*:any\n";
        let members = ["h1:2379".to_owned(), "h2:2380".to_owned()];
        assert_eq!(
            passfile_lookup(text, &members, "app").as_deref(),
            Some("p:w")
        );
        assert_eq!(
            passfile_lookup(text, &members[..1], "x").as_deref(),
            Some("any")
        );
        assert_eq!(passfile_lookup(text, &["z:1".to_owned()], "app"), None);
    }

    #[test]
    fn a_passfile_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pass");
        std::fs::write(&path, "*:*:app:pw\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let url = etcd(&format!("etcd://app@h:1?passfile={}", path.display()));
        let e = url.password_in_passfile(&path, "app").unwrap_err();
        assert!(e.reason.contains("chmod 0600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            url.password_in_passfile(&path, "app").unwrap().as_deref(),
            Some("pw")
        );
    }

    proptest! {
        #[test]
        fn printed_urls_parse_back(
            user in proptest::option::of("[a-z@:%/]{1,8}"),
            password in proptest::option::of("[a-z@:%&/]{1,8}"),
            hosts in proptest::collection::vec(("[a-z][a-z0-9.]{0,8}", 1u16..), 1..4),
            prefix in proptest::option::of("[a-z][a-z0-9/%&]{0,12}[a-z]"),
            passfile in proptest::option::of("/[a-z0-9/ %&]{1,12}"),
        ) {
            let u = EtcdUrl {
                password: user.as_ref().and(password.map(Secret::new)),
                user,
                endpoints: hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect(),
                prefix,
                passfile: passfile.map(PathBuf::from),
            };
            round_trip(&EtcdDriver, &u)?;
        }
    }
}
