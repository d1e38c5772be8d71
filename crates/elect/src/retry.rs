//! Progress lines for a campaign that rides out transient backend errors
//! (a full disk, a server down), instead of waiting silently; and the
//! cause when `--timeout` runs out meanwhile. Opening the backend waits
//! for a server that is down the same way ([`open_waiting`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::exit::Failure;
use crate::report::Reporter;

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

    /// For [`election_core::Candidate::on_retry`]: a line for each failed
    /// attempt (the campaign backs off, so at most one every
    /// [`election_core::MAX_RETRY_PAUSE`] while a failure lasts).
    pub(crate) fn reporter(&self) -> impl Fn(&election_core::Error) + Send + Sync + 'static {
        let this = self.clone();
        move |e| this.failed(e)
    }

    fn failed(&self, e: &election_core::Error) {
        let failure = Failure::from(e.clone());
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.count += 1;
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

/// Opens the backend, waiting for a server that cannot be reached (a
/// transient failure, 69) as a campaign waits for one: a line on stderr
/// for each failed attempt, the next one after a backoff
/// ([`election_core::retry_pause`] of the default poll interval: 250 ms,
/// doubling, at most 5 s). `no_wait`: one attempt, its failure at once.
/// `deadline` (`--timeout`): the last attempt is cut off there, and the
/// failure says how long it waited and why. A permanent failure (78: bad
/// configuration, credentials refused) is returned at once: retrying
/// cannot fix it.
///
/// Cancel safety: cancel safe (nothing is held before the campaign).
pub(crate) async fn open_waiting(
    url: Option<&crate::backend::Url>,
    timing: crate::backend::Timing,
    report: Reporter,
    no_wait: bool,
    timeout: Option<(tokio::time::Instant, Duration)>,
) -> Result<crate::backend::Opened, Failure> {
    use crate::exit;
    let deadline = timeout.map(|(at, _)| at);
    let passed = || deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
    let mut attempts: u32 = 0;
    let mut last: Option<Failure> = None;
    loop {
        attempts += 1;
        let opening = crate::backend::Opened::open(url, timing, Some(report));
        let opened = match deadline {
            None => opening.await,
            Some(d) => match tokio::time::timeout_at(d, opening).await {
                Ok(r) => r,
                // Cut off at --timeout: the last attempt's cause, if any.
                Err(_) => Err(last.take().unwrap_or_else(|| {
                    Failure::new(exit::UNAVAILABLE, "the backend did not answer")
                        .hint("check that the server runs and the URL's host and port are right")
                })),
            },
        };
        let failure = match opened {
            Ok(opened) => return Ok(opened),
            Err(f) if f.code != exit::UNAVAILABLE || no_wait => return Err(f),
            Err(f) => f,
        };
        let pause = election_core::retry_pause(election_core::DEFAULT_POLL_INTERVAL, attempts);
        // Not past --timeout.
        let pause = deadline.map_or(pause, |d| {
            pause.min(d.saturating_duration_since(tokio::time::Instant::now()))
        });
        if !passed() {
            let hint = failure.hint.as_deref().unwrap_or("");
            report.event(
                "retrying",
                &format!(
                    "cannot reach the backend (attempt {attempts}, next in {pause:?}): {} ({hint})",
                    failure.message
                ),
                json!({
                    "error": failure.message,
                    "hint": failure.hint,
                    "attempt": attempts,
                    "next_in_ms": crate::report::duration_ms(pause),
                }),
            );
            tokio::time::sleep(pause).await;
        }
        if passed() {
            let waited = timeout.map_or(Duration::ZERO, |(_, d)| d);
            let mut f = Failure::new(
                failure.code,
                format!(
                    "not elected within {waited:?}: the backend could not be reached \
                     ({attempts} attempts): {}",
                    failure.message
                ),
            );
            f.hint = failure.hint;
            return Err(f);
        }
        last = Some(failure);
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
            value: None,
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
