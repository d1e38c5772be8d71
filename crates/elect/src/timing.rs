//! The lease timing flags (`--ttl`, `--renew`, `--grace`), checked in
//! the user's own terms before a library names its internal settings.

use std::time::Duration;

use crate::exit::{self, Failure};

/// Lease timing flags; `None` keeps the backend's default.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timing {
    pub(crate) ttl: Option<Duration>,
    pub(crate) renew: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    /// Only reads (`leader`, `observe`): accept the bucket's own TTL.
    pub(crate) observer: bool,
}

pub(crate) fn refuse_timing(backend: &str, timing: &Timing) -> Result<(), Failure> {
    if timing.ttl.is_some() || timing.renew.is_some() || timing.grace.is_some() {
        return Err(Failure::config(format!(
            "--ttl, --renew and --grace have no meaning for the {backend} backend"
        ))
        .hint("a file lock is held until the process ends or resigns: drop those flags"));
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

/// Checks the lease flags in the user's own terms (`--ttl`, `--renew`,
/// `--grace`), before a library names its internal settings. `ttl` and
/// `renew` are the values in effect (given or derived).
pub(crate) fn check_lease_flags(
    backend: &str,
    timing: &Timing,
    ttl: Duration,
    renew: Duration,
    min_ttl: Duration,
) -> Result<(), Failure> {
    let given = |flag: &str, d: Option<Duration>| match d {
        Some(d) => format!("{flag} {}", dur(d)),
        None => format!("the default {flag} {}", dur(ttl)),
    };
    if ttl < min_ttl {
        return Err(Failure::config(format!(
            "{} is too short for the {backend} backend: at least {}",
            given("--ttl", timing.ttl),
            dur(min_ttl)
        ))
        .hint("give a longer --ttl, e.g. --ttl 15s"));
    }
    let min_renew = Duration::from_millis(2);
    if renew < min_renew {
        return Err(Failure::config(format!(
            "--renew {} is too short: at least {}",
            dur(renew),
            dur(min_renew)
        ))
        .hint("give a longer --renew, or leave it out (a third of --ttl)"));
    }
    let max_renew = (ttl - ttl / 10) / 2;
    if renew > max_renew {
        return Err(Failure::config(format!(
            "--renew {} is too long for {}: at most {} (a failed renewal must be retried before \
             the lease runs out: twice --renew plus a tenth of --ttl must fit in --ttl)",
            dur(renew),
            given("--ttl", timing.ttl),
            dur(max_renew)
        ))
        .hint("give a shorter --renew or a longer --ttl; without --renew it is a third of --ttl"));
    }
    Ok(())
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

/// `--grace` given for a backend that has none.
pub(crate) fn refuse_grace(backend: &str, timing: &Timing) -> Result<(), Failure> {
    match timing.grace {
        Some(_) => Err(Failure::config(format!(
            "--grace has no meaning for the {backend} backend (a contender waits a full TTL)"
        ))
        .hint("drop --grace")),
        None => Ok(()),
    }
}

/// The NATS lease flags: those of every lease, and a failover grace
/// (`--grace`, by default a third of the TTL or the renew interval) no
/// longer than the renew interval.
pub(crate) fn check_nats_flags(timing: &Timing) -> Result<(), Failure> {
    let ttl = timing
        .ttl
        .unwrap_or(election_nats::NatsOptions::default().ttl());
    let renew = timing.renew.unwrap_or(ttl / 3);
    check_lease_flags("nats", timing, ttl, renew, Duration::from_secs(1))?;
    let grace = timing.grace.unwrap_or((ttl / 3).min(renew));
    if grace > renew {
        return Err(Failure::config(format!(
            "--grace {} is above the renew interval {} (--renew, by default a third of --ttl): \
             a new term must still be valid after its grace",
            dur(grace),
            dur(renew)
        ))
        .hint("give a shorter --grace or a longer --renew"));
    }
    Ok(())
}
