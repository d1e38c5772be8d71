//! Attempt nonces: random numbers that tell one attempt's claim from any
//! other's in a backend's stored state.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A random 63-bit number (it fits a signed 64-bit column) for one attempt.
///
/// Backends that store a claim (a lease row, a KV value) store its nonce
/// with it, so a release or an unknown outcome can be resolved by asking
/// "is this still *my* attempt's claim?" — never by identity alone, which a
/// restarted process shares with its predecessor. Drawn from the standard
/// library's per-process random keys, a counter and the process id; not for
/// cryptography.
///
/// ```
/// let (a, b) = (election_core::attempt_nonce(), election_core::attempt_nonce());
/// assert_ne!(a, b);
/// assert!(a <= i64::MAX as u64);
/// ```
pub fn attempt_nonce() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.finish() >> 1
}
