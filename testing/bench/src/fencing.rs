//! The fencing rows: `advance` on [`MemoryFence`] and [`FileFence`], each
//! with a strictly higher token every call (so every call raises the mark),
//! against the bare cost of what each must at least do: an uncontended
//! mutex (memory), and an OFD lock + pwrite + fsync + unlock (file: what
//! `FileFence` does since ADR 0025, a checksummed line written in place and
//! fdatasynced; also against the lock around a rename-based durable write,
//! how it persisted its mark before).

use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use election_core::Epoch;
use fencing::{Fence, FileFence, MemoryFence, ResourceName, Token};

use super::file::DurableWrite;
use super::ofd::OfdFile;
use super::stats::ns;
use crate::Result;

/// Per-operation latencies plus a separately timed batch for throughput.
#[derive(Debug)]
pub(crate) struct OpSamples {
    /// Each operation timed alone, in nanoseconds.
    pub(crate) per_op: Vec<u64>,
    /// Operations per second over an untimed batch of the same size.
    pub(crate) ops_per_s: f64,
}

/// Runs `op(i)` for `i` in `0..warmup + n` (timing each of the last `n`),
/// then `n` more in one untimed batch for the throughput.
fn run_ops(n: usize, warmup: usize, mut op: impl FnMut(u64) -> Result<()>) -> Result<OpSamples> {
    let mut per_op = Vec::with_capacity(n);
    let mut i = 0u64;
    for round in 0..warmup + n {
        let t0 = Instant::now();
        op(i)?;
        let t1 = Instant::now();
        i += 1;
        if round >= warmup {
            per_op.push(ns(t1 - t0));
        }
    }
    let t0 = Instant::now();
    for _ in 0..n {
        op(i)?;
        i += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(OpSamples {
        per_op,
        ops_per_s: n as f64 / secs.max(1e-9),
    })
}

/// [`run_ops`] for an async `op`, all inside one `block_on` so that the
/// runtime's entry cost is not counted per operation.
fn run_async_ops<F, Fut>(n: usize, warmup: usize, mut op: F) -> Result<OpSamples>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut per_op = Vec::with_capacity(n);
        let mut i = 0u64;
        for round in 0..warmup + n {
            let t0 = Instant::now();
            op(i).await?;
            let t1 = Instant::now();
            i += 1;
            if round >= warmup {
                per_op.push(ns(t1 - t0));
            }
        }
        let t0 = Instant::now();
        for _ in 0..n {
            op(i).await?;
            i += 1;
        }
        let secs = t0.elapsed().as_secs_f64();
        Ok(OpSamples {
            per_op,
            ops_per_s: n as f64 / secs.max(1e-9),
        })
    })
}

/// The token for op number `i`: epochs 1, 2, 3, ...
fn token(i: u64) -> Result<Token> {
    let epoch = Epoch::new(i + 1).ok_or("epoch overflow")?;
    Ok(Token::from_epoch(epoch))
}

/// `MemoryFence::advance` with ever higher tokens.
pub(crate) fn memory(n: usize, warmup: usize) -> Result<OpSamples> {
    let fence = &MemoryFence::new();
    let resource = &ResourceName::new("bench")?;
    run_async_ops(n, warmup, |i| async move {
        fence.advance(resource, token(i)?).await?;
        Ok(())
    })
}

/// Floor of [`memory`]: lock an uncontended `std::sync::Mutex`, raise the
/// value, unlock.
pub(crate) fn memory_floor(n: usize, warmup: usize) -> Result<OpSamples> {
    let mark = Mutex::new(0u64);
    run_ops(n, warmup, |i| {
        let mut g = mark.lock().map_err(|_| "poisoned")?;
        if black_box(i + 1) > *g {
            *g = i + 1;
        }
        drop(black_box(g));
        Ok(())
    })
}

/// `FileFence::advance` with ever higher tokens, marks in `dir`.
pub(crate) fn file(dir: &Path, n: usize, warmup: usize) -> Result<OpSamples> {
    let fence = &FileFence::open(dir.join("fences"))?;
    let resource = &ResourceName::new("bench")?;
    run_async_ops(n, warmup, |i| async move {
        fence.advance(resource, token(i)?).await?;
        Ok(())
    })
}

/// Floor of [`file`](fn@file): OFD lock, pwrite the 8-byte mark at offset 0, fsync,
/// unlock, on one open file description.
pub(crate) fn file_floor(dir: &Path, n: usize, warmup: usize) -> Result<OpSamples> {
    let lock = OfdFile::open(&dir.join("fence-floor.mark"))?;
    run_ops(n, warmup, |i| {
        lock.try_lock()?;
        lock.file().write_all_at(&(i + 1).to_le_bytes(), 0)?;
        lock.file().sync_all()?;
        lock.unlock()?;
        Ok(())
    })
}

/// Second floor of [`file`](fn@file): OFD lock + write temp file + fsync + rename +
/// fsync dir + unlock ([`DurableWrite`]).
pub(crate) fn durable_floor(dir: &Path, n: usize, warmup: usize) -> Result<OpSamples> {
    let w = DurableWrite::new(&dir.join("fence-floor-durable"))?;
    run_ops(n, warmup, |i| w.once(i + 1))
}
