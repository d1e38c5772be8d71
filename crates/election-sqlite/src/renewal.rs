//! The holder's renewal: the core's renewal driver
//! ([`election_core::renew_until_lost`], rule 2) with SQLite's step, one
//! conditional renewal of the term's row.

use std::sync::Arc;

use election_core::{
    ElectionName, Epoch, LossReason, RenewalPolicy, Renewed, TermReporter, renew_until_lost,
};
use tokio::time::Instant;

use crate::context::Context;
use crate::row::Hold;

/// Renews every renew interval until the term is lost: the core's driver
/// retries a failed or timed-out renewal until the validity deadline and
/// reports the loss then, or at once when the row shows another holder or
/// the database file was deleted or replaced or got a second name (ADR
/// 0046).
pub(crate) async fn renew_term(
    ctx: Arc<Context>,
    name: ElectionName,
    nonce: i64,
    epoch: Epoch,
    valid_until: Instant,
    reporter: TermReporter,
) {
    let options = ctx.options;
    let Ok(policy) = RenewalPolicy::new(options.validity(), options.renew_interval()) else {
        // SqliteOptions keeps the renew interval below the validity.
        reporter.lose(LossReason::Expired);
        return;
    };
    let epoch = i64::try_from(epoch.get()).unwrap_or(i64::MAX);
    let renew_once = |budget| {
        let (ctx, name) = (ctx.clone(), name.clone());
        async move {
            if let Err(e) = ctx.in_place() {
                return Renewed::Refused(LossReason::Revoked {
                    detail: e.to_string(),
                });
            }
            let hold = Hold {
                name: name.as_str(),
                nonce,
                epoch,
            };
            match ctx.renew_within(hold, budget).await {
                Ok(true) => Renewed::Landed,
                Ok(false) => Renewed::Refused(LossReason::Revoked {
                    detail: "the lease row shows another holder".into(),
                }),
                Err(e) => Renewed::Failed(e.into_core(&name)),
            }
        }
    };
    renew_until_lost(policy, valid_until, &reporter, renew_once).await;
}
