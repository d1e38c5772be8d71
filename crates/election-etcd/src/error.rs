//! Errors of the etcd backend.

use std::sync::Arc;
use std::time::Duration;

use election_core::{Class, Classify, ConfigError, Disposition, ElectionName};

/// What the client or server said, kept as the error's source.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong with the etcd backend, grouped by what the caller
/// should do: fix the configuration (`Config`, `Auth`, `ServerTooOld`),
/// retry when etcd is back (`Connect`, `Unavailable`), treat the claim as
/// not held (`OutcomeUnknown`), or have an operator look at the cluster
/// (`ClusterChanged`, `CorruptValue`).
///
/// Inside a campaign these reach the caller as the `source` of an
/// [`election_core::Error`]. "Another candidate holds it" is never an
/// error here: it is `Ok(None)` from `try_campaign`, or
/// [`election_core::Error::NotHeld`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No etcd member answered at the given addresses.
    #[error("cannot reach etcd at {endpoints}")]
    Connect {
        /// The addresses given.
        endpoints: String,
        /// What the client said.
        #[source]
        source: Cause,
    },
    /// etcd refused the user name and password (or its authentication is
    /// off while a user was given).
    #[error("etcd refused the credentials of user {user}")]
    Auth {
        /// The user.
        user: String,
        /// What etcd said.
        #[source]
        source: Cause,
    },
    /// etcd did not answer, or answered that it cannot serve now (no
    /// leader, too many requests); nothing was won or changed.
    #[error("etcd is unavailable: {what}")]
    Unavailable {
        /// What was being done.
        what: &'static str,
        /// What failed.
        #[source]
        source: Option<Cause>,
    },
    /// A write did not answer within its bound, or its connection broke
    /// after it was sent: it may still land. The claim counts as not held.
    #[error("an etcd write ({what}) did not answer within {after:?}; its outcome is unknown")]
    OutcomeUnknown {
        /// The write.
        what: &'static str,
        /// The bound.
        after: Duration,
        /// What failed, if something did before the bound.
        #[source]
        source: Option<Cause>,
    },
    /// The cluster answering is not the one this process first talked to
    /// (another cluster ID): etcd was restored from a snapshot or replaced.
    /// Revisions, and so epochs, may have gone back: terms end, and no
    /// claim is made until this process is restarted.
    #[error(
        "the etcd cluster changed under this process (cluster ID {was:x}, now {now:x}): \
         restored from a snapshot or replaced"
    )]
    ClusterChanged {
        /// The cluster ID seen first.
        was: u64,
        /// The cluster ID seen now.
        now: u64,
    },
    /// The member answering runs an etcd release older than this crate
    /// needs ([`NEEDED_VERSION`](crate::NEEDED_VERSION)), or reports a
    /// version it cannot read: nothing was claimed or written.
    #[error("etcd {found:?} is too old: election-etcd needs etcd {needed} or later")]
    ServerTooOld {
        /// The version the member reported (`etcd --version`).
        found: String,
        /// The oldest release this crate works with.
        needed: &'static str,
    },
    /// A value under the prefix is not one this crate wrote.
    #[error("unreadable value at etcd key {key}: {detail}")]
    CorruptValue {
        /// The key.
        key: String,
        /// What is wrong.
        detail: String,
    },
    /// A bad name, identity or setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl Error {
    pub(crate) fn unavailable(what: &'static str, source: impl Into<Cause>) -> Self {
        Error::Unavailable {
            what,
            source: Some(source.into()),
        }
    }

    /// This error as the core's error, grouped by what the caller should do.
    ///
    /// ```no_run
    /// use election_core::ElectionName;
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let name = ElectionName::new("dispatcher")?;
    /// match election.leader(name.as_str()).await {
    ///     Ok(leader) => println!("leader: {leader:?}"),
    ///     Err(e) => {
    ///         // Grouped by what to do: retry what is transient, stop on the rest.
    ///         let e = e.into_core(&name);
    ///         if e.is_permanent() {
    ///             return Err(e.into());
    ///         }
    ///         eprintln!("will retry: {e}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_core(self, name: &ElectionName) -> election_core::Error {
        match self {
            Error::Config(c) => election_core::Error::Config(c),
            e @ (Error::Auth { .. } | Error::ServerTooOld { .. }) => {
                election_core::Error::Config(ConfigError::Location {
                    reason: e.to_string(),
                    source: Some(Arc::new(e)),
                })
            }
            e @ (Error::CorruptValue { .. } | Error::ClusterChanged { .. }) => {
                election_core::Error::corrupt(name, e)
            }
            e @ Error::OutcomeUnknown { .. } => election_core::Error::outcome_unknown(name, e),
            e => election_core::Error::unavailable(name, e),
        }
    }
}

/// The hint for refused credentials, in the terms of a backend URL and
/// of `elect`.
pub const CREDENTIALS_HINT: &str = "check the user and password: etcd://user@host:port/prefix \
     with the password in ETCDCTL_PASSWORD or in ?passfile=FILE (lines \
     host:port:user:password, the file chmod 0600)";

/// What to do, with the fix named in the terms of a backend URL and of
/// `elect`, this backend's tool.
impl Classify for Error {
    fn class(&self) -> Class {
        let permanent = |hint: &str| Class::new(Disposition::Permanent).hint(hint);
        match self {
            Error::Connect { .. } | Error::Unavailable { .. } => Class::new(Disposition::Transient)
                .hint(
                    "check that etcd runs and is reachable at the URL's addresses (etcd \
                     --listen-client-urls), and that its cluster has a leader",
                ),
            Error::OutcomeUnknown { .. } => Class::new(Disposition::OutcomeUnknown),
            Error::Auth { .. } => permanent(CREDENTIALS_HINT),
            Error::ServerTooOld { .. } => permanent(
                "upgrade etcd (every member) to a supported release, or point the URL at a \
                 cluster that runs one",
            ),
            Error::ClusterChanged { .. } => Class::new(Disposition::Corrupt).hint(
                "etcd was restored from a snapshot or replaced: restart this process; restore \
                 with etcdutl snapshot restore --bump-revision (and --mark-compacted) so that \
                 revisions, and so epochs, keep growing",
            ),
            Error::CorruptValue { .. } => permanent(
                "a key under the prefix holds a value elect never writes: use another prefix \
                 (etcd://host:port/other-prefix)",
            ),
            Error::Config(_) => permanent("check the URL's options"),
        }
    }
}
