//! The lease timing flags (`--ttl`, `--renew`, `--grace`), checked in
//! the user's own terms before a library names its internal settings.

use std::time::Duration;

use election_url::LeaseCheck;

use crate::exit::{self, Failure};

/// Lease timing flags; `None` keeps the backend's default.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timing {
    pub(crate) ttl: Option<Duration>,
    pub(crate) renew: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    /// Only reads (`leader`, `observe`): accept the bucket's own TTL.
    pub(crate) observer: bool,
    /// With `observer`: an operator's command (`revoke`) that writes to
    /// the store it finds, creating nothing.
    pub(crate) operator: bool,
}

/// The file backend (the default) takes no lease flags.
pub(crate) fn refuse_timing(timing: &Timing) -> Result<(), Failure> {
    if timing.ttl.is_some() || timing.renew.is_some() || timing.grace.is_some() {
        return Err(lease_failure(&LeaseCheck::NoLease { scheme: "file" }));
    }
    Ok(())
}

/// A duration as the user writes it.
pub(crate) fn dur(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        format!("{d:?}")
    }
}

/// The URL's refusal of the lease flags ([`election_url::BackendUrl::check_lease`]),
/// in the user's own terms (`--ttl`, `--renew`, `--grace`), before a
/// library names its internal settings: the one place they are worded.
pub(crate) fn lease_failure(e: &LeaseCheck) -> Failure {
    let ttl_text = |ttl: Duration, given: bool| {
        if given {
            format!("--ttl {}", dur(ttl))
        } else {
            format!("the default --ttl {}", dur(ttl))
        }
    };
    match *e {
        LeaseCheck::NoLease { scheme } => Failure::config(format!(
            "--ttl, --renew and --grace have no meaning for the {scheme} backend"
        ))
        .hint("a file lock is held until the process ends or resigns: drop those flags"),
        LeaseCheck::NoGrace { scheme } => Failure::config(format!(
            "--grace has no meaning for the {scheme} backend (a contender waits a full TTL)"
        ))
        .hint("drop --grace"),
        LeaseCheck::TtlTooShort {
            scheme,
            ttl,
            given,
            min,
        } => Failure::config(format!(
            "{} is too short for the {scheme} backend: at least {}",
            ttl_text(ttl, given),
            dur(min)
        ))
        .hint("give a longer --ttl, e.g. --ttl 15s"),
        LeaseCheck::RenewTooShort { renew, min } => Failure::config(format!(
            "--renew {} is too short: at least {}",
            dur(renew),
            dur(min)
        ))
        .hint("give a longer --renew, or leave it out (a third of --ttl)"),
        LeaseCheck::RenewTooLong {
            renew,
            ttl,
            ttl_given,
            max,
        } => Failure::config(format!(
            "--renew {} is too long for {}: at most {} (a failed renewal must be retried before \
             the lease runs out: twice --renew plus a tenth of --ttl must fit in --ttl)",
            dur(renew),
            ttl_text(ttl, ttl_given),
            dur(max)
        ))
        .hint("give a shorter --renew or a longer --ttl; without --renew it is a third of --ttl"),
        LeaseCheck::GraceAboveRenew { grace, renew } => Failure::config(format!(
            "--grace {} is above the renew interval {} (--renew, by default a third of --ttl): \
             a new term must still be valid after its grace",
            dur(grace),
            dur(renew)
        ))
        .hint("give a shorter --grace or a longer --renew"),
        _ => Failure::config(exit::chain(e))
            .hint("fix --ttl, --renew or --grace (see elect run --help)"),
    }
}

/// A library's refusal of lease settings, in the user's flags.
pub(crate) fn flag_failure(e: &election_core::ConfigError) -> Failure {
    let text = exit::chain(e)
        .replace("renew_interval", "renew interval (--renew)")
        .replace("failover_grace", "--grace")
        .replace("busy_timeout", "busy timeout (half of --renew)")
        .replace("request_timeout", "request timeout (half of --renew)")
        .replace("setting ttl", "--ttl")
        .replace("ttl ", "--ttl ");
    Failure::config(text).hint("fix --ttl, --renew or --grace (see elect run --help)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The URL's refusals, in the user's flags (the texts before they
    /// moved to `election_url::BackendUrl::check_lease`).
    #[test]
    fn lease_refusals_name_the_flags() {
        let url: election_url::BackendUrl = "sqlite:///d/app.db".parse().unwrap();
        let refused = |ttl: u64, renew: Option<u64>| {
            let settings = election_url::Settings {
                ttl: Some(Duration::from_millis(ttl)),
                renew: renew.map(Duration::from_millis),
                ..election_url::Settings::default()
            };
            lease_failure(&url.check_lease(&settings).unwrap_err())
        };
        let f = refused(5, None);
        assert_eq!(f.code, exit::CONFIG);
        assert_eq!(
            f.message,
            "--ttl 5ms is too short for the sqlite backend: at least 10ms"
        );
        assert_eq!(
            refused(100, Some(50)).message,
            "--renew 50ms is too long for --ttl 100ms: at most 45ms (a failed renewal must be \
             retried before the lease runs out: twice --renew plus a tenth of --ttl must fit in \
             --ttl)"
        );
        let f = refuse_timing(&Timing {
            grace: Some(Duration::from_secs(1)),
            ..Timing::default()
        })
        .unwrap_err();
        assert_eq!(
            f.message,
            "--ttl, --renew and --grace have no meaning for the file backend"
        );
    }
}
