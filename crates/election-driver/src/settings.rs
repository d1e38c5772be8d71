//! What a tool asks of the backend it opens ([`Settings`]), and lease
//! settings checked against the backend before it is opened
//! ([`LeaseCheck`], no I/O): a tool says what is wrong in its own terms.

use std::time::Duration;

/// How to open a backend: lease timing (`None` keeps the backend's
/// default) and whether only to read.
///
/// A backend without a lease (the file backend: a lock is held until it is
/// freed) has no use for lease timing: `election_url::Settings::unused_by`
/// names the settings a scheme ignores, for a tool to refuse or note them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The lease TTL.
    pub ttl: Option<Duration>,
    /// The renew interval; by default a third of the TTL.
    pub renew: Option<Duration>,
    /// The failover grace (where the backend has one); lowered to the
    /// renew interval if only that is given.
    pub grace: Option<Duration>,
    /// Only read (who leads, changes): nothing is created. A missing
    /// directory, database, schema or bucket is
    /// [`Error::Absent`](crate::Error::Absent).
    pub observer: bool,
    /// With `observer`: an operator's open, which may also write an
    /// operator's steps ([`revoke`](crate::ElectionSteps::revoke)), so the
    /// store is opened for writing where a reader's would be read-only.
    /// Still nothing is created, and the lease settings are the store's.
    pub operator: bool,
    /// How long connecting to a server may take (by default the backend's
    /// request timeout, at least a second).
    pub connect_timeout: Option<Duration>,
}

impl Settings {
    /// The lease settings given (`--ttl`-style names: `ttl`, `renew`,
    /// `grace`) that are not in `used`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_driver::Settings;
    ///
    /// let mut settings = Settings::default();
    /// settings.ttl = Some(Duration::from_secs(9));
    /// settings.grace = Some(Duration::from_secs(1));
    /// assert_eq!(settings.given_except(&["ttl", "renew"]), ["grace"]);
    /// ```
    pub fn given_except(&self, used: &[&str]) -> Vec<&'static str> {
        [
            ("ttl", self.ttl.is_some()),
            ("renew", self.renew.is_some()),
            ("grace", self.grace.is_some()),
        ]
        .into_iter()
        .filter(|&(name, given)| given && !used.contains(&name))
        .map(|(name, _)| name)
        .collect()
    }
}

/// Lease settings the backend a URL names would refuse, found before it is
/// opened: the values in effect (defaults filled in) and the bound they
/// break, for a tool to word in its own terms (`elect` names its flags).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseCheck {
    /// The backend has no lease (a lock): no TTL, renew interval or grace.
    #[error("the {scheme} backend has no lease: a TTL, renew interval or grace has no meaning")]
    NoLease {
        /// The scheme.
        scheme: &'static str,
    },
    /// The backend has no failover grace.
    #[error("the {scheme} backend has no failover grace")]
    NoGrace {
        /// The scheme.
        scheme: &'static str,
    },
    /// The TTL in effect is below the backend's least.
    #[error("ttl {ttl:?} is too short for the {scheme} backend: at least {min:?}")]
    TtlTooShort {
        /// The scheme.
        scheme: &'static str,
        /// The TTL in effect.
        ttl: Duration,
        /// Whether the TTL was given (else it is the default).
        given: bool,
        /// The least TTL.
        min: Duration,
    },
    /// The renew interval in effect is below the least.
    #[error("renew interval {renew:?} is too short: at least {min:?}")]
    RenewTooShort {
        /// The renew interval in effect.
        renew: Duration,
        /// The least.
        min: Duration,
    },
    /// The renew interval in effect is above the most the TTL allows.
    #[error("renew interval {renew:?} is too long for ttl {ttl:?}: at most {max:?}")]
    RenewTooLong {
        /// The renew interval in effect.
        renew: Duration,
        /// The TTL in effect.
        ttl: Duration,
        /// Whether the TTL was given.
        ttl_given: bool,
        /// The most.
        max: Duration,
    },
    /// The failover grace is above the renew interval.
    #[error("failover grace {grace:?} is above the renew interval {renew:?}")]
    GraceAboveRenew {
        /// The grace in effect.
        grace: Duration,
        /// The renew interval in effect.
        renew: Duration,
    },
}

/// The bounds every leased backend keeps: a TTL of at least `min_ttl`, a
/// renew interval of at least 2 ms and at most half of nine tenths of the
/// TTL (two renewals fit in the TTL less its safety margin).
///
/// ```
/// use std::time::Duration;
/// use election_driver::{LeaseCheck, check_lease};
///
/// let ms = Duration::from_millis;
/// assert_eq!(check_lease("sqlite", true, ms(3000), ms(1000), ms(10)), Ok(()));
/// assert!(matches!(
///     check_lease("sqlite", true, ms(100), ms(50), ms(10)),
///     Err(LeaseCheck::RenewTooLong { .. })
/// ));
/// ```
pub fn check_lease(
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
