//! What the in-process rows of every backend measure the same way: the
//! runtime they run on, a round of an uncontested campaign on any
//! [`Election`], and rounds of a measurement interleaved with its floor
//! (which of the two goes first alternates), each timed.

use std::time::Instant;

use election_core::{Candidate, Claim, Election};

use super::stats::ns;
use crate::Result;

/// A current-thread runtime with I/O and timers, as the in-process rows
/// run on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// How long `op` took, in nanoseconds.
pub(crate) async fn timed(op: impl Future<Output = Result<()>>) -> Result<u64> {
    let t0 = Instant::now();
    op.await?;
    Ok(ns(t0.elapsed()))
}

/// Runs `warmup + n` rounds of `floor(i)` and `measured(i)` (`i` the
/// round), alternating which goes first; each times itself. Returns the
/// results of the last `n` rounds: `(floor, measured)`.
pub(crate) async fn interleaved<F, M>(
    n: usize,
    warmup: usize,
    mut floor: impl AsyncFnMut(usize) -> Result<F>,
    mut measured: impl AsyncFnMut(usize) -> Result<M>,
) -> Result<(Vec<F>, Vec<M>)> {
    let mut floors = Vec::with_capacity(n);
    let mut measures = Vec::with_capacity(n);
    for round in 0..warmup + n {
        let (f, m) = if round % 2 == 0 {
            let f = floor(round).await?;
            (f, measured(round).await?)
        } else {
            let m = measured(round).await?;
            (floor(round).await?, m)
        };
        if round >= warmup {
            floors.push(f);
            measures.push(m);
        }
    }
    Ok((floors, measures))
}

/// As [`interleaved`], the two timed here: the samples of the last `n`
/// rounds, in nanoseconds, `(floor, measured)`.
pub(crate) async fn paired(
    n: usize,
    warmup: usize,
    mut floor: impl AsyncFnMut(usize) -> Result<()>,
    mut measured: impl AsyncFnMut(usize) -> Result<()>,
) -> Result<(Vec<u64>, Vec<u64>)> {
    interleaved(
        n,
        warmup,
        async |round| timed(floor(round)).await,
        async |round| timed(measured(round)).await,
    )
    .await
}

/// Operations per second over `n` runs of `op(i)` in a row, untimed one
/// by one.
pub(crate) async fn rate(n: usize, mut op: impl AsyncFnMut(usize) -> Result<()>) -> Result<f64> {
    let t0 = Instant::now();
    for i in 0..n {
        op(i).await?;
    }
    #[allow(
        clippy::cast_precision_loss,
        reason = "a count of operations, far below 2^52"
    )]
    let n = n as f64;
    Ok(n / t0.elapsed().as_secs_f64().max(1e-9))
}

/// Uncontested campaigns of one candidate on any backend, each checked to
/// win a higher epoch than the last.
#[derive(Debug)]
pub(crate) struct Campaigns<C: Claim> {
    candidate: Candidate<C>,
    last_epoch: u64,
}

impl<C: Claim> Campaigns<C> {
    /// Candidate `identity` for election `name` of `election`, which nobody
    /// else contests.
    pub(crate) fn new<E>(election: &E, name: &str, identity: &str) -> Result<Self>
    where
        E: Election<Claim = C>,
    {
        Ok(Campaigns {
            candidate: election.candidate(name, identity)?,
            last_epoch: 0,
        })
    }

    /// One round: `campaign()` then `resign()` of the term. Returns how
    /// long the campaign took, and the campaign with the resign, in
    /// nanoseconds.
    pub(crate) async fn round(&mut self) -> Result<(u64, u64)> {
        let t0 = Instant::now();
        let term = self.candidate.campaign().await?;
        let t1 = Instant::now();
        term.resign().await?;
        let t2 = Instant::now();
        let epoch = term.epoch().get();
        if epoch <= self.last_epoch {
            return Err(format!("epoch {epoch} after {}: not increasing", self.last_epoch).into());
        }
        self.last_epoch = epoch;
        Ok((ns(t1 - t0), ns(t2 - t0)))
    }

    /// `warmup + n` rounds, alone: the last `n` of each, `(campaign,
    /// campaign + resign)`.
    pub(crate) async fn rounds(&mut self, n: usize, warmup: usize) -> Result<(Vec<u64>, Vec<u64>)> {
        let (mut campaign, mut both) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for round in 0..warmup + n {
            let (c, b) = self.round().await?;
            if round >= warmup {
                campaign.push(c);
                both.push(b);
            }
        }
        Ok((campaign, both))
    }
}

/// Nanoseconds as milliseconds, to 10 µs below 10 ms.
pub(crate) fn ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_rounds_alternate_and_drop_the_warm_up() {
        let order = std::cell::RefCell::new(Vec::new());
        let (f, m) = runtime()
            .unwrap()
            .block_on(paired(
                2,
                1,
                async |r| {
                    order.borrow_mut().push(("f", r));
                    Ok(())
                },
                async |r| {
                    order.borrow_mut().push(("m", r));
                    Ok(())
                },
            ))
            .unwrap();
        assert_eq!((f.len(), m.len()), (2, 2));
        assert_eq!(
            order.into_inner(),
            [("f", 0), ("m", 0), ("m", 1), ("f", 1), ("f", 2), ("m", 2)]
        );
        assert_eq!(ms(1_234_567), "1.23 ms");
        assert_eq!(ms(12_345_678), "12.3 ms");
    }

    #[test]
    fn campaigns_run_through_an_opened_backend() {
        let dir = tempfile::tempdir().unwrap();
        let url = election_url::BackendUrl::file(dir.path());
        let (c, b) = runtime()
            .unwrap()
            .block_on(async {
                let backend = url.open(&election_url::Settings::default()).await.unwrap();
                Campaigns::new(&backend, "bench", "a")?.rounds(3, 1).await
            })
            .unwrap();
        assert_eq!((c.len(), b.len()), (3, 3));
        assert!(c.iter().zip(&b).all(|(c, b)| c <= b));
    }
}
