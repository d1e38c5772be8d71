//! A single term's renewal: the core's renewal driver
//! ([`renew_until_lost`], rule 2) over one conditional renewal of the
//! backend's.

use std::future::Future;
use std::sync::Arc;

use election_core::{
    ElectionName, Epoch, LossReason, RenewalPolicy, Renewed, TermReporter, WatchGuard, Won,
    renew_until_lost,
};
use tokio::time::Instant;

use crate::keyed::{HeldRow, IntoCore, LeaseRows};

/// Renews the term `epoch` of `name` (won by the attempt `nonce`, valid
/// until `valid_until`) over `rows` every renewal interval until it is
/// lost ([`renewal_policy`]): the core's driver counts the validity from before each renewal
/// is sent, retries a failed or timed-out renewal (an unknown outcome,
/// never counted) until the deadline and reports the loss then, or at once
/// when the row shows another term or none ([`LeaseRows::REFUSED`]) or the
/// store is no longer in place ([`LeaseRows::in_place`]). Each renewal
/// ([`LeaseRows::renew_asked`]) also reads the transfer request stored
/// beside the term (ADR 0112) and reports it to `reporter`, so the holder
/// hears of a request within one renewal interval.
///
/// Cancel safety: cancel safe (dropped, nothing more is renewed; the
/// reporter is dropped with it).
///
/// ```no_run
/// use std::sync::Arc;
/// use election_core::{ElectionName, Epoch, TermReporter};
/// use election_sql::{LeaseRows, renew_term};
///
/// // A backend spawns it for the term it just won:
/// fn spawn_renewal<R: LeaseRows + 'static>(rows: Arc<R>, name: ElectionName, reporter: TermReporter) {
///     let valid_until = tokio::time::Instant::now() + rows.times().validity();
///     tokio::spawn(renew_term(rows, name, (42, Epoch::FIRST), valid_until, reporter));
/// }
/// ```
pub async fn renew_term<R: LeaseRows>(
    rows: Arc<R>,
    name: ElectionName,
    (nonce, epoch): (i64, Epoch),
    valid_until: Instant,
    reporter: TermReporter,
) {
    let Some(policy) = renewal_policy(&*rows) else {
        // The backends' options keep the renew interval below the validity.
        reporter.lose(LossReason::Expired);
        return;
    };
    let term = epoch;
    let epoch = i64::try_from(epoch.get()).unwrap_or(i64::MAX);
    let hold = HeldRow {
        name: name.as_str(),
        nonce,
        epoch,
    };
    let name = &name;
    let reporting = &reporter;
    let renew_once = |budget| {
        let rows = rows.clone();
        let reporter = reporting;
        async move {
            if let Err(detail) = rows.in_place() {
                return Renewed::Refused(LossReason::Revoked { detail });
            }
            match rows.renew_asked(hold, budget).await {
                Ok(Some(asked)) => {
                    // A transfer request stored beside the term (ADR
                    // 0112): reported (again, a no-op) at every renewal.
                    if let Some(request) = asked.and_then(|a| a.request(term)) {
                        reporter.transfer_requested(request);
                    }
                    Renewed::Landed
                }
                Ok(None) => Renewed::Refused(LossReason::Revoked {
                    detail: R::REFUSED.into(),
                }),
                Err(e) => Renewed::Failed(e.into_core(name)),
            }
        }
    };
    renew_until_lost(policy, valid_until, &reporter, renew_once).await;
}

