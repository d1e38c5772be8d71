//! The holder's renewal: the shared renewal glue
//! ([`election_sql::renew_term`] over the core's
//! [`renew_until_lost`](election_core::renew_until_lost), rule 2) with
//! SQLite's step, one conditional renewal of the term's row.

use std::sync::Arc;

use election_core::{ElectionName, Epoch, TermReporter};
use election_sql::RenewOutcome;
use tokio::time::Instant;

use crate::context::Context;

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
    let (validity, every) = (ctx.options.validity(), ctx.options.renew_interval());
    let renew_once = |hold, budget| {
        let ctx = ctx.clone();
        async move {
            if let Err(e) = ctx.in_place() {
                return Ok(RenewOutcome::Refused(e.to_string()));
            }
            Ok::<_, crate::Error>(if ctx.renew_within(hold, budget).await? {
                RenewOutcome::Landed
            } else {
                RenewOutcome::Refused("the lease row shows another holder".into())
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
