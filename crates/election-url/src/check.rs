//! Lease settings checked against the backend a URL names, before it is
//! opened (no I/O): a tool says what is wrong in its own terms (flags).

use std::time::Duration;

use election_nats::NatsOptions;
use election_postgres::PostgresOptions;
use election_sqlite::SqliteOptions;

use crate::{BackendUrl, Settings};

/// Why lease settings do not fit the backend a URL names
/// ([`BackendUrl::check_lease`]), with the values in effect (given or
/// derived) for a tool to name in its own terms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseCheck {
    /// A TTL, renew interval or grace for a backend without a lease (the
    /// file backend's lock is held until it is freed).
    #[error("the {scheme} backend has no lease: a TTL, renew interval or grace has no meaning")]
    NoLease {
        /// The URL's scheme.
        scheme: &'static str,
    },
    /// A failover grace for a backend without one (a contender waits a
    /// full TTL).
    #[error("the {scheme} backend has no failover grace")]
    NoGrace {
        /// The URL's scheme.
        scheme: &'static str,
    },
    /// The TTL is below the backend's least.
    #[error("ttl {ttl:?} is too short for the {scheme} backend: at least {min:?}")]
    TtlTooShort {
        /// The URL's scheme.
        scheme: &'static str,
        /// The TTL in effect.
        ttl: Duration,
        /// Whether the settings gave it (else the backend's default).
        given: bool,
        /// The least TTL.
        min: Duration,
    },
    /// The renew interval is below the least.
    #[error("renew interval {renew:?} is too short: at least {min:?}")]
    RenewTooShort {
        /// The renew interval in effect.
        renew: Duration,
        /// The least.
        min: Duration,
    },
    /// A failed renewal could not be retried before the lease runs out:
    /// twice the renew interval plus a tenth of the TTL must fit in it.
    #[error("renew interval {renew:?} is too long for ttl {ttl:?}: at most {max:?}")]
    RenewTooLong {
        /// The renew interval in effect.
        renew: Duration,
        /// The TTL in effect.
        ttl: Duration,
        /// Whether the settings gave the TTL.
        ttl_given: bool,
        /// The longest renew interval for that TTL.
        max: Duration,
    },
    /// The failover grace is above the renew interval: a new term would
    /// not be valid after its grace.
    #[error("failover grace {grace:?} is above the renew interval {renew:?}")]
    GraceAboveRenew {
        /// The grace in effect.
        grace: Duration,
        /// The renew interval in effect.
        renew: Duration,
    },
}

/// The checks every lease has: a TTL of at least `min_ttl`, a renew
/// interval of at least 2 ms that a failed renewal can be retried within.
fn lease(
    scheme: &'static str,
    given: bool,
    ttl: Duration,
    renew: Duration,
    min_ttl: Duration,
) -> Result<(), LeaseCheck> {
    if ttl < min_ttl {
        return Err(LeaseCheck::TtlTooShort {
            scheme,
            ttl,
            given,
            min: min_ttl,
        });
    }
    let min = Duration::from_millis(2);
    if renew < min {
        return Err(LeaseCheck::RenewTooShort { renew, min });
    }
    let max = (ttl - ttl / 10) / 2;
    if renew > max {
        return Err(LeaseCheck::RenewTooLong {
            renew,
            ttl,
            ttl_given: given,
            max,
        });
    }
    Ok(())
}

