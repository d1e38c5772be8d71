//! Leader election for Rust services: the core.
//!
//! A *candidate* campaigns for the *claim* of a named election; the one that
//! wins it holds a *term*, numbered by an *epoch* that grows with every
//! term. The term ends when its holder resigns or drops it, or when it is
//! *lost* (the backend took the claim away). Terms are *leases* that
//! [fencing](https://docs.rs/fencing) turns into tokens.
//!
//! This crate has no I/O of its own. A backend implements the [`Claim`]
//! steps (see its four rules); [`Candidate`] runs the campaign over any
//! backend; [`Term`] is what the winner holds; [`Term::lead`] runs the
//! leader's work so that it stops the moment the term is lost.
//!
//! From the moment a term ends — lost, or ended by its holder (a resign
//! began, the term or its `lead` was dropped) — every lease of it reads
//! lost ([`Lease::is_lost`], [`LossReason::is_end`] tells which), so no
//! fencing token is issued from it. A dropped `lead` keeps the claim until
//! every task it spawned has actually stopped, and [`LeaseSet::close`]
//! gives no key up while a guarded write under it runs; only a loss ends a
//! term sooner, and then the fence at the resource is the protection.
//!
//! [`SlotCandidate`] holds any one of a name's N slots ([`Slots`]: a
//! semaphore of N holders), each slot an election of its own with its own
//! epochs, loss and fencing token; [`SlotTerm`] is one slot held.
//!
//! [`LeaseSet`] holds many keys at once (one writer per shard or store):
//! `held` without a round trip, `guard` runs a write only at a confirmed
//! commit point and hands it a [`WriteToken`] that cannot leave the call.
//!
//! A backend implements [`KeyedClaims`] (batch steps: claim many, renew
//! many, confirm one, release many, wait) and the core's engine drives
//! them, keeping the rules of [`Claim`] per key: a key reads held from its
//! win until the deadline of its last landed renewal, a refused renewal or
//! a loss the backend reports; a lost key is never released; closing the
//! set releases every key still held.
//!
//! Rule 2 is decided in one place, [`renewal::Renewal`]: every renewal
//! loop (single claims through [`renew_until_lost`], lease sets through
//! the engine) loses its claim at (never after) the deadline of the last
//! renewal known to have landed, counted from before it was sent; a failed
//! or timed-out renewal never extends it.
//!
//! Metrics go through the [`metrics`](https://docs.rs/metrics) facade
//! (no exporter here; none installed, they cost nothing): terms won, lost
//! by reason, resigned and dropped, whether this process leads, the
//! campaign's wait, renewal latency and failures, lease-set keys held, all
//! labelled per election `name` or lease `set`, never per key. The table
//! of every metric is `docs/metrics.md` in the repository;
//! [`describe_metrics`] registers their help texts. [`HealthCheck`]
//! ([`Candidate::health_check`], [`Term::health_check`],
//! [`LeaseSet::health_check`]) is a liveness probe: unhealthy while this
//! process leads but no renewal landed for longer than a bound.
//!
//! The source reads in two halves. The single-election path sits at the
//! root: `claim` (the steps and rules), `campaign`, `term`, `term_state`,
//! `lead`, `election`, `leader`, `slots` (N holders over N
//! elections). The keyed half is the `keyed` tree:
//! `lease_set`, `claims` (the [`KeyedClaims`] steps), `book` (the
//! engine's decisions, pure), `engine` (the loop that executes them),
//! `key_state`, `per_key`. Both share
//! `name`, `epoch`, `nonce`, `error`, `config_error`, `disposition`, `lease`,
//! `write_token`, `renewal`, `health` and `instrument`.
//!
//! The in-memory backend and the conformance suites every backend runs
//! live in the `election-testkit` crate (a dev-dependency).
//!
//! ```
//! use election_core::{Candidate, Lease};
//! use election_testkit::memory::MemoryBackend;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), election_core::Error> {
//! let backend = MemoryBackend::new();
//! let term = Candidate::new(backend.claim("nightly-report", "worker-1")?).campaign().await?;
//! tokio::select! {
//!     lost = term.lost() => eprintln!("stop: {lost}"),
//!     () = async { /* the singleton job */ } => term.resign().await?,
//! }
//! # Ok(()) }
//! ```
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod campaign;
mod claim;
mod clock;
mod config_error;
mod disposition;
mod election;
mod epoch;
mod error;
mod health;
mod instrument;
mod keyed;
mod lead;
mod leader;
mod lease;
mod name;
mod nonce;
pub mod renewal;
mod revoke;
mod slots;
mod store_id;
mod term;
mod term_state;
mod transfer;
mod write_token;

pub use campaign::{Candidate, DEFAULT_POLL_INTERVAL, MAX_RETRY_PAUSE, RetryState, retry_pause};
pub use claim::{Claim, End, WatchGuard, Won};
pub use clock::{Clock, SystemClock};
pub use config_error::{ConfigError, Source};
pub use disposition::{Class, Classify, Disposition, Probe, classify, probe};
pub use election::{Election, vacant_if_presumed_dead};
pub use epoch::{Epoch, ParseEpochError};
pub use error::{Error, LeaseLost, LossReason};
pub use health::{Health, HealthCheck};
pub use instrument::describe_metrics;
pub use keyed::{
    Balance, Balanced, Claimed, DEFAULT_CLOSE_TIMEOUT, HeldKey, HoldReporter, KeyEvent, KeyEvents,
    KeyedClaims, LeaseSet, MAX_MEMBERS, Membership, PerKeyClaims, SetMember,
};
pub use lead::{DEFAULT_DRAIN_TIMEOUT, LeadOptions, Leadership};
pub use leader::{Leader, LeaderValue};
pub use lease::Lease;
pub use name::{ElectionName, Identity, MAX_NAME_LEN, check_key_name};
pub use nonce::attempt_nonce;
pub use renewal::{RenewalPolicy, Renewed, renew_until_lost};
pub use revoke::{Revocation, Revoked};
pub use slots::{MAX_SLOTS, SlotCandidate, SlotTerm, Slots};
pub use store_id::StoreId;
pub use term::{Term, TermLease};
pub use term_state::TermReporter;
pub use transfer::{Handover, MAX_TRANSFER_WINDOW, TransferRequest};
pub use write_token::{WriteToken, unguarded};

/// Locks `m`, recovering from poisoning: every lock of the crate guards
/// state that stays consistent between its statements.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This crate's README (its page on crates.io), whose example is compiled
/// as a doctest here so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;
