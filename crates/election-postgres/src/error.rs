//! Errors of the PostgreSQL backend.

use election_core::{Class, Classify, ConfigError, Disposition, ElectionName};
use election_sql::IntoCore;

/// What can go wrong with the PostgreSQL backend, grouped by what the
/// caller should do:
///
/// - fix the configuration: `Config` (a bad name, setting or schema name;
///   also [`ConfigError::EpochExhausted`] once every epoch up to
///   [`Epoch::MAX`](election_core::Epoch::MAX) was handed out),
///   `UnsafeSetting` (`synchronous_commit = off`), `SchemaTooNew`,
///   `Unusable` (no such database, no privilege, tables of another shape,
///   a bad URL or password);
/// - repair the stored state: `CorruptRow`;
/// - retry later: `Unavailable` (the server cannot be reached, is shutting
///   down or starting, is out of connections, or a lock was not granted in
///   time), `TimedOut` (a read), `Database` (any other server error);
/// - treat the claim as not held: `OutcomeUnknown`.
///
/// Inside a campaign these reach the caller as the `source` of an
/// [`election_core::Error`]: `Config`, `Corrupt`, `Unavailable` or
/// `OutcomeUnknown` respectively ([`Error::into_core`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server cannot serve the request now: the connection failed or
    /// dropped, the pool had no free connection in time, the server is
    /// shutting down, starting or recovering, out of resources, or a lock
    /// or statement timed out on the server. Retry later.
    Unavailable(sqlx::Error),
    /// The database, its privileges or its election tables cannot serve
    /// this crate, and retrying will not change that: a bad URL or
    /// password, no such database, no privilege to create or use the
    /// schema, or election tables of another shape.
    Unusable {
        /// What is wrong.
        reason: String,
        /// What sqlx said (named in the message, without the server's
        /// source line).
        source: sqlx::Error,
    },
    /// The session would acknowledge commits before they are durable. With
    /// `synchronous_commit = off` a server crash can lose a claim the
    /// winner was told had committed, together with the sequence value it
    /// took, so the same epoch could be handed out twice (ADR 0033). Set
    /// `synchronous_commit` to `on` (or `local`, `remote_write`,
    /// `remote_apply`) for the role, the database or the pool's sessions.
    UnsafeSetting {
        /// The setting (`synchronous_commit`).
        setting: &'static str,
        /// Its value in the session checked.
        value: String,
    },
    /// The election schema was written by a newer version of this crate.
    SchemaTooNew {
        /// The version found in the database.
        found: i64,
        /// The newest version this crate knows.
        supported: i64,
    },
    /// A lease row or epoch record holds values this crate never writes (a
    /// negative epoch, a TTL of 0). No term is handed out from it.
    CorruptRow {
        /// The election.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// A request did not answer within its bound; it may or may not have
    /// committed. The claim counts as not held.
    OutcomeUnknown {
        /// The bound that ran out.
        after: std::time::Duration,
    },
    /// No connection of the pool came within `after` while the server
    /// accepts connections: the pool's connections stayed in use (an
    /// application that keeps a shared pool busy: size it for the
    /// election's requests too) or were slow to open (a loaded server).
    /// Nothing was sent. Retry later.
    PoolExhausted {
        /// The bound that ran out.
        after: std::time::Duration,
    },
    /// A read did not answer within its bound (nothing was written). Retry
    /// later.
    TimedOut {
        /// The bound that ran out.
        after: std::time::Duration,
    },
    /// Another database error; retrying may help.
    Database(sqlx::Error),
    /// A bad name, identity, schema name or setting; or every epoch was
    /// handed out.
    Config(ConfigError),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Unavailable(e) => {
                write!(f, "the PostgreSQL server is unavailable: {}", driver(e))
            }
            Error::Unusable { reason, source } => write!(
                f,
                "the database cannot be used for elections: {reason}: {}",
                driver(source)
            ),
            Error::UnsafeSetting { setting, value } => write!(
                f,
                "{setting} is {value} in this session: a claim acknowledged but lost in a crash could hand the same epoch out twice; set it to on"
            ),
            Error::SchemaTooNew { found, supported } => write!(
                f,
                "the election schema is version {found}, newer than the {supported} this version supports; upgrade"
            ),
            Error::CorruptRow { name, detail } => {
                write!(f, "corrupt lease row for {name}: {detail}")
            }
            Error::OutcomeUnknown { after } => write!(
                f,
                "a request to PostgreSQL did not answer within {after:?}; its outcome is unknown"
            ),
            Error::PoolExhausted { after } => write!(
                f,
                "no connection of the pool within {after:?}, though the server accepts connections: the pool's connections stayed in use or were slow to open"
            ),
            Error::TimedOut { after } => {
                write!(f, "a read from PostgreSQL did not answer within {after:?}")
            }
            Error::Database(e) => write!(f, "a PostgreSQL statement failed: {}", driver(e)),
            Error::Config(e) => e.fmt(f),
        }
    }
}

