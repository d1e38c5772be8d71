//! The NATS backend behind `election-url`'s boundary
//! ([`election_driver`]): `nats://[user:password@]host:port[,host:port...]
//! [?bucket=B&replicas=N&creds=FILE&token=T&single_replica_ok=1]` parsed
//! ([`NatsUrl`]), connected with its credentials, opened, and what only
//! the NATS backend has (an observer's bucket that does not exist yet, a
//! failover grace, the bucket's watch, the single-replica warning).

use std::any::Any;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use election_core::{Class, Classify, ConfigError, Disposition};
use election_driver::grammar::{decode_text, encode, flag, malformed, query, split_query};
use election_driver::{
    AnyKeyedClaims, Credentials, Driver, Error, Holder, LeaseCheck, LeaseTiming, Opened, Opening,
    ParseError, PendingOpen, Secret, Settings, Target, Warning, Watch,
};
use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;

use std::sync::Arc;

use crate::store::clients::{self, ClientKey, SharedClient};
use crate::{NatsElection, NatsOptions};

/// The options `nats://` knows, in the order they are printed.
pub const NATS_OPTIONS: &[&str] = &["bucket", "replicas", "creds", "token", "single_replica_ok"];

/// The NATS backend's entry in `election-url`'s table of schemes.
///
/// ```
/// use election_driver::Driver;
///
/// let url = election_nats::NatsDriver.parse("n1:4222,n2:4222?bucket=jobs")?;
/// assert_eq!(url.scheme(), "nats");
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NatsDriver;

impl Driver for NatsDriver {
    fn schemes(&self) -> &'static [&'static str] {
        &["nats"]
    }

    fn parse(&self, rest: &str) -> Result<Box<dyn Target>, ParseError> {
        Ok(Box::new(parse_nats(rest)?))
    }

    fn probe(&self) -> election_core::Probe {
        election_core::probe::<crate::Error>
    }
}

/// A parsed `nats://` URL.
///
/// ```
/// use election_driver::Driver;
/// use election_nats::{NatsDriver, NatsUrl};
///
/// let url = NatsDriver.parse("h1:4222,h2:4222?bucket=jobs&replicas=3")?;
/// let nats = url.as_any().downcast_ref::<NatsUrl>().expect("a NATS URL");
/// assert_eq!(nats.servers, ["h1:4222", "h2:4222"]);
/// assert_eq!((nats.bucket.as_deref(), nats.replicas), (Some("jobs"), Some(3)));
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NatsUrl {
    /// The servers, `host:port` each (at least one once parsed).
    pub servers: Vec<String>,
    /// `user:password@`.
    pub user: Option<(String, Secret)>,
    /// `?bucket=`: the bucket name (the backend's default if `None`).
    pub bucket: Option<String>,
    /// `?replicas=`: the bucket's replicas (the backend's default if
    /// `None`).
    pub replicas: Option<usize>,
    /// `?creds=`: a NATS credentials file (JWT and NKey seed).
    pub creds: Option<PathBuf>,
    /// `?token=`: a NATS token.
    pub token: Option<Secret>,
    /// `?single_replica_ok=1`: the user knows an R1 bucket can lose its
    /// last writes on a host crash (no warning).
    pub single_replica_ok: bool,
}

