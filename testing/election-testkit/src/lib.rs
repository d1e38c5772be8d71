//! The test kit for leader-election backends (a dev-dependency, never
//! shipped in a service):
//!
//! - [`memory`]: an in-memory backend, single ([`memory::MemoryClaim`]) and
//!   keyed ([`memory::MemoryKeys`]), that injects faults and records every
//!   step, so tests can check the four rules;
//! - [`conformance`]: the suite every [`Claim`](election_core::Claim)
//!   backend runs against itself ([`conformance_tests!`]);
//! - [`keyed`]: the suite every [`KeyedClaims`](election_core::KeyedClaims)
//!   backend runs against itself ([`keyed_conformance_tests!`]);
//! - [`slots`]: the cases of names with N slots ([`SlotCandidate`](election_core::SlotCandidate)),
//!   run by [`conformance_tests!`] on every backend;
//! - [`recorder`]: a metrics recorder whose values tests read back;
//! - [`runtimes`]: an election on a second runtime outlives the first;
//! - [`driver`]: the check every backend's URL type runs, printed then
//!   parsed back ([`driver::round_trip`]), and the strategies it is fed.
//!
//! # Writing your own backend
//!
//! A backend implements the steps of [`Claim`](election_core::Claim) and
//! keeps its four rules; the core runs the campaign. Here, a backend of one
//! process (a mutex stands in for the store), and the lines that run the
//! conformance suite against it from an integration test:
//!
//! ```
//! use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
//! use election_core::{
//!     Candidate, Claim, ElectionName, End, Epoch, Error, Identity, Leader, TermReporter, WatchGuard,
//!     Won,
//! };
//!
//! /// The store: who holds the claim, and the last epoch handed out.
//! #[derive(Default)]
//! struct Store {
//!     holder: Option<(Identity, Epoch)>,
//!     last: Option<Epoch>,
//! }
//!
//! struct LockClaim {
//!     store: Arc<Mutex<Store>>,
//!     name: ElectionName,
//!     identity: Identity,
//! }
//!
//! impl LockClaim {
//!     /// The store, also after a panic elsewhere (its state stays consistent).
//!     fn lock(&self) -> MutexGuard<'_, Store> {
//!         self.store.lock().unwrap_or_else(PoisonError::into_inner)
//!     }
//!
//!     /// Gives the claim up, if this candidate holds it.
//!     fn free(&self) {
//!         let mut s = self.lock();
//!         if s.holder.as_ref().is_some_and(|(who, _)| *who == self.identity) {
//!             s.holder = None;
//!         }
//!     }
//! }
//!
//! impl Claim for LockClaim {
//!     type Attempt = ();
//!     fn name(&self) -> &ElectionName {
//!         &self.name
//!     }
//!     fn identity(&self) -> &Identity {
//!         &self.identity
//!     }
//!     async fn open(&self) -> Result<(), Error> {
//!         Ok(())
//!     }
//!     async fn try_claim(&self, _: &mut ()) -> Result<Option<Won>, Error> {
//!         // Rule 1: the epoch is decided under the same lock hold as the win.
//!         let mut s = self.lock();
//!         if s.holder.is_some() {
//!             return Ok(None);
//!         }
//!         let epoch = Epoch::after(s.last)?;
//!         s.last = Some(epoch);
//!         s.holder = Some((self.identity.clone(), epoch));
//!         Ok(Some(Won { epoch, valid_until: None }))
//!     }
//!     // Rule 2: nothing can take this claim away, so nothing to watch.
//!     fn watch(&self, _: &mut (), _: Won, _: TermReporter) -> Result<WatchGuard, Error> {
//!         Ok(WatchGuard::none())
//!     }
//!     async fn release(&self, _: &mut ()) -> Result<(), Error> {
//!         self.free();
//!         Ok(())
//!     }
//!     // Rule 4: runs after every end; gives up whatever may still be held.
//!     fn close(&self, _: (), end: End) {
//!         if end != End::Lost {
//!             self.free();
//!         }
//!     }
//!     async fn leader(&self) -> Result<Option<Leader>, Error> {
//!         let s = self.lock();
//!         Ok(s.holder.as_ref().map(|(identity, epoch)| Leader {
//!             identity: identity.clone(),
//!             epoch: *epoch,
//!             since: None,
//!             renewed: None,
//!             ttl: None,
//!             value: None,
//!         }))
//!     }
//! }
//!
//! /// What the conformance suite opens candidates from.
//! #[derive(Default)]
//! struct Locks(Arc<Mutex<Store>>);
//!
//! impl election_testkit::conformance::Backend for Locks {
//!     type Claim = LockClaim;
//!     async fn candidate(&self, name: &str, identity: &str) -> Result<LockClaim, Error> {
//!         Ok(LockClaim {
//!             store: self.0.clone(),
//!             name: ElectionName::new(name)?,
//!             identity: Identity::new(identity)?,
//!         })
//!     }
//!     async fn take_away(&self, _name: &str) -> bool {
//!         false // this backend cannot lose a claim
//!     }
//!     async fn bad_configurations(&self) -> Vec<Result<LockClaim, Error>> {
//!         vec![self.candidate("a/b", "x").await]
//!     }
//! }
//!
//! // In `tests/conformance.rs`, this line runs the whole suite:
//! election_testkit::conformance_tests!(Locks::default());
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Error> {
//! # use election_testkit::conformance::{self as suite, Backend};
//! # // A doctest compiles the macro's #[tokio::test] cases but does not run
//! # // them: run every case of the suite here, so this backend really passes.
//! # suite::uncontested_win(&Locks::default()).await;
//! # suite::second_candidate_waits(&Locks::default()).await;
//! # suite::resign_hands_over(&Locks::default()).await;
//! # suite::drop_hands_over(&Locks::default()).await;
//! # suite::epochs_strictly_increase(&Locks::default()).await;
//! # suite::cancellation_at_every_step_leaves_nothing_held(&Locks::default()).await;
//! # suite::lost_fires_when_taken_away(&Locks::default()).await;
//! # suite::leader_matches_holder(&Locks::default()).await;
//! # suite::bad_configuration_is_refused(&Locks::default()).await;
//! # suite::an_ended_terms_lease_reads_lost(&Locks::default()).await;
//! # suite::dropped_lead_holds_the_claim_until_its_tasks_stopped(&Locks::default()).await;
//! let locks = Locks::default();
//! let term = Candidate::new(locks.candidate("jobs", "a").await?).campaign().await?;
//! let other = Candidate::new(locks.candidate("jobs", "b").await?);
//! assert!(other.try_campaign().await?.is_none());
//! term.resign().await?;
//! assert!(other.try_campaign().await?.is_some());
//! # Ok(()) }
//! ```
//!
//! A backend that holds many keys more cheaply than one campaign each (one
//! renewal for all) implements the batch steps of
//! [`KeyedClaims`](election_core::KeyedClaims) and runs
//! [`keyed_conformance_tests!`] the same way; every other backend gets lease
//! sets from [`PerKeyClaims`](election_core::PerKeyClaims).

pub mod conformance;
pub mod display;
pub mod driver;
pub mod heartbeats;
pub mod keyed;
pub mod memory;
pub mod recorder;
pub mod runtimes;
pub mod slots;

/// The workspace README's examples, compiled as doctests (denying
/// warnings: no unused import, no ignored `Result`). Here because this
/// crate is not published: a published crate may not include a file from
/// outside its package.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct ReadmeDoctests;

/// docs/recipes.md's examples, compiled as doctests (warnings denied).
#[doc = include_str!("../../../docs/recipes.md")]
#[cfg(doctest)]
#[doc(test(attr(deny(warnings), allow(dead_code))))]
pub struct RecipesDoctests;
