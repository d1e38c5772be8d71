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
//! - [`recorder`]: a metrics recorder whose values tests read back.
//!
//! # Writing your own backend
//!
//! A backend implements the steps of [`Claim`](election_core::Claim) and
//! keeps its four rules; the core runs the campaign. Here, a backend of one
//! process (a mutex stands in for the store), and the lines that run the
//! conformance suite against it from an integration test:
//!
//! ```
//! use std::sync::{Arc, Mutex};
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
//!     /// Gives the claim up, if this candidate holds it.
//!     fn free(&self) {
//!         let mut s = self.store.lock().unwrap();
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
//!         let mut s = self.store.lock().unwrap();
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
//!         let s = self.store.lock().unwrap();
//!         Ok(s.holder.as_ref().map(|(identity, epoch)| Leader {
//!             identity: identity.clone(),
//!             epoch: *epoch,
//!             since: None,
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
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! # use election_testkit::conformance::Backend;
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
pub mod keyed;
pub mod memory;
pub mod recorder;