fn parse_nats(rest: &str) -> Result<NatsUrl, ParseError> {
    let (hosts, q) = split_query(rest)?;
    let hosts = hosts.trim_end_matches('/');
    let mut n = NatsUrl::default();
    let hosts = match hosts.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let (user, password) = userinfo
                .split_once(':')
                .ok_or_else(|| malformed("user info must be user:password"))?;
            n.user = Some((
                decode_text(user, "the user")?,
                Secret::new(decode_text(password, "the password")?),
            ));
            hosts
        }
        None => hosts,
    };
    for host in hosts.split(',') {
        let host = host.trim().trim_start_matches("nats://");
        let (name, port) = host
            .rsplit_once(':')
            .ok_or_else(|| malformed(format!("{host:?} has no port")))?;
        if name.is_empty()
            || port.parse::<u16>().is_err()
            || host.contains(['/', '%', '@', '?', '&', '=', ' '])
        {
            return Err(malformed(format!("{host:?} is not host:port")));
        }
        n.servers.push(host.to_owned());
    }
    for (k, v) in query("nats", q, NATS_OPTIONS)? {
        let bad = |reason: &str| ParseError::BadValue {
            option: k.clone(),
            reason: reason.to_owned(),
        };
        match k.as_str() {
            "bucket" => n.bucket = Some(v),
            "replicas" => n.replicas = Some(v.parse().map_err(|_| bad("not a number"))?),
            "creds" => n.creds = Some(PathBuf::from(v)),
            "token" => n.token = Some(Secret::new(v)),
            _ => n.single_replica_ok = flag(&k, &v)?,
        }
    }
    Ok(n)
}

impl NatsUrl {
    /// The servers as `nats://host:port` each.
    ///
    /// ```
    /// use election_driver::Driver;
    /// use election_nats::{NatsDriver, NatsUrl};
    ///
    /// let url = NatsDriver.parse("n1:4222,nats://n2:4222")?;
    /// let nats = url.as_any().downcast_ref::<NatsUrl>().expect("a NATS URL");
    /// assert_eq!(nats.server_urls(), ["nats://n1:4222", "nats://n2:4222"]);
    /// # Ok::<(), election_driver::ParseError>(())
    /// ```
    pub fn server_urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| format!("nats://{s}")).collect()
    }

    /// The NATS options `settings` and the URL's options give.
    ///
    /// Failure model: [`Error::Config`] for settings or options
    /// [`NatsOptions`] refuses.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_driver::{Driver, Settings};
    /// use election_nats::{NatsDriver, NatsUrl};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = NatsDriver.parse("n1:4222,n2:4222,n3:4222?bucket=jobs&replicas=3")?;
    /// let nats = url.as_any().downcast_ref::<NatsUrl>().expect("a NATS URL");
    /// let settings = Settings {
    ///     renew: Some(Duration::from_secs(2)),
    ///     ..Settings::default()
    /// };
    /// let options = nats.options(&settings)?;
    /// assert_eq!((options.bucket_name(), options.replica_count()), ("jobs", 3));
    /// assert_eq!(options.grace(), Duration::from_secs(2)); // lowered to the renew interval
    /// # Ok(()) }
    /// ```
    pub fn options(&self, settings: &Settings) -> Result<NatsOptions, Error> {
        let mut options = match settings.ttl {
            Some(ttl) => NatsOptions::new(ttl)?,
            None => NatsOptions::default(),
        };
        // The grace may not exceed the renew interval at any step: lowered
        // to a shorter renew interval if only that was given, and set
        // before the renew interval when it fits under the current one,
        // after it otherwise.
        let grace = settings
            .grace
            .or(settings.renew.map(|r| r.min(options.grace())));
        match (settings.renew, grace) {
            (Some(renew), Some(grace)) if grace <= options.renew_every() => {
                options = options.failover_grace(grace)?.renew_interval(renew)?;
            }
            (renew, grace) => {
                if let Some(renew) = renew {
                    options = options.renew_interval(renew)?;
                }
                if let Some(grace) = grace {
                    options = options.failover_grace(grace)?;
                }
            }
        }
        options = options
            .observer(settings.observer)
            .single_replica_ok(self.single_replica_ok);
        if let Some(bucket) = &self.bucket {
            options = options.bucket(bucket.clone())?;
        }
        if let Some(r) = self.replicas {
            options = options.replicas(r)?;
        }
        Ok(options)
    }

    /// Connects to the servers of this URL with its credentials, and gives
    /// the NATS options of `settings` and the URL's options: for a tool
    /// that opens the election itself (e.g. to open a missing bucket
    /// again later with [`NatsElection::with_client`]).
    ///
    /// Cancel safety: cancel safe (nothing is kept). Failure model:
    /// [`Error::Config`] for settings the options refuse or a bad server
    /// address; [`Error::Opening`] with a [`ConnectError`] for an
    /// unreadable credentials file, servers that do not answer or refuse
    /// the credentials.
    ///
    /// ```no_run
    /// use election_driver::{Driver, Settings};
    /// use election_nats::{NatsDriver, NatsElection, NatsUrl};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = NatsDriver.parse("127.0.0.1:4222?bucket=jobs")?;
    /// let nats = url.as_any().downcast_ref::<NatsUrl>().expect("a NATS URL");
    /// let (client, options) = nats.connect(&Settings::default()).await?;
    /// let election = NatsElection::with_client(client, options).await?;
    /// println!("{:?}", election.leader("dispatcher").await?);
    /// # Ok(()) }
    /// ```
    pub async fn connect(
        &self,
        settings: &Settings,
    ) -> Result<(async_nats::Client, NatsOptions), Error> {
        let options = self.options(settings)?;
        let client = connect(self, &options, settings.connect_timeout).await?;
        Ok((client, options))
    }
}

