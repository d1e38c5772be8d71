//! The holder's renewal loop: keeps the lease alive and reports the loss
//! before the lease could run out (rule 2).

use std::sync::Arc;
use std::time::Duration;

use election_core::{ElectionName, Epoch, LossReason, LossReporter};
use tokio::time::Instant;

use crate::context::Context;
use crate::error::Error;
use crate::row::Hold;

/// Renews every renew interval; retries failed renewals until the validity
/// deadline; reports the loss at the deadline, when the row shows another
/// holder, or when the database file was deleted or replaced.
pub(crate) async fn renew_until_lost(
    ctx: Arc<Context>,
    name: ElectionName,
    nonce: i64,
    epoch: Epoch,
    mut valid_until: Instant,
    reporter: LossReporter,
) {
    let options = ctx.options;
    let retry = (options.renew_interval() / 4).max(Duration::from_millis(1));
    let hold = Hold {
        name: name.as_str(),
        nonce,
        epoch: i64::try_from(epoch.get()).unwrap_or(i64::MAX),
    };
    let mut next = valid_until - options.validity() + options.renew_interval();
    loop {
        tokio::time::sleep_until(next.min(valid_until)).await;
        let sent = ctx.clock.now();
        if sent >= valid_until {
            reporter.lose(LossReason::Expired);
            return;
        }
        if !ctx.in_place() {
            reporter.lose(LossReason::Revoked {
                detail: ctx.replaced_detail(),
            });
            return;
        }
        match ctx.renew_within(hold, valid_until - sent).await {
            Ok(true) => {
                valid_until = sent + options.validity();
                reporter.renewed(valid_until);
                next = sent + options.renew_interval();
            }
            Ok(false) => {
                reporter.lose(LossReason::Revoked {
                    detail: "the lease row shows another holder".into(),
                });
                return;
            }
            Err(e @ Error::OutcomeUnknown { .. }) => {
                reporter.lose(LossReason::Failed(Arc::new(e)));
                return;
            }
            Err(e) => {
                tracing::warn!(%name, epoch = epoch.get(), error = %e, "renewal failed; retrying until the lease runs out");
                next = ctx.clock.now() + retry;
            }
        }
    }
}
