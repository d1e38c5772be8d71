//! `CLOCK_MONOTONIC` stamps in nanoseconds: the one clock every process of
//! a host shares, so events stamped in different processes (candidates,
//! lease-set nodes, elect's supervisor, the torture suite's histories) can
//! be ordered against each other — for instance a deposed leader's last
//! write against its successor's first.
//!
//! Stamps are for ordering and measuring; they are not wall-clock time and
//! mean nothing on another host. (This was the `mono-stamp` crate; ADR
//! 0055 folded it in here, the lowest published crate every user of it
//! already depends on that already links `nix`.)
//!
//! ```
//! let a = fencing::mono::mono_ns();
//! let b = fencing::mono::mono_ns();
//! assert!(a <= b);
//! ```

use std::time::Instant;

/// `CLOCK_MONOTONIC` now, in nanoseconds.
///
/// It never fails on Linux (`clock_gettime` fails only for an unknown
/// clock or a bad pointer); should it ever, it returns 0, which orders as
/// a stamp from before any run.
///
/// ```
/// let start = fencing::mono::mono_ns();
/// // ... an event; another process of this host may stamp its own ...
/// let elapsed_ns = fencing::mono::mono_ns().saturating_sub(start);
/// println!("took {} µs", elapsed_ns / 1_000);
/// ```
pub fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .ok()
        .and_then(|t| {
            let secs = u64::try_from(t.tv_sec()).ok()?;
            let nanos = u64::try_from(t.tv_nsec()).ok()?;
            secs.checked_mul(1_000_000_000)?.checked_add(nanos)
        })
        .unwrap_or(0)
}

/// The instant `at` of this process as a `CLOCK_MONOTONIC` stamp. The
/// kernel clock is read *before* the process's instant, so a pause between
/// the two reads makes the result earlier, never later.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let before = fencing::mono::mono_ns();
/// let stamp = fencing::mono::mono_ns_at(Instant::now() + Duration::from_secs(1));
/// assert!(stamp >= before + 900_000_000);
/// ```
pub fn mono_ns_at(at: Instant) -> u64 {
    let raw = mono_ns();
    let now = Instant::now();
    if at >= now {
        raw.saturating_add(u64::try_from((at - now).as_nanos()).unwrap_or(u64::MAX))
    } else {
        raw.saturating_sub(u64::try_from((now - at).as_nanos()).unwrap_or(u64::MAX))
    }
}