impl BackendUrl {
    /// Checks the lease settings of `settings` (TTL, renew interval,
    /// grace) against the backend this URL names, before opening it, with
    /// no I/O: a file backend takes none; SQLite and PostgreSQL take no
    /// grace; a lease's TTL must be long enough for the backend (10 ms,
    /// NATS 1 s) and its renewal retried within it; NATS's grace (by
    /// default a third of the TTL, at most the renew interval) must not
    /// pass the renew interval. An observer's PostgreSQL and NATS lease
    /// settings are not checked (it takes the store's own).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, LeaseCheck, Settings};
    ///
    /// let url: BackendUrl = "sqlite:///var/lib/app/election.db".parse()?;
    /// let settings = Settings {
    ///     ttl: Some(Duration::from_millis(5)),
    ///     ..Settings::default()
    /// };
    /// assert!(matches!(url.check_lease(&settings), Err(LeaseCheck::TtlTooShort { .. })));
    /// assert_eq!(url.check_lease(&Settings::default()), Ok(()));
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck> {
        let scheme = self.scheme();
        let min = Duration::from_millis(10);
        match self {
            BackendUrl::File(_) => {
                if settings.ttl.is_some() || settings.renew.is_some() || settings.grace.is_some() {
                    return Err(LeaseCheck::NoLease { scheme });
                }
            }
            BackendUrl::Sqlite(_) => {
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
                lease(scheme, settings.ttl.is_some(), ttl, renew, min)?;
            }
            BackendUrl::Postgres(p) => {
                if settings.grace.is_some() {
                    return Err(LeaseCheck::NoGrace { scheme });
                }
                if !settings.observer {
                    let defaults = PostgresOptions::default();
                    let ttl = settings.ttl.or(p.ttl).unwrap_or(defaults.ttl());
                    let given = settings.ttl.is_some() || p.ttl.is_some();
                    let renew = settings.renew.or(p.renew).unwrap_or(if given {
                        ttl / 3
                    } else {
                        defaults.renew_interval()
                    });
                    lease(scheme, settings.ttl.is_some(), ttl, renew, min)?;
                }
            }
            BackendUrl::Nats(_) => {
                if !settings.observer {
                    let ttl = settings.ttl.unwrap_or(NatsOptions::default().ttl());
                    let renew = settings.renew.unwrap_or(ttl / 3);
                    let given = settings.ttl.is_some();
                    lease(scheme, given, ttl, renew, Duration::from_secs(1))?;
                    let grace = settings.grace.unwrap_or((ttl / 3).min(renew));
                    if grace > renew {
                        return Err(LeaseCheck::GraceAboveRenew { grace, renew });
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(ttl: Option<u64>, renew: Option<u64>, grace: Option<u64>) -> Settings {
        Settings {
            ttl: ttl.map(Duration::from_millis),
            renew: renew.map(Duration::from_millis),
            grace: grace.map(Duration::from_millis),
            ..Settings::default()
        }
    }

    fn url(s: &str) -> BackendUrl {
        s.parse().expect("a URL")
    }

    #[test]
    fn each_backend_takes_the_lease_settings_it_has() {
        let file = url("file:///d");
        assert_eq!(file.check_lease(&Settings::default()), Ok(()));
        assert_eq!(
            file.check_lease(&settings(None, Some(100), None)),
            Err(LeaseCheck::NoLease { scheme: "file" })
        );
        for u in ["sqlite:///d/app.db", "postgres://app@db:5432/app"] {
            let u = url(u);
            assert!(
                matches!(
                    u.check_lease(&settings(None, None, Some(1))),
                    Err(LeaseCheck::NoGrace { .. })
                ),
                "{u}"
            );
            assert_eq!(
                u.check_lease(&settings(Some(3000), None, None)),
                Ok(()),
                "{u}"
            );
        }
        let nats = url("nats://h:4222");
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
    }

    #[test]
    fn the_values_in_effect_are_named() {
        let sqlite = url("sqlite:///d/app.db");
        assert_eq!(
            sqlite.check_lease(&settings(Some(5), None, None)),
            Err(LeaseCheck::TtlTooShort {
                scheme: "sqlite",
                ttl: Duration::from_millis(5),
                given: true,
                min: Duration::from_millis(10)
            })
        );
        assert_eq!(
            sqlite.check_lease(&settings(Some(100), Some(1), None)),
            Err(LeaseCheck::RenewTooShort {
                renew: Duration::from_millis(1),
                min: Duration::from_millis(2)
            })
        );
        assert_eq!(
            sqlite.check_lease(&settings(Some(100), Some(50), None)),
            Err(LeaseCheck::RenewTooLong {
                renew: Duration::from_millis(50),
                ttl: Duration::from_millis(100),
                ttl_given: true,
                max: Duration::from_millis(45)
            })
        );
        // The NATS TTL is at least a second; an observer's is the bucket's.
        let nats = url("nats://h:4222");
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