/// The NATS options `settings` and `url`'s options give
/// ([`NatsUrl::options`]).
///
/// ```
/// use election_driver::{Driver, Settings};
/// use election_nats::{NatsDriver, NatsUrl, nats_options};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let url = NatsDriver.parse("h:4222?bucket=jobs")?;
/// let nats = url.as_any().downcast_ref::<NatsUrl>().expect("a NATS URL");
/// assert_eq!(nats_options(&Settings::default(), nats)?.bucket_name(), "jobs");
/// # Ok(()) }
/// ```
pub fn nats_options(settings: &Settings, url: &NatsUrl) -> Result<NatsOptions, Error> {
    url.options(settings)
}

/// The process's shared client for the servers and credentials of `url`
/// and the connect options `options` and `timeout` set (ADR 0106): every
/// election the driver opens to the same servers with the same credentials
/// shares one connection.
async fn connect_shared(
    url: &NatsUrl,
    options: &NatsOptions,
    timeout: Option<Duration>,
) -> Result<(Arc<SharedClient>, async_nats::Client), Error> {
    let mut key = ClientKey::new(
        url.server_urls(),
        timeout.unwrap_or(options.timeout().max(Duration::from_secs(1))),
        options.renew_every(),
    );
    key.user = url
        .user
        .as_ref()
        .map(|(u, p)| (u.clone(), p.expose().to_owned()));
    key.token = url.token.as_ref().map(|t| t.expose().to_owned());
    key.creds = url.creds.clone();
    clients::shared(key, || connect(url, options, timeout)).await
}

/// Connects to the servers of `url` with its credentials.
///
/// Cancel safety: cancel safe (nothing is kept). Failure model:
/// [`ConnectError::Credentials`] for an unreadable creds file,
/// [`ConnectError::Connect`] when no server answers or the credentials are
/// refused, [`Error::Config`] for a bad server address.
async fn connect(
    url: &NatsUrl,
    options: &NatsOptions,
    timeout: Option<Duration>,
) -> Result<async_nats::Client, Error> {
    let mut connect = async_nats::ConnectOptions::new()
        .connection_timeout(timeout.unwrap_or(options.timeout().max(Duration::from_secs(1))))
        .ping_interval(options.renew_every());
    if let Some((user, password)) = &url.user {
        connect = connect.user_and_password(user.clone(), password.expose().to_owned());
    }
    if let Some(token) = &url.token {
        connect = connect.token(token.expose().to_owned());
    }
    if let Some(creds) = &url.creds {
        connect = connect.credentials_file(creds).await.map_err(|source| {
            Error::opening(ConnectError::Credentials {
                path: creds.clone(),
                source,
            })
        })?;
    }
    let servers: Vec<async_nats::ServerAddr> = url
        .server_urls()
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| ConfigError::BadSetting {
            setting: "url",
            reason: format!("bad NATS server address: {e}"),
        })?;
    connect.connect(servers).await.map_err(|source| {
        Error::opening(ConnectError::Connect {
            servers: url.server_urls().join(","),
            source,
        })
    })
}

