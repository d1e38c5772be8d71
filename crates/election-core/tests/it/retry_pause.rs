//! The campaign's backoff while the backend fails (ADR 0064, 0084, 0092):
//! at least the poll interval or `DEFAULT_POLL_INTERVAL`, whichever is
//! shorter, never above `MAX_RETRY_PAUSE`, never shorter after one more
//! failure; and the retries a campaign counts.

use std::time::Duration;

use election_core::{Candidate, DEFAULT_POLL_INTERVAL, Error, MAX_RETRY_PAUSE, retry_pause};
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
        prop_assert!(pause >= poll.min(DEFAULT_POLL_INTERVAL));
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
/// try must not leave the name without a leader for an hour, nor for
/// `MAX_RETRY_PAUSE`: the retry comes after at most the default poll
/// interval. Seen in CI: a PostgreSQL candidate with `--poll-ms 3600000`
/// silent for 60 s after "campaigning" (ADR 0084), then one elected 5.26 s
/// after a clean resign (ADR 0092).
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
        waited <= DEFAULT_POLL_INTERVAL,
        "elected {waited:?} after one failure"
    );
    assert_eq!(candidate.retries().total, 1);
    term.resign().await.expect("resign");
}

/// The CI failure of ADR 0092 as a model: a waiter with an hourly poll
/// whose first try fails while another holds the name, and the holder
/// resigns a second later. The waiter is back to waiting for the release's
/// wake-up by then, and is elected at the resign, not at the end of a
/// `MAX_RETRY_PAUSE` it slept through.
#[tokio::test(start_paused = true)]
async fn a_waiter_whose_try_failed_is_woken_by_a_release_soon_after() {
    let backend = MemoryBackend::new();
    let holder = Candidate::new(backend.claim("jobs", "a").expect("claim"));
    let held = holder.campaign().await.expect("a's term");
    backend.fail(Step::TryClaim, 1);
    let waiter = Candidate::new(backend.claim("jobs", "b").expect("claim"))
        .with_poll_interval(Duration::from_secs(3600))
        .expect("an hour is a valid poll interval");
    let campaign = tokio::spawn(async move {
        let term = waiter.campaign().await.expect("b's term");
        (Instant::now(), term, waiter.retries().total)
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resigned = Instant::now();
    held.resign().await.expect("resign");
    let (elected, term, retries) = campaign.await.expect("b's campaign");
    assert_eq!(retries, 1, "b's first try failed once");
    let after = elected - resigned;
    assert!(
        after <= DEFAULT_POLL_INTERVAL,
        "b was elected {after:?} after a's resign"
    );
    term.resign().await.expect("resign");
}
