//! Floors measured after idleness (ADR 0090). A cross-process handover
//! row's sample starts after the chain has left the machine idle for its
//! settle time (the new waiter given time to wait, nothing else running),
//! so its first request meets a server process, a client and virtual CPUs
//! that have gone to sleep. A floor run in a hot loop never does: on this
//! project's machine the first bare PostgreSQL transaction after 100 ms of
//! idleness took 0.84 ms against 0.19 ms in a loop. [`after_idle`] runs a
//! floor's rounds each after the same idleness, so that row and floor pay
//! the same wake-up; the hot floor stays beside it.

use std::time::{Duration, Instant};

use super::stats::ns;
use crate::Result;

/// Runs `warmup + n` rounds of `op` (given the round), each after `settle`
/// with this task asleep and nothing sent, and times each: the last `n`,
/// in nanoseconds. The sleep is outside the sample.
pub(crate) async fn after_idle(
    n: usize,
    warmup: usize,
    settle: Duration,
    mut op: impl AsyncFnMut(usize) -> Result<()>,
) -> Result<Vec<u64>> {
    let mut samples = Vec::with_capacity(n);
    for round in 0..warmup + n {
        tokio::time::sleep(settle).await;
        let t0 = Instant::now();
        op(round).await?;
        let took = ns(t0.elapsed());
        if round >= warmup {
            samples.push(took);
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round runs after the settle, the warm-up's are not kept, and
    /// a sample times the operation, not the sleep before it.
    #[tokio::test]
    async fn each_round_runs_after_the_settle_and_times_only_itself() {
        let settle = Duration::from_millis(30);
        let mut starts = Vec::new();
        let samples = after_idle(3, 2, settle, async |round| {
            starts.push((round, Instant::now()));
            tokio::time::sleep(Duration::from_millis(round as u64)).await;
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(samples.len(), 3);
        assert_eq!(
            starts.iter().map(|s| s.0).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        for pair in starts.windows(2) {
            let gap = pair[1].1 - pair[0].1;
            assert!(
                gap >= settle,
                "round {} began {gap:?} after the last",
                pair[1].0
            );
        }
        for (sample, round) in samples.iter().zip(2u64..) {
            assert!(*sample >= round * 1_000_000, "round {round}: {sample} ns");
            assert!(
                *sample < 30_000_000 + round * 1_000_000,
                "round {round}: {sample} ns, the settle counted"
            );
        }
    }

    /// An operation's error ends the run.
    #[tokio::test]
    async fn an_error_ends_the_run() {
        let mut calls = 0;
        let r = after_idle(5, 0, Duration::ZERO, async |round| {
            calls += 1;
            if round == 1 {
                Err("no server".into())
            } else {
                Ok(())
            }
        })
        .await;
        assert_eq!(r.unwrap_err().to_string(), "no server");
        assert_eq!(calls, 2);
    }
}