/// Reaching the NATS servers a URL names failed, before the backend was
/// open: carried as [`Error::Opening`], printed as it is.
///
/// ```
/// use election_core::{Classify, Disposition};
/// use election_nats::ConnectError;
///
/// let e = ConnectError::Credentials {
///     path: "/etc/elect/app.creds".into(),
///     source: std::io::Error::other("permission denied"),
/// };
/// assert_eq!(
///     e.to_string(),
///     "cannot read the NATS credentials file /etc/elect/app.creds: permission denied"
/// );
/// assert_eq!(e.class().disposition, Disposition::Permanent);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// Fix the credentials file named by `?creds=`.
    Credentials {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The NATS servers could not be reached or refused the credentials
    /// (the kind tells which): retry later, or fix the credentials.
    Connect {
        /// The servers, comma-separated.
        servers: String,
        /// Why.
        source: async_nats::ConnectError,
    },
}

/// Whether the NATS servers refused the credentials (retrying with the
/// same ones cannot help).
fn refused(e: &async_nats::ConnectError) -> bool {
    matches!(
        e.kind(),
        async_nats::ConnectErrorKind::Authentication
            | async_nats::ConnectErrorKind::AuthorizationViolation
    )
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Credentials { path, source } => write!(
                f,
                "cannot read the NATS credentials file {}: {source}",
                path.display()
            ),
            ConnectError::Connect { servers, source } if refused(source) => {
                write!(f, "NATS at {servers} refused the credentials: {source}")
            }
            ConnectError::Connect { servers, source } => {
                write!(f, "cannot connect to NATS at {servers}: {source}")
            }
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The inner error's message is in ours: the chain goes on below.
        match self {
            ConnectError::Credentials { source, .. } => source.source(),
            ConnectError::Connect { source, .. } => source.source(),
        }
    }
}

/// What to do, with the fix in the terms of the URL and of `elect`.
impl Classify for ConnectError {
    fn class(&self) -> Class {
        match self {
            ConnectError::Credentials { .. } => Class::new(Disposition::Permanent),
            ConnectError::Connect { source, .. } if refused(source) => {
                Class::new(Disposition::Permanent).hint(crate::CREDENTIALS_HINT)
            }
            ConnectError::Connect { .. } => Class::new(Disposition::Transient)
                .hint("check that nats-server runs (with -js) and the address is right"),
        }
    }
}

