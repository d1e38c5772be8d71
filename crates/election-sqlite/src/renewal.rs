//! The holder's renewal loop: keeps the lease alive and reports the loss
//! before the lease could run out (rule 2).

use std::sync::Arc;
use std::time::Duration;

use election_core::{ElectionName, Epoch, LossReason, LossReporter};
use tokio::time::Instant;

use crate::election::Inner;
use crate::{Error, row};

/// Renews every renew interval; retries failed renewals until the validity
/// deadline; reports the loss at the deadline, when the row shows another
/// holder, or when the database file was deleted or replaced.
pub(crate) async fn renew_until_lost(
    inner: Arc<Inner>,
    name: ElectionName,
    nonce: i64,
    epoch: Epoch,
    mut valid_until: Instant,
    reporter: LossReporter,
) {
    let options = inner.options;
    let retry = (options.renew_interval() / 4).max(Duration::from_millis(1));
    let epoch_i64 = i64::try_from(epoch.get()).unwrap_or(i64::MAX);
    let mut next = valid_until - options.validity() + options.renew_interval();
    loop {
        tokio::time::sleep_until(next.min(valid_until)).await;
        let sent = inner.clock.now();
        if sent >= valid_until {
            reporter.lose(LossReason::Expired);
            return;
        }
        if let Some(db) = &inner.db_file
            && !db.in_place()
        {
            reporter.lose(LossReason::Revoked {
                detail: format!(
                    "the database file {} was deleted or replaced",
                    db.path.display()
                ),
            });
            return;
        }
        let renewal = row::renew(
            &inner.pool,
            name.as_str(),
            nonce,
            epoch_i64,
            inner.clock.wall_unix_ms(),
        );
        match tokio::time::timeout(valid_until - sent, renewal).await {
            Ok(Ok(true)) => {
                valid_until = sent + options.validity();
                reporter.renewed(valid_until);
                next = sent + options.renew_interval();
            }
            Ok(Ok(false)) => {
                reporter.lose(LossReason::Revoked {
                    detail: "the lease row shows another holder".into(),
                });
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(%name, epoch = epoch.get(), error = %e, "renewal failed; retrying until the lease runs out");
                next = inner.clock.now() + retry;
            }
            Err(_) => {
                let after = valid_until - sent;
                reporter.lose(LossReason::Failed(Arc::new(Error::OutcomeUnknown {
                    after,
                })));
                return;
            }
        }
    }
}