/// A SQL claim's `watch` (the core's [`Claim::watch`](election_core::Claim::watch)):
/// spawns [`renew_term`] for the term `won` of `name`, won by the attempt
/// `nonce`, on the current tokio runtime; the guard stops it. A win
/// without a validity is refused ([`election_core::Error::NotHeld`]): a
/// lease row always expires.
///
/// Cancel safety: not async; the renewal runs until the guard is dropped
/// or the term is lost. Failure model: `NotHeld` as above, nothing else.
///
/// ```no_run
/// use std::sync::Arc;
/// use election_core::{ElectionName, TermReporter, WatchGuard, Won};
/// use election_sql::{LeaseRows, watch_term};
///
/// // A backend's `Claim::watch`, for the attempt `nonce` that won `won`:
/// fn watch<R: LeaseRows + 'static>(
///     rows: Arc<R>,
///     name: &ElectionName,
///     nonce: i64,
///     won: Won,
///     reporter: TermReporter,
/// ) -> Result<WatchGuard, election_core::Error> {
///     watch_term(rows, name, nonce, won, reporter)
/// }
/// ```
pub fn watch_term<R: LeaseRows + 'static>(
    rows: Arc<R>,
    name: &ElectionName,
    nonce: i64,
    won: Won,
    reporter: TermReporter,
) -> Result<WatchGuard, election_core::Error> {
    let valid_until = won
        .valid_until
        .ok_or_else(|| election_core::Error::NotHeld { name: name.clone() })?;
    let renewal = renew_term(
        rows,
        name.clone(),
        (nonce, won.epoch),
        valid_until,
        reporter,
    );
    Ok(WatchGuard::task(tokio::spawn(renewal)))
}

/// One conditional write of a SQL claim's term (the core's
/// [`Claim::confirm`](election_core::Claim::confirm) and
/// [`Claim::proclaim`](election_core::Claim::proclaim)): `write` applies to
/// the row of `name` only while it shows the attempt `nonce` and its won
/// `epoch` with a holder, and answers whether it did.
/// [`election_core::Error::NotHeld`] if the attempt never won (`epoch` is
/// `None`; nothing is written) or the row shows another term or none; the
/// backend's error about `name` ([`IntoCore`]) otherwise.
///
/// Cancel safety: as `write`'s (the backends' are cancel safe: the row is
/// unchanged or written by this same term).
///
/// ```
/// # use election_core::ElectionName;
/// # use election_sql::{HeldRow, write_term};
/// # use election_sql::doc_support::Down;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let jobs = ElectionName::new("jobs")?;
/// // The row shows the term (nonce 42, epoch 7): the write applies.
/// let shows = |hold: HeldRow<'_>| async move { Ok::<_, Down>(hold.nonce == 42 && hold.epoch == 7) };
/// assert!(write_term(&jobs, 42, Some(7), shows).await.is_ok());
/// // Another term's row, or an attempt that never won: not held.
/// let refused = write_term(&jobs, 41, Some(7), shows).await;
/// assert!(matches!(refused, Err(election_core::Error::NotHeld { .. })));
/// let never_won = write_term(&jobs, 42, None, shows).await;
/// assert!(matches!(never_won, Err(election_core::Error::NotHeld { .. })));
/// // The backend cannot answer: its error, as the core groups it.
/// let down = write_term(&jobs, 42, Some(7), |_| async { Err::<bool, _>(Down) }).await;
/// assert!(matches!(down, Err(election_core::Error::Unavailable { .. })));
/// # Ok(()) }
/// ```
pub async fn write_term<'a, E, F>(
    name: &'a ElectionName,
    nonce: i64,
    epoch: Option<i64>,
    write: impl FnOnce(HeldRow<'a>) -> F,
) -> Result<(), election_core::Error>
where
    E: IntoCore,
    F: Future<Output = Result<bool, E>>,
{
    let not_held = || election_core::Error::NotHeld { name: name.clone() };
    let hold = HeldRow::won(name.as_str(), nonce, epoch).ok_or_else(not_held)?;
    match write(hold).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(not_held()),
        Err(e) => Err(e.into_core(name)),
    }
}

/// The renewal policy of `rows`' leases: their validity, renewed every
/// renewal interval (`None` if the backend's options allow no renewal
/// before the validity ends, which their checks rule out).
///
/// ```
/// use std::time::Duration;
/// use election_core::RenewalPolicy;
///
/// // What it builds from a backend's times:
/// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3)).ok();
/// assert!(policy.is_some());
/// ```
pub fn renewal_policy<R: LeaseRows + ?Sized>(rows: &R) -> Option<RenewalPolicy> {
    let times = rows.times();
    RenewalPolicy::new(times.validity(), times.renew_interval()).ok()
}
