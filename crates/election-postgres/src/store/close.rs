//! The close grace (ADR 0086): an election's connections (its listener's,
//! and its pool's when this crate opened it) are closed no sooner than
//! [`CLOSE_GRACE`] after this process's last release was answered.
//!
//! The server runs one process per connection, and a server process that
//! ends costs the server's host CPU: measured on this project's 2-core
//! machine, 3–4 ms each, nearly all in the kernel (unmapping its memory,
//! copy-on-write faults of its exit path). A release wakes the successor by
//! `NOTIFY`, and the successor's take runs on the same server a fraction
//! of a millisecond later. A `close()` right after the release (a process
//! that resigns and exits: `elect run`, a service's shutdown) ended this
//! process's connections exactly then, so their server processes' exits
//! competed with the successor's take for the server's cores: B's server
//! process was seen waiting 4 ms for a core (`perf sched`), and a clean
//! handover between processes took 5.98 ms instead of 2.39 ms (the same
//! closed 5 ms later). The grace moves those exits after the take.
//!
//! The grace is a delay of `close()`, never of a release, a claim or a
//! loss: no rule depends on it. A process that exits without `close()`
//! (or is killed) ends its connections at once, as before.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How long after this process's last release (a resign, a dropped term's
/// or a lease set's release) [`PostgresElection::close`] waits before it
/// ends the election's connections (its listener's, and its pool's when it
/// opened the pool): long enough for a successor, woken by the
/// release's notification, to have taken the released row (one round trip
/// and one WAL flush; 1–3 ms measured on an idle 2-core machine) before the
/// server's processes of this pool end (ADR 0086).
///
/// [`PostgresElection::close`]: crate::PostgresElection::close
pub const CLOSE_GRACE: Duration = Duration::from_millis(10);

/// When this process's last release was answered, shared by every copy of
/// one store.
#[derive(Debug, Default)]
pub(crate) struct LastRelease(Mutex<Option<Instant>>);

impl LastRelease {
    /// Notes a release answered at `at` (an earlier one never moves the
    /// mark back).
    pub(crate) fn mark(&self, at: Instant) {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *last = Some(last.map_or(at, |before| before.max(at)));
    }

    /// The moment before which a close waits: [`CLOSE_GRACE`] after the
    /// last release, or `None` if this process released nothing.
    pub(crate) fn close_not_before(&self) -> Option<Instant> {
        let last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        last.map(|at| at + CLOSE_GRACE)
    }

    /// Waits until [`close_not_before`](Self::close_not_before) (at once if
    /// it has passed or there is none). Cancel safe.
    pub(crate) async fn wait(&self) {
        if let Some(at) = self.close_not_before() {
            tokio::time::sleep_until(at).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_released_means_no_wait() {
        assert_eq!(LastRelease::default().close_not_before(), None);
    }

    #[test]
    fn a_close_waits_the_grace_after_the_latest_release() {
        let t0 = Instant::now();
        let last = LastRelease::default();
        last.mark(t0 + Duration::from_millis(5));
        assert_eq!(
            last.close_not_before(),
            Some(t0 + Duration::from_millis(5) + CLOSE_GRACE)
        );
        // A release answered later moves the mark on; one answered earlier
        // (a background release that finished out of order) does not move
        // it back.
        last.mark(t0 + Duration::from_millis(9));
        last.mark(t0 + Duration::from_millis(1));
        assert_eq!(
            last.close_not_before(),
            Some(t0 + Duration::from_millis(9) + CLOSE_GRACE)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_at_the_grace_and_not_before() {
        let last = LastRelease::default();
        let released = Instant::now();
        last.mark(released);
        last.wait().await;
        assert_eq!(released.elapsed(), CLOSE_GRACE);
        // Once the grace has passed, a close does not wait again.
        let again = Instant::now();
        last.wait().await;
        assert_eq!(again.elapsed(), Duration::ZERO);
    }
}
