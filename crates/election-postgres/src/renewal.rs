//! The holder's renewal: the shared renewal glue
//! ([`election_sql::renew_term`] over the core's
//! [`renew_until_lost`](election_core::renew_until_lost), rule 2) with
//! PostgreSQL's step, one conditional renewal of the term's row.

use std::sync::Arc;

use election_core::{ElectionName, Epoch, TermReporter};
use election_sql::RenewOutcome;
use tokio::time::Instant;

use crate::context::Context;

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
    let (validity, every) = (ctx.options.validity(), ctx.options.renew_interval());
    let renew_once = |hold, budget| {
        let ctx = ctx.clone();
        async move {
            let renewed = ctx.renew_within(&[hold], budget).await?;
            Ok::<_, crate::Error>(if renewed.contains(hold.name) {
                RenewOutcome::Landed
            } else {
                RenewOutcome::Refused("the lease row shows another term or none".into())
            })
        }
    };
    election_sql::renew_term(
        validity,
        every,
        &name,
        nonce,
        epoch,
        valid_until,
        reporter,
        renew_once,
    )
    .await;
}
