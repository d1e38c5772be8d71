//! The holder's renewal: the core's renewal driver
//! ([`election_core::renew_until_lost`], rule 2) with PostgreSQL's step,
//! one conditional renewal of the term's row.

use std::sync::Arc;

use election_core::{
    ElectionName, Epoch, LossReason, RenewalPolicy, Renewed, TermReporter, renew_until_lost,
};
use tokio::time::Instant;

use crate::context::Context;
use crate::row::Hold;

/// Renews every renew interval until the term is lost: the core's driver
/// counts validity from before each renewal is sent, retries a failed or
/// timed-out renewal (an unknown outcome, not counted) until the validity
/// deadline and reports the loss then, or at once when the row shows
/// another term or none.
pub(crate) async fn renew_term(
    ctx: Arc<Context>,
    name: ElectionName,
    nonce: i64,
    epoch: Epoch,
    valid_until: Instant,
    reporter: TermReporter,
) {
    let options = &ctx.options;
    let Ok(policy) = RenewalPolicy::new(options.validity(), options.renew_interval()) else {
        // PostgresOptions keeps the renew interval below the validity.
        reporter.lose(LossReason::Expired);
        return;
    };
    let epoch = i64::try_from(epoch.get()).unwrap_or(i64::MAX);
    let renew_once = |budget| {
        let (ctx, name) = (ctx.clone(), name.clone());
        async move {
            let hold = Hold {
                name: name.as_str(),
                nonce,
                epoch,
            };
            match ctx.renew_within(&[hold], budget).await {
                Ok(renewed) if renewed.contains(name.as_str()) => Renewed::Landed,
                Ok(_) => Renewed::Refused(LossReason::Revoked {
                    detail: "the lease row shows another term or none".into(),
                }),
                Err(e) => Renewed::Failed(e.into_core(&name)),
            }
        }
    };
    renew_until_lost(policy, valid_until, &reporter, renew_once).await;
}
