//! A single term's renewal: the core's renewal driver
//! ([`renew_until_lost`], rule 2) over one conditional renewal of the
//! backend's.

use std::future::Future;
use std::time::Duration;

use election_core::{
    ElectionName, Epoch, LossReason, RenewalPolicy, Renewed, TermReporter, renew_until_lost,
};
use tokio::time::Instant;

use crate::keyed::{Hold, IntoCore};

/// What one renewal of a term found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenewOutcome {
    /// The row was renewed by this term.
    Landed,
    /// The term is over (the row shows another term, or the backend's
    /// store is no longer the one it was): lost at once, with this detail.
    Refused(String),
}

/// Renews the term `epoch` of `name` (won by the attempt `nonce`, valid
/// until `valid_until`) every `renew_interval` until it is lost: the core's
/// driver counts the validity from before each renewal is sent, retries a
/// failed or timed-out renewal (an unknown outcome, never counted) until
/// the deadline and reports the loss then, or at once when `renew_once`
/// answers [`RenewOutcome::Refused`]. `renew_once` gets the term's
/// [`Hold`] and the attempt's budget.
///
/// Cancel safety: cancel safe (dropped, the term is reported by nothing
/// more: the caller drops its reporter with it).
///
/// ```
/// use std::time::Duration;
/// use election_core::{ElectionName, Epoch};
/// use election_sql::{Hold, IntoCore, RenewOutcome, renew_term};
///
/// struct Never;
/// impl IntoCore for Never {
///     fn into_core(self, name: &ElectionName) -> election_core::Error {
///         election_core::Error::NotHeld { name: name.clone() }
///     }
/// }
/// // A backend spawns it with the term's reporter:
/// async fn renew(name: ElectionName, reporter: election_core::TermReporter) {
///     let (validity, every) = (Duration::from_secs(9), Duration::from_secs(3));
///     let until = tokio::time::Instant::now() + validity;
///     renew_term(validity, every, &name, 42, Epoch::FIRST, until, reporter, |_hold: Hold<'_>, _budget: Duration| async {
///         Ok::<_, Never>(RenewOutcome::Landed) // one conditional renewal of the row
///     })
///     .await;
/// }
/// ```
#[allow(clippy::too_many_arguments)]
pub async fn renew_term<'a, F, Fut, E>(
    validity: Duration,
    renew_interval: Duration,
    name: &'a ElectionName,
    nonce: i64,
    epoch: Epoch,
    valid_until: Instant,
    reporter: TermReporter,
    renew_once: F,
) where
    F: Fn(Hold<'a>, Duration) -> Fut,
    Fut: Future<Output = Result<RenewOutcome, E>>,
    E: IntoCore,
{
    let Ok(policy) = RenewalPolicy::new(validity, renew_interval) else {
        // The backends' options keep the renew interval below the validity.
        reporter.lose(LossReason::Expired);
        return;
    };
    let epoch = i64::try_from(epoch.get()).unwrap_or(i64::MAX);
    let hold = Hold {
        name: name.as_str(),
        nonce,
        epoch,
    };
    let renew = |budget| {
        let attempt = renew_once(hold, budget);
        async move {
            match attempt.await {
                Ok(RenewOutcome::Landed) => Renewed::Landed,
                Ok(RenewOutcome::Refused(detail)) => {
                    Renewed::Refused(LossReason::Revoked { detail })
                }
                Err(e) => Renewed::Failed(e.into_core(name)),
            }
        }
    };
    renew_until_lost(policy, valid_until, &reporter, renew).await;
}