/// Not a `source` for sqlx's errors: their text is in the message (sqlx's
/// own `Display` already holds what is below it, and a server error's
/// ends in the server's C source line, which says nothing to a user).
/// The sqlx error stays in the variant's field, to inspect.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Config(e) => e.source(),
            _ => None,
        }
    }
}

/// What to do, with the fix named in the terms of a backend URL and of
/// `elect`, this backend's tool.
impl Classify for Error {
    fn class(&self) -> Class {
        let permanent = |hint: &str| Class::new(Disposition::Permanent).hint(hint);
        match self {
            Error::Unavailable(_)
            | Error::TimedOut { .. }
            | Error::OutcomeUnknown { .. }
            | Error::Database(_) => Class::new(Disposition::Transient).hint(
                "check that the PostgreSQL server runs and the host and port in the URL are \
                 right, then try again",
            ),
            Error::Unusable {
                source: sqlx::Error::Database(d),
                ..
            } if d.code().as_deref() == Some("42501") => permanent(
                "grant this role what the election needs (the README's \"Setting PostgreSQL \
                 up\"): the first run's role needs CREATE on the database (or owns it) to \
                 create the election schema; every other role, as the schema's owner: GRANT \
                 USAGE ON SCHEMA election TO it, then GRANT SELECT, INSERT, UPDATE, DELETE ON \
                 ALL TABLES and GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA election \
                 (a reader: SELECT only); with ?schema=S, name S instead",
            ),
            Error::Unusable { .. } => permanent(
                "check the URL's user and database, the password (PGPASSWORD, ?passfile=, \
                 PGPASSFILE or ~/.pgpass; never on the command line) and the user's privileges \
                 on the database (CREATE on it for the election schema)",
            ),
            Error::UnsafeSetting { .. } => permanent(
                "set synchronous_commit to on for this role or database (ALTER ROLE ... SET \
                 synchronous_commit = on)",
            ),
            Error::SchemaTooNew { .. } => {
                permanent("upgrade elect: a newer version wrote this schema")
            }
            Error::CorruptRow { .. } => permanent(
                "a lease row holds values elect never writes: restore the election schema from a \
                 backup (never delete its epoch records)",
            ),
            // Nothing was sent: the process's session (or the application's
            // pool) stayed busy past the bound; it may pass.
            Error::PoolExhausted { .. } => Class::new(Disposition::Transient).hint(
                "the process's PostgreSQL session or the pool stayed busy past the request \
                 timeout (a long statement or a lock held elsewhere): it is retried; if it \
                 persists, look for long transactions on the election's rows",
            ),
            Error::Config(_) => Class::new(Disposition::Permanent),
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

/// What sqlx said, for a message: a server error as its message, its
/// detail and its SQLSTATE (never sqlx's `at line N`, the line of the
/// server's C source that raised it); anything else as sqlx says it.
pub(crate) fn driver(e: &sqlx::Error) -> String {
    let sqlx::Error::Database(db) = e else {
        return e.to_string();
    };
    let mut text = db.message().to_owned();
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        if let Some(detail) = pg.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        text.push_str(&format!(" [SQLSTATE {}]", pg.code()));
    } else if let Some(code) = db.code() {
        text.push_str(&format!(" [SQLSTATE {code}]"));
    }
    text
}

/// SQLSTATE classes and codes that retrying later may fix.
fn transient(code: &str) -> bool {
    code.starts_with("08") // connection exception
        || code.starts_with("53") // insufficient resources (too many connections)
        || code.starts_with("57P") // admin/crash shutdown, cannot connect now
        || code.starts_with("40") // serialization failure, deadlock
        || matches!(
            code,
            "55P03" // lock_not_available (lock_timeout)
            | "57014" // query_canceled (statement_timeout)
            | "25006" // read_only_sql_transaction: a standby, until a failover
            | "55006" // object_in_use
        )
}

/// SQLSTATE classes that retrying cannot fix.
fn unusable(code: &str) -> Option<&'static str> {
    match code.get(..2)? {
        "28" => Some("the server refused the credentials"),
        "3D" => Some("no such database"),
        "3F" => Some("no such schema"),
        "42" if code == "42501" => Some("the role lacks a privilege the election tables need"),
        "42" => Some("the election tables have another shape (or a statement is invalid)"),
        _ => None,
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        let code = match &e {
            sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
            sqlx::Error::Configuration(_) => {
                return Error::Unusable {
                    reason: "the connection settings are invalid".into(),
                    source: e,
                };
            }
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => return Error::Unavailable(e),
            _ => None,
        };
        match code.as_deref() {
            Some("2200H") => Error::Config(ConfigError::EpochExhausted),
            Some(c) if transient(c) => Error::Unavailable(e),
            Some(c) => match unusable(c) {
                Some(reason) => Error::Unusable {
                    reason: reason.into(),
                    source: e,
                },
                None => Error::Database(e),
            },
            None => Error::Database(e),
        }
    }
}

impl Error {
    /// This error as the core's error, grouped by what the caller should do.
    ///
    /// ```no_run
    /// use election_core::ElectionName;
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let name = ElectionName::new("ledger-writer")?;
    /// let claim = election.claim(name.as_str(), "host-a/1");
    /// // The backend's error as the core's, grouped by what the caller should do:
    /// let claim = claim.map_err(|e| e.into_core(&name))?;
    /// println!("{claim:?}");
    /// # Ok(()) }
    /// ```
    pub fn into_core(self, name: &ElectionName) -> election_core::Error {
        IntoCore::into_core(self, name)
    }