impl Target for NatsUrl {
    fn scheme(&self) -> &'static str {
        "nats"
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, whole: bool) -> fmt::Result {
        f.write_str("nats://")?;
        if let Some((user, password)) = &self.user {
            write!(
                f,
                "{}:{}@",
                encode(user.as_bytes(), false),
                password.printed(whole)
            )?;
        }
        f.write_str(&self.servers.join(","))?;
        let mut sep = '?';
        let mut option = |f: &mut fmt::Formatter<'_>, k: &str, v: String| {
            let r = write!(f, "{sep}{k}={v}");
            sep = '&';
            r
        };
        if let Some(b) = &self.bucket {
            option(f, "bucket", encode(b.as_bytes(), false))?;
        }
        if let Some(r) = self.replicas {
            option(f, "replicas", r.to_string())?;
        }
        if let Some(c) = &self.creds {
            option(f, "creds", encode(c.as_os_str().as_bytes(), true))?;
        }
        if let Some(t) = &self.token {
            option(f, "token", t.printed(whole))?;
        }
        if self.single_replica_ok {
            option(f, "single_replica_ok", "1".to_owned())?;
        }
        Ok(())
    }

    fn clone_target(&self) -> Box<dyn Target> {
        Box::new(self.clone())
    }

    fn lease_settings(&self) -> &'static [&'static str] {
        &["ttl", "renew", "grace"]
    }

    fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck> {
        // An observer's lease settings are the bucket's own.
        if settings.observer {
            return Ok(());
        }
        let ttl = settings.ttl.unwrap_or(NatsOptions::default().ttl());
        let renew = settings.renew.unwrap_or(ttl / 3);
        let given = settings.ttl.is_some();
        election_driver::check_lease("nats", given, ttl, renew, Duration::from_secs(1))?;
        let grace = settings.grace.unwrap_or((ttl / 3).min(renew));
        if grace > renew {
            return Err(LeaseCheck::GraceAboveRenew { grace, renew });
        }
        Ok(())
    }

    fn check_settings(&self, settings: &Settings) -> Result<(), Error> {
        self.options(settings).map(drop)
    }

    fn shown(&self) -> String {
        let mut s = self.server_urls().join(",");
        if let Some(b) = &self.bucket {
            s.push_str(&format!("?bucket={b}"));
        }
        s
    }

    fn shown_opened(&self, opened: &dyn Opened) -> String {
        match opened.as_any().downcast_ref::<NatsElection>() {
            Some(e) if self.bucket.is_none() => {
                format!("{}?bucket={}", self.shown(), e.options().bucket_name())
            }
            _ => self.shown(),
        }
    }

    fn open<'a>(&'a self, settings: &'a Settings) -> BoxFuture<'a, Result<Box<dyn Opened>, Error>> {
        async move {
            let options = self.options(settings)?;
            let (shared, client) = connect_shared(self, &options, settings.connect_timeout).await?;
            match NatsElection::with_shared(shared, client, options.clone()).await {
                Ok(e) => Ok(Box::new(e) as Box<dyn Opened>),
                Err(crate::Error::NoBucket { .. }) if options.is_observer() => Err(Error::Absent {
                    what: format!("the bucket {}", options.bucket_name()),
                }),
                Err(e) => Err(e.into()),
            }
        }
        .boxed()
    }

    fn open_or_pending<'a>(
        &'a self,
        settings: &'a Settings,
    ) -> BoxFuture<'a, Result<Opening, Error>> {
        async move {
            let options = self.options(settings)?;
            let (shared, client) = connect_shared(self, &options, settings.connect_timeout).await?;
            match NatsElection::with_shared(shared.clone(), client.clone(), options.clone()).await {
                Ok(e) => Ok(Opening::Ready(Box::new(e))),
                Err(crate::Error::NoBucket { .. }) if options.is_observer() => {
                    Ok(Opening::Pending(Box::new(Pending {
                        shared,
                        client,
                        options,
                    })))
                }
                Err(e) => Err(e.into()),
            }
        }
        .boxed()
    }

    fn credentials(&self) -> Credentials {
        let mut c = Credentials::default();
        if let Some((user, password)) = &self.user {
            c.user = Some(user.clone());
            c.password = Some(password.clone());
        }
        c.token = self.token.clone();
        c.creds_file = self.creds.clone();
        c
    }

    /// The URL with `credentials`: a user with its password (an empty
    /// one if none is given; a password without a user is dropped), a
    /// token, a credentials file.
    fn with_credentials(&self, credentials: Credentials) -> Option<Box<dyn Target>> {
        let mut n = self.clone();
        n.user = credentials
            .user
            .map(|u| (u, credentials.password.unwrap_or_else(|| Secret::new(""))));
        n.token = credentials.token;
        n.creds = credentials.creds_file;
        Some(Box::new(n))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An observer's bucket that does not exist yet, with the connection
/// kept to open it again.
#[derive(Debug)]
struct Pending {
    /// Keeps the process's shared client (ADR 0106).
    shared: Arc<SharedClient>,
    client: async_nats::Client,
    options: NatsOptions,
}

impl PendingOpen for Pending {
    fn ready(&self) -> BoxFuture<'_, Result<Option<Box<dyn Opened>>, Error>> {
        async move {
            let (shared, client) = (self.shared.clone(), self.client.clone());
            match NatsElection::with_shared(shared, client, self.options.clone()).await {
                Ok(e) => Ok(Some(Box::new(e) as Box<dyn Opened>)),
                Err(crate::Error::NoBucket { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
        .boxed()
    }
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Error {
        Error::backend("the NATS backend", e)
    }
}

impl Opened for NatsElection {
    fn kind(&self) -> &'static str {
        "nats"
    }

    fn keyed_claims<'a>(
        &'a self,
        identity: &'a str,
        poll: Option<Duration>,
    ) -> BoxFuture<'a, Result<AnyKeyedClaims, Error>> {
        async move {
            if poll.is_some() {
                return Err(ConfigError::BadSetting {
                    setting: "poll",
                    reason: "a NATS lease set watches its keys: it has no poll interval".into(),
                }
                .into());
            }
            Ok(AnyKeyedClaims::new(
                NatsElection::keyed_claims(self, identity).await?,
            ))
        }
        .boxed()
    }

    fn lease_timing(&self) -> Option<LeaseTiming> {
        let o = self.options();
        Some(LeaseTiming::new(
            o.ttl(),
            o.renew_every(),
            o.margin(),
            o.grace(),
        ))
    }

    fn warnings(&self) -> Vec<Warning> {
        if self.replicas() >= 2 || self.options().is_single_replica_ok() {
            return Vec::new();
        }
        vec![Warning::new(
            "the NATS bucket has a single replica: a host crash or power loss can \
             lose its last writes, and a later term can then reuse an epoch. Use \
             ?replicas=3 on a cluster, or a server with `jetstream { \
             sync_interval: always }`, and say ?single_replica_ok=1 to silence \
             this",
            vec![(
                "replicas",
                u64::try_from(self.replicas()).unwrap_or(u64::MAX),
            )],
        )]
    }

    fn holder<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Holder>, Error>> {
        async move {
            Ok(NatsElection::holder(self, name)
                .await?
                .map(|h| Holder::new(h.leader, h.pending)))
        }
        .boxed()
    }

    fn may_be_pending(&self) -> bool {
        true
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
            let changes = NatsElection::observe(self, name)
                .await?
                .map(|c| c.map_err(Error::from))
                .boxed();
            Ok(Some(Watch::new(changes, "the NATS watch")))
        }
        .boxed()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use election_testkit::display::assert_chains;
    use election_testkit::driver::{absolute_path, round_trip, text};
    use proptest::prelude::*;

    use super::*;

    fn parse(url: &str) -> Result<Box<dyn Target>, ParseError> {
        let rest = url.strip_prefix("nats://").expect("a nats:// URL");
        NatsDriver.parse(rest)
    }

    fn nats(url: &str) -> NatsUrl {
        match parse(url) {
            Ok(t) => t
                .as_any()
                .downcast_ref::<NatsUrl>()
                .expect("a NATS URL")
                .clone(),
            Err(e) => panic!("{url}: {e:?}"),
        }
    }

    /// A URL printed, with its secrets when `whole`.
    struct Printed<'a>(&'a dyn Target, bool);

    impl fmt::Display for Printed<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.write(f, self.1)
        }
    }

    #[test]
    fn urls_parse_or_say_why_not() {
        let n = nats("nats://u:p@h1:4222,h2:4223?bucket=jobs&replicas=3&creds=/c");
        assert_eq!(n.servers, ["h1:4222", "h2:4223"]);
        assert_eq!(n.server_urls(), ["nats://h1:4222", "nats://h2:4223"]);
        assert_eq!(n.user, Some(("u".into(), Secret::new("p"))));
        assert_eq!((n.bucket.as_deref(), n.replicas), (Some("jobs"), Some(3)));
        assert_eq!(n.creds, Some(PathBuf::from("/c")));
        assert!(!n.single_replica_ok);
        assert!(nats("nats://h:1?single_replica_ok=1").single_replica_ok);
        assert_eq!(
            nats("nats://nats://h1:1,nats://h2:2").servers,
            ["h1:1", "h2:2"]
        );
        for bad in [
            "nats://host",
            "nats://h:99999",
            "nats://h:4222?colour=red",
            "nats://h:4222?replicas=three",
            "nats://h:4222?single_replica_ok=yes",
            "nats://h:1?bucket=a&bucket=b",
            "nats://h:1?bucket=a&&replicas=1",
            "nats://h:1?bucket",
            "nats://h%41:1",
            "nats://u:p%ZZ@h:1",
            "nats://h:1#x",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
        let n = nats("nats://us%40r:p%3Aw%26@h:1?token=a%26b&creds=/c%20d&bucket=j");
        assert_eq!(n.user, Some(("us@r".into(), Secret::new("p:w&"))));
        assert_eq!(n.token.as_ref().map(Secret::expose), Some("a&b"));
        assert_eq!(n.creds, Some(PathBuf::from("/c d")));
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert_eq!(
            parse("nats://h:4222?colour=red").unwrap_err(),
            ParseError::UnknownOption {
                scheme: "nats",
                option: "colour".into(),
                known: NATS_OPTIONS,
            }
        );
        assert_eq!(
            parse("nats://h:1?bucket=a&bucket=b").unwrap_err(),
            ParseError::RepeatedOption {
                option: "bucket".into()
            }
        );
        // No error quotes a secret.
        for bad in [
            "nats://u:s3cret@h?colour=red",
            "nats://u:s3cret@h:1?replicas=x",
            "nats://u:s3cret@h:1?token=s3cret&token=s3cret",
            "nats://u:s3cret@h:1?token=s3cret&single_replica_ok=s3cret",
            "nats://u:s3cret@h:1?token%s3cret",
            "nats://u:s3cret@h:1?tokens3cret",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(!format!("{e} {e:?}").contains("s3cret"), "{bad}: {e}");
        }
    }

    #[test]
    fn secrets_are_never_shown() {
        let url = parse("nats://u:s3cret@h:1?token=t0ken&bucket=b").unwrap();
        let shown = format!("{} {url:?}", Printed(url.as_ref(), false));
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken"),
            "{shown}"
        );
        assert!(shown.contains(election_driver::REDACTED));
        let whole = Printed(url.as_ref(), true).to_string();
        assert!(
            whole.contains("s3cret") && whole.contains("t0ken"),
            "{whole}"
        );
        assert_eq!(url.shown(), "nats://h:1?bucket=b");
    }

    #[test]
    fn printing_is_the_url_parsed_back() {
        let url = parse(
            "nats://us%40r:p%3Aw%26@h1:1,nats://h2:2?bucket=j%26k&replicas=3&creds=/c%20d&token=a%26b&single_replica_ok=1",
        )
        .unwrap();
        let whole = Printed(url.as_ref(), true).to_string();
        assert_eq!(
            whole,
            "nats://us%40r:p%3Aw%26@h1:1,h2:2?bucket=j%26k&replicas=3&creds=/c%20d&token=a%26b&single_replica_ok=1"
        );
        assert_eq!(
            Printed(url.as_ref(), false).to_string(),
            "nats://us%40r:REDACTED@h1:1,h2:2?bucket=j%26k&replicas=3&creds=/c%20d&token=REDACTED&single_replica_ok=1"
        );
        let again = parse(&whole).unwrap();
        assert_eq!(
            again.as_any().downcast_ref::<NatsUrl>(),
            url.as_any().downcast_ref::<NatsUrl>()
        );
    }

    #[test]
    fn credentials_are_replaced_whole() {
        let url = parse("nats://u:pw@h:1?token=t&bucket=b").unwrap();
        let c = url.credentials();
        assert_eq!(c.user.as_deref(), Some("u"));
        assert_eq!(c.token, Some(Secret::new("t")));
        let same = url.with_credentials(c).expect("NATS takes credentials");
        assert_eq!(
            same.as_any().downcast_ref::<NatsUrl>(),
            url.as_any().downcast_ref::<NatsUrl>()
        );
        let mut c = Credentials::default();
        c.creds_file = Some(PathBuf::from("/etc/app.creds"));
        let other = url.with_credentials(c).expect("NATS takes credentials");
        assert_eq!(
            Printed(other.as_ref(), true).to_string(),
            "nats://h:1?bucket=b&creds=/etc/app.creds"
        );
    }

    fn host() -> impl Strategy<Value = String> {
        ("[a-z0-9][a-z0-9.-]{0,10}", any::<u16>()).prop_map(|(h, p)| format!("{h}:{p}"))
    }

    /// Any `nats://` URL.
    fn nats_url() -> impl Strategy<Value = NatsUrl> {
        (
            prop::collection::vec(host(), 1..4),
            prop::option::of((text(), text())),
            prop::option::of(text()),
            prop::option::of(0usize..10),
            prop::option::of(absolute_path()),
            prop::option::of(text()),
            any::<bool>(),
        )
            .prop_map(
                |(servers, user, bucket, replicas, creds, token, ok)| NatsUrl {
                    servers,
                    user: user.map(|(u, p)| (u, Secret::new(p))),
                    bucket,
                    replicas,
                    // `?creds=` values are text.
                    creds: creds.map(|c| PathBuf::from(c.to_string_lossy().into_owned())),
                    token: token.map(Secret::new),
                    single_replica_ok: ok,
                },
            )
    }

    proptest! {
        #[test]
        fn print_then_parse_is_the_same_url(url in nats_url()) {
            round_trip(&NatsDriver, &url)?;
            let whole = Printed(&url, true).to_string();
            let again = parse(&whole);
            let again = again.as_ref().ok().and_then(|t| t.as_any().downcast_ref::<NatsUrl>());
            prop_assert_eq!(again, Some(&url), "{}", whole);
            // Redacted, the URL still says where: the servers, the bucket.
            let shown = Printed(&url, false).to_string();
            let parsed = parse(&shown);
            let p = parsed.as_ref().ok().and_then(|t| t.as_any().downcast_ref::<NatsUrl>());
            let p = p.expect("a NATS URL");
            prop_assert_eq!(&p.servers, &url.servers);
            prop_assert_eq!(&p.bucket, &url.bucket);
            prop_assert!(p.token.iter().all(|t| t.expose() == election_driver::REDACTED));
        }
    }

    #[test]
    fn the_nats_backends_errors_say_what_and_why() {
        assert_chains([
            (
                Error::opening(ConnectError::Credentials {
                    path: PathBuf::from("/etc/app.creds"),
                    source: std::io::Error::from_raw_os_error(2),
                }),
                "cannot read the NATS credentials file /etc/app.creds: No such file or directory \
                 (os error 2)",
            ),
            (
                Error::from(crate::Error::NoBucket {
                    bucket: "elections".into(),
                }),
                "the NATS backend: bucket elections does not exist (yet): no election has run in it",
            ),
        ]);
    }

    fn settings(ttl: Option<u64>, renew: Option<u64>, grace: Option<u64>) -> Settings {
        Settings {
            ttl: ttl.map(Duration::from_millis),
            renew: renew.map(Duration::from_millis),
            grace: grace.map(Duration::from_millis),
            ..Settings::default()
        }
    }

    #[test]
    fn the_lease_settings_are_checked() {
        let nats = parse("nats://h:4222").unwrap();
        assert_eq!(nats.lease_settings(), ["ttl", "renew", "grace"]);
        assert_eq!(
            nats.check_lease(&settings(Some(3000), None, Some(500))),
            Ok(())
        );
        assert_eq!(
            nats.check_lease(&settings(Some(3000), Some(900), Some(950))),
            Err(LeaseCheck::GraceAboveRenew {
                grace: Duration::from_millis(950),
                renew: Duration::from_millis(900)
            })
        );
        // The NATS TTL is at least a second; an observer's is the bucket's.
        assert!(matches!(
            nats.check_lease(&settings(Some(500), None, None)),
            Err(LeaseCheck::TtlTooShort { scheme: "nats", .. })
        ));
        let observer = Settings {
            observer: true,
            ..settings(Some(500), None, None)
        };
        assert_eq!(nats.check_lease(&observer), Ok(()));
    }
}
