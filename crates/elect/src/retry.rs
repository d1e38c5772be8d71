//! Progress lines for a campaign that rides out transient backend errors
//! (a full disk, a server down), instead of waiting silently; and the
//! cause when `--timeout` runs out meanwhile.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::exit::Failure;
use crate::report::Reporter;

/// How often an unchanged failure is said again.
const REPEAT: Duration = Duration::from_secs(30);

/// A failure this recent means the backend was still failing when a
/// bounded campaign gave up (a failing attempt takes at most a request
/// timeout, 2 s, and the poll interval).
const RECENT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    /// The last error, as text, and its exit code and hint.
    last: Option<Failure>,
    /// Retries so far.
    count: u64,
    /// When a line was last written.
    said: Option<Instant>,
    /// When the last failure came.
    at: Option<Instant>,
}

/// The transient errors of one campaign.
#[derive(Clone)]
pub(crate) struct Retries {
    name: String,
    report: Reporter,
    state: Arc<Mutex<State>>,
}

impl Retries {
    pub(crate) fn new(name: &str, report: Reporter) -> Self {
        Retries {
            name: name.to_owned(),
            report,
            state: Arc::default(),
        }
    }

    /// For [`election_core::Candidate::on_retry`]: a line for the first
    /// failure, for each change of cause, and every 30 s while it lasts.
    pub(crate) fn reporter(&self) -> impl Fn(&election_core::Error) + Send + Sync + 'static {
        let this = self.clone();
        move |e| this.failed(e)
    }

    fn failed(&self, e: &election_core::Error) {
        let failure = Failure::from(e.clone());
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.count += 1;
        let changed = state
            .last
            .as_ref()
            .is_none_or(|l| l.message != failure.message);
        let due = state.said.is_none_or(|t| t.elapsed() >= REPEAT);
        if changed || due {
            let hint = failure.hint.as_deref().unwrap_or("");
            self.report.event(
                "retrying",
                &format!(
                    "the backend failed, retrying (attempt {}): {} ({hint})",
                    state.count, failure.message
                ),
                json!({
                    "name": self.name,
                    "error": failure.message,
                    "hint": failure.hint,
                    "retries": state.count,
                }),
            );
            state.said = Some(Instant::now());
        }
        state.last = Some(failure);
        state.at = Some(Instant::now());
    }

    /// The failure to exit with when a bounded campaign ended without a
    /// term, if the backend was failing: `read` is the look at who leads
    /// made just after. Someone leads: none (not elected, 75). The look
    /// failed, or nobody leads and the last retry was recent: the backend
    /// was still failing, so its error (69, or 78 for a permanent one) is
    /// why. A failure long past (the backend recovered, another candidate
    /// led, then resigned) is not.
    pub(crate) fn gave_up(
        &self,
        waited: Option<Duration>,
        read: &Result<Option<election_core::Leader>, election_core::Error>,
    ) -> Option<Failure> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let last = state.last.as_ref()?;
        let cause = match read {
            Ok(Some(_)) => return None,
            Err(e) => Failure::from(e.clone()),
            Ok(None) if state.at.is_some_and(|t| t.elapsed() < RECENT) => {
                Failure::new(last.code, last.message.clone())
                    .hint(last.hint.clone().unwrap_or_default())
            }
            Ok(None) => return None,
        };
        let within = waited.map_or_else(String::new, |d| format!(" within {d:?}"));
        let mut f = Failure::new(
            cause.code,
            format!(
                "not elected{within}: the backend kept failing ({} retries): {}",
                state.count, cause.message
            ),
        );
        f.hint = cause.hint;
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit;
    use crate::report::Style;

    #[test]
    fn the_last_transient_error_is_why_a_bounded_campaign_gave_up() {
        let r = Retries::new("j", Reporter::new(Style::Quiet));
        let nobody = Ok(None);
        assert!(r.gave_up(None, &nobody).is_none());
        let name = election_core::ElectionName::new("j").unwrap();
        let full = std::io::Error::from_raw_os_error(nix::libc::ENOSPC);
        (r.reporter())(&election_core::Error::unavailable(&name, full));
        let f = r.gave_up(Some(Duration::from_secs(2)), &nobody).unwrap();
        assert_eq!(f.code, exit::UNAVAILABLE);
        assert!(f.message.contains("not elected within 2s"), "{}", f.message);
        assert!(f.message.contains("No space left"), "{}", f.message);
        // Someone leads: not elected, whatever failed before.
        let leads = Ok(Some(election_core::Leader {
            identity: election_core::Identity::new("a").unwrap(),
            epoch: election_core::Epoch::FIRST,
            since: None,
            renewed: None,
            ttl: None,
        }));
        assert!(r.gave_up(None, &leads).is_none());
        // The look itself fails: that is the cause.
        let down = Err(election_core::Error::unavailable(
            &name,
            std::io::Error::other("connection refused"),
        ));
        let f = r.gave_up(None, &down).unwrap();
        assert!(f.message.contains("connection refused"), "{}", f.message);
    }
}