    /// True for a server that cannot serve the request now (retry later).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = loop {
    ///     match PostgresElection::connect(url, PostgresOptions::default()).await {
    ///         Ok(election) => break election,
    ///         // The server cannot answer now: try again.
    ///         Err(e) if e.is_unavailable() => {
    ///             eprintln!("{e}; retrying");
    ///             tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    ///         }
    ///         Err(e) => return Err(e.into()),
    ///     }
    /// };
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable(_) | Error::TimedOut { .. } | Error::PoolExhausted { .. }
        )
    }
}

election_sql::impl_into_core!(Error {
    location: Error::Unusable { .. } | Error::UnsafeSetting { .. } | Error::SchemaTooNew { .. },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_for_the_caller() {
        let name = ElectionName::new("n").unwrap();
        let config = |e: Error| matches!(e.into_core(&name), election_core::Error::Config(_));
        assert!(config(Error::SchemaTooNew {
            found: 9,
            supported: 1
        }));
        assert!(config(Error::UnsafeSetting {
            setting: "synchronous_commit",
            value: "off".into()
        }));
        // Corrupt rows and unknown outcomes: the shared mapping
        // (election_sql::impl_into_core!, tested there).
        assert!(Error::from(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(matches!(
            Error::from(sqlx::Error::PoolClosed).into_core(&name),
            election_core::Error::Unavailable { .. }
        ));
        assert!(matches!(
            Error::from(sqlx::Error::Configuration("x".into())),
            Error::Unusable { .. }
        ));
        assert!(transient("08006") && transient("57P01") && transient("55P03"));
        assert!(!transient("42P01") && unusable("42P01").is_some());
        assert!(unusable("23505").is_none());
    }
}
