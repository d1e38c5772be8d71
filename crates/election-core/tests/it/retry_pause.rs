//! The campaign's backoff while the backend fails (ADR 0064, 0084): at
//! least the poll interval or `MAX_RETRY_PAUSE`, whichever is shorter,
//! never above `MAX_RETRY_PAUSE`, never shorter after one more failure; and
//! the retries a campaign counts.

use std::time::Duration;

use election_core::{Candidate, Error, MAX_RETRY_PAUSE, retry_pause};
use election_testkit::memory::{MemoryBackend, Step};
use proptest::prelude::*;
use tokio::time::Instant;

proptest! {
    #[test]
    fn the_pause_is_bounded_and_never_shrinks(
        poll_ms in 1u64..=3_600_000,
        failures in 0u32..=200,
    ) {
        let poll = Duration::from_millis(poll_ms);
        let pause = retry_pause(poll, failures);
        prop_assert!(pause >= poll.min(MAX_RETRY_PAUSE));
        prop_assert!(pause <= MAX_RETRY_PAUSE);
        prop_assert!(retry_pause(poll, failures.saturating_add(1)) >= pause);
    }
}

#[tokio::test(start_paused = true)]
async fn a_campaign_counts_its_retries_and_resets_the_run_when_the_backend_answers() {
    let backend = MemoryBackend::new();
    backend.fail(Step::TryClaim, 3);
    let candidate = Candidate::new(backend.claim("jobs", "a").expect("claim"));
    let term = candidate.campaign().await.expect("term");
    let retries = candidate.retries();
    assert_eq!(retries.in_a_row, 0);
    assert_eq!(retries.total, 3);
    assert!(matches!(
        retries.last_error,
        Some(Error::Unavailable { .. })
    ));
    assert_eq!(retries.next_pause, None);
    term.resign().await.expect("resign");
    // A single try never retries: the error is returned, not counted.
    backend.fail(Step::TryClaim, 1);
    assert!(candidate.try_campaign().await.is_err());
    assert_eq!(candidate.retries().total, 3);
}

/// With an hourly poll (a backend whose wake-up does the work), one failed
/// try must not leave the name without a leader for an hour: the retry
/// comes after at most `MAX_RETRY_PAUSE`. Seen in CI: a PostgreSQL
/// candidate with `--poll-ms 3600000` silent for 60 s after "campaigning".
#[tokio::test(start_paused = true)]
async fn a_long_poll_interval_does_not_delay_the_retry_after_a_failure() {
    let backend = MemoryBackend::new();
    backend.fail(Step::TryClaim, 1);
    let candidate = Candidate::new(backend.claim("jobs", "a").expect("claim"))
        .with_poll_interval(Duration::from_secs(3600))
        .expect("an hour is a valid poll interval");
    let started = Instant::now();
    let term = candidate.campaign().await.expect("term");
    let waited = started.elapsed();
    assert!(
        waited <= MAX_RETRY_PAUSE,
        "elected {waited:?} after one failure"
    );
    assert_eq!(candidate.retries().total, 1);
    term.resign().await.expect("resign");
}
