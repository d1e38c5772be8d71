//! What every backend's façade offers: [`Election`].

use std::future::Future;
use std::time::Duration;

use futures::Stream;

#[cfg(doc)]
use crate::LeaseSet;
use crate::{
    Candidate, Claim, ConfigError, ElectionName, Error, Handover, Identity, Leader, Revocation,
    Revoked, StoreId, TransferRequest,
};

/// What every backend's façade (`FileElection`, `SqliteElection`,
/// `NatsElection`) offers, so a tool can be written once for any backend:
/// the [`Claim`] of a candidate for a name, who leads a name now, every
/// change of leadership, and a [`LeaseSet`] of many keys.
///
/// Each backend documents what its claim, leader read and lease set
/// guarantee; this trait adds no guarantee of its own.
///
/// ```
/// use election_core::{Election, Error, Leader};
///
/// /// Who leads `name`, on any backend.
/// async fn who<E: Election>(election: &E, name: &str) -> Result<Option<Leader>, Error> {
///     election.leader(name).await
/// }
/// ```
pub trait Election: Send + Sync {
    /// The backend's claim of one candidate for one name.
    type Claim: Claim;
    /// The backend's lease set: a [`LeaseSet`] over its keyed claims (or,
    /// for a type over several backends, one of theirs).
    type LeaseSet: Send + Sync;
    /// The backend's error, for what the façade does itself (making a
    /// claim, setting up a lease set). Reads of who leads report the
    /// core's [`Error`], as [`Claim::leader`] does.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The claim of candidate `identity` for election `name` (no I/O).
    ///
    /// Fails with the backend's configuration error for an invalid name or
    /// identity.
    ///
    /// ```
    /// use election_core::{Candidate, Election};
    ///
    /// /// Runs one term of the nightly report on any backend.
    /// async fn nightly<E: Election>(election: &E) -> Result<(), Box<dyn std::error::Error>> {
    ///     let claim = election.claim("nightly-report", "host-a/4711")?;
    ///     let term = Candidate::new(claim).campaign().await?;
    ///     /* the job */
    ///     term.resign().await?;
    ///     Ok(())
    /// }
    /// ```
    fn claim(&self, name: &str, identity: &str) -> Result<Self::Claim, Self::Error>;

    /// A [`Candidate`] campaigning with [`claim`](Election::claim).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Election;
    ///
    /// /// Leads `name` if nobody else does within a minute, on any backend.
    /// async fn try_lead<E: Election>(election: &E, name: &str) -> Result<bool, Box<dyn std::error::Error>> {
    ///     let candidate = election.candidate(name, "host-a/4711")?;
    ///     let Some(term) = candidate.campaign_timeout(Duration::from_secs(60)).await? else {
    ///         return Ok(false); // another candidate still leads
    ///     };
    ///     /* the job */
    ///     term.resign().await?;
    ///     Ok(true)
    /// }
    /// ```
    fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<Self::Claim>, Self::Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// Who leads election `name` now, or `None` when nobody does (as the
    /// backend's [`Claim::leader`] reads it). A holder whose lease ran out
    /// is still returned, with its last renewal ([`Leader::renewed`]) where
    /// the backend keeps one: [`Leader::presumed_dead_at`] tells, for
    /// display.
    ///
    /// Cancel safety: cancel safe (a read). Failure model:
    /// [`Error::Config`] for an invalid name, [`Error::Unavailable`] (or
    /// [`Error::Corrupt`]) when the backend cannot be read; never
    /// `Ok(None)` for "could not tell" unless the backend documents so.
    ///
    /// ```
    /// use election_core::{Election, Error};
    ///
    /// /// Prints who leads `name`, on any backend.
    /// async fn show<E: Election>(election: &E, name: &str) -> Result<(), Error> {
    ///     match election.leader(name).await? {
    ///         Some(leader) => println!("{} leads in term {}", leader.identity, leader.epoch),
    ///         None => println!("nobody leads {name}"),
    ///     }
    ///     Ok(())
    /// }
    /// ```
    fn leader(&self, name: &str) -> impl Future<Output = Result<Option<Leader>, Error>> + Send;

    /// Who leads each of elections `names` now, in order, as
    /// [`leader`](Election::leader) reads each. The default reads them one
    /// after another; a backend that can read many names in one request
    /// overrides it (PostgreSQL: one statement; NATS: the reads pipelined
    /// on its connection).
    ///
    /// Cancel safety: cancel safe (reads). Failure model: the first failed
    /// read's error, as [`leader`](Election::leader)'s.
    ///
    /// ```
    /// use election_core::{Election, ElectionName, Error};
    ///
    /// /// How many of `names` are held now, on any backend.
    /// async fn held<E: Election>(election: &E, names: &[ElectionName]) -> Result<usize, Error> {
    ///     Ok(election.leaders(names).await?.iter().flatten().count())
    /// }
    /// ```
    fn leaders(
        &self,
        names: &[ElectionName],
    ) -> impl Future<Output = Result<Vec<Option<Leader>>, Error>> + Send {
        async move {
            let mut seen = Vec::with_capacity(names.len());
            for name in names {
                seen.push(self.leader(name.as_str()).await?);
            }
            Ok(seen)
        }
    }

    /// Every change of leadership of election `name`: the current state
    /// first, then each change (a new term or a new
    /// [`value`](Leader::value) of the term: `Some`; a vacancy: `None`).
    /// Repeats (same identity, epoch and value: [`Leader::shows_same`])
    /// are not reported. A holder whose lease ran out without a renewal
    /// ([`Leader::presumed_dead_at`] this process's wall clock; a
    /// SIGKILLed holder on SQLite or PostgreSQL) is reported as a vacancy,
    /// as NATS reports a key that aged out: display only (see
    /// [`vacant_if_presumed_dead`]).
    ///
    /// The default reads [`leader`](Election::leader) every `every`, so a
    /// term shorter than that may go unseen; a backend that can push
    /// changes overrides it (each documents what it may miss). `every` is
    /// the poll interval where the backend polls.
    ///
    /// Cancel safety: dropping the stream stops it. Failure model: a
    /// failed read is reported as one `Err` item and the stream goes on
    /// (polling) or ends (a backend's push watch, as it documents).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Election, Error};
    /// use futures::StreamExt;
    ///
    /// /// Prints every change of leadership of `name`, on any backend.
    /// async fn follow<E: Election>(election: &E, name: &str) -> Result<(), Error> {
    ///     let changes = election.observe(name, Duration::from_secs(1)).await?;
    ///     let mut changes = std::pin::pin!(changes);
    ///     while let Some(change) = changes.next().await {
    ///         match change {
    ///             Ok(Some(leader)) => println!("{} leads in term {}", leader.identity, leader.epoch),
    ///             Ok(None) => println!("nobody leads {name}"),
    ///             Err(e) => eprintln!("cannot read the leader: {e}"),
    ///         }
    ///     }
    ///     Ok(())
    /// }
    /// ```
    fn observe(
        &self,
        name: &str,
        every: Duration,
    ) -> impl Future<
        Output = Result<impl Stream<Item = Result<Option<Leader>, Error>> + Send + '_, Error>,
    > + Send {
        let name = name.to_owned();
        async move { Ok(poll_leader(self, name, every)) }
    }

    /// Which store keeps this backend's elections ([`StoreId`]): the same
    /// for every way of reaching it (a bind mount, another host name, the
    /// servers in another order), so that a tool keying per-election state
    /// on one host by it finds every candidate's.
    ///
    /// Cancel safety: cancel safe (a read). Failure model: the backend's
    /// error when the store cannot be read; never an id made up from how
    /// the backend was reached.
    ///
    /// ```
    /// use election_core::Election;
    ///
    /// /// Whether two opened backends keep their elections in one store.
    /// async fn same_store<E: Election>(a: &E, b: &E) -> Result<bool, E::Error> {
    ///     Ok(a.store_id().await? == b.store_id().await?)
    /// }
    /// ```
    fn store_id(&self) -> impl Future<Output = Result<StoreId, Self::Error>> + Send;

    /// Revokes the current term of election `name` on behalf of `by` (an
    /// operator's way to take leadership away, fenced; ADR 0111): in one
    /// atomic step the backend moves the name to a new epoch above the
    /// holder's, drawn as a winning claim draws one, that no candidate
    /// holds, and records who asked and when ([`Revocation`]). `Ok(None)`:
    /// nobody held the name (nothing is written).
    ///
    /// The deposed holder's renewal or check fails and its watch reports
    /// the loss (rule 2), at its lease's deadline at the latest; a holder
    /// that cannot reach the store loses at its validity as always.
    /// Candidates see the revocation as a holder that stopped renewing:
    /// the next term begins once the deposed holder's lease could have run
    /// out (a full TTL on the lease backends; the deposed holder's close on
    /// the file backend), with an epoch above the revocation's. To make a
    /// fenced resource refuse the deposed holder at once, raise its fence
    /// to [`Revocation::epoch`] (`Fence::advance`; `elect revoke --fence`).
    ///
    /// Cancel safety: not cancel safe: cancelled after the request was
    /// sent, the revocation may or may not have been stored (read
    /// [`revocation`](Election::revocation)). Failure model:
    /// [`Error::Config`] for an invalid name and
    /// [`ConfigError::Unsupported`] where the backend cannot revoke (the
    /// default); [`Error::Unavailable`] or [`Error::OutcomeUnknown`] when
    /// the store cannot be reached; [`Error::Corrupt`] for a damaged
    /// record.
    ///
    /// ```
    /// use election_core::{Election, Error, Identity};
    ///
    /// /// Takes `name` away from whoever leads it, on any backend.
    /// async fn depose<E: Election>(election: &E, name: &str) -> Result<(), Error> {
    ///     let by = Identity::new("ops/alice")?;
    ///     match election.revoke(name, &by).await? {
    ///         Some(r) => println!("{} deposed; fence at {}", r.deposed.identity, r.revocation.epoch),
    ///         None => println!("nobody leads {name}"),
    ///     }
    ///     Ok(())
    /// }
    /// ```
    fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> impl Future<Output = Result<Option<Revoked>, Error>> + Send {
        let _ = (name, by);
        async {
            Err(Error::Config(ConfigError::Unsupported {
                what: "revoke",
                backend: "this backend",
            }))
        }
    }

    /// The revocation of election `name` that no term has followed yet, if
    /// any: what [`revoke`](Election::revoke) stored, shown by `elect
    /// leader` and `elect observe` until the next term begins. The default
    /// (a backend that cannot revoke): `Ok(None)`.
    ///
    /// Cancel safety: cancel safe (a read). Failure model: as
    /// [`leader`](Election::leader)'s.
    ///
    /// ```
    /// use election_core::{Election, Error};
    ///
    /// /// Says whether `name` was revoked and not led since.
    /// async fn show<E: Election>(election: &E, name: &str) -> Result<(), Error> {
    ///     if let Some(r) = election.revocation(name).await? {
    ///         println!("{name}: {r}");
    ///     }
    ///     Ok(())
    /// }
    /// ```
    fn revocation(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Revocation>, Error>> + Send {
        let _ = name;
        async { Ok(None) }
    }

    /// Asks the holder of `name`'s current term, on behalf of `by`, to hand
    /// it to `to` (ADR 0112): stores a [`TransferRequest`] beside the term,
    /// conditioned on the term's epoch, which the holder's watch reports
    /// ([`Term::transfer_requested`](crate::Term::transfer_requested)).
    /// Returns the request stored, or `None` when no term holds the name.
    /// A later request replaces an earlier one; a request never outlives
    /// its term. The holder decides whether and when to hand over.
    ///
    /// Cancel safety: a dropped call may or may not have stored the
    /// request (as with [`Error::OutcomeUnknown`]); asking again is safe.
    ///
    /// Failure model: [`Error::Config`] for an invalid name and
    /// [`ConfigError::Unsupported`] where the backend cannot carry requests
    /// (the default); [`Error::Unavailable`] or [`Error::OutcomeUnknown`]
    /// when the store cannot be reached; [`Error::Corrupt`] for a damaged
    /// record.
    ///
    /// ```
    /// use election_core::{Election, Error, Identity};
    ///
    /// /// Asks whoever leads `name` to hand it to `to`.
    /// async fn hand_to<E: Election>(election: &E, name: &str, to: &str) -> Result<(), Error> {
    ///     let (to, by) = (Identity::new(to)?, Identity::new("deploy/7")?);
    ///     match election.request_transfer(name, &to, &by).await? {
    ///         Some(r) => println!("asked the term of epoch {} to go to {}", r.epoch, r.to),
    ///         None => println!("nobody leads {name}"),
    ///     }
    ///     Ok(())
    /// }
    /// ```
    fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> impl Future<Output = Result<Option<TransferRequest>, Error>> + Send {
        let _ = (name, to, by);
        async {
            Err(Error::Config(ConfigError::Unsupported {
                what: "transfer requests",
                backend: "this backend",
            }))
        }
    }

    /// Tells the holder of `name`'s current term that `candidate`, with
    /// `priority`, waits for the name (ADR 0112): stores a
    /// [`TransferRequest`] with that priority beside the term, as
    /// [`request_transfer`](Election::request_transfer) does (to and by
    /// are both `candidate`). The holder hears it only if `priority` is
    /// above its own term's ([`Term::preferred`](crate::Term::preferred)).
    /// Returns the request stored, or `None` when no term holds the name.
    /// Ask once the candidate has waited the time it states (`elect run
    /// --prefer-after`), and once per term: a holder yields at most once
    /// per term.
    ///
    /// Cancel safety, failure model: as `request_transfer`'s.
    ///
    /// ```
    /// use election_core::{Election, Error, Identity};
    ///
    /// /// A candidate in the primary zone says it waits, with priority 10.
    /// async fn say_preferred<E: Election>(election: &E) -> Result<(), Error> {
    ///     election.prefer("jobs", &Identity::new("zone-a/1")?, 10).await?;
    ///     Ok(())
    /// }
    /// ```
    fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> impl Future<Output = Result<Option<TransferRequest>, Error>> + Send {
        let _ = (name, candidate, priority);
        async {
            Err(Error::Config(ConfigError::Unsupported {
                what: "preferred candidates",
                backend: "this backend",
            }))
        }
    }

    /// The handover of election `name` that no term has followed yet, if
    /// any: what [`Term::transfer`](crate::Term::transfer) stored, shown by
    /// `elect leader` and `elect observe` while the name is reserved for
    /// the successor. The default (a backend that cannot transfer):
    /// `Ok(None)`.
    ///
    /// Cancel safety: cancel safe (a read). Failure model: as
    /// [`leader`](Election::leader)'s.
    ///
    /// ```
    /// use election_core::{Election, Error};
    ///
    /// /// Says whether `name` is reserved for a successor.
    /// async fn show<E: Election>(election: &E, name: &str) -> Result<(), Error> {
    ///     if let Some(h) = election.handover(name).await? {
    ///         println!("{name}: {h}");
    ///     }
    ///     Ok(())
    /// }
    /// ```
    fn handover(&self, name: &str) -> impl Future<Output = Result<Option<Handover>, Error>> + Send {
        let _ = name;
        async { Ok(None) }
    }

    /// A lease set ([`LeaseSet`]) of this process (`identity`) over the
    /// backend: many keys, each an election of its own.
    ///
    /// Must be called inside a tokio runtime. Fails with the backend's
    /// configuration error for an invalid identity, or its error when the
    /// backend cannot be set up. Cancel safety: cancel safe (nothing is
    /// held before it returns).
    ///
    /// ```
    /// use election_core::Election;
    ///
    /// /// Sets up this node's lease set on any backend (inside a tokio runtime).
    /// async fn shards<E: Election>(election: &E) -> Result<E::LeaseSet, E::Error> {
    ///     let set = election.lease_set("node-a").await?;
    ///     // A backend's lease set is its `LeaseSet` (`ask`, `held`, `guard`,
    ///     // `close`); generic code hands it on to code that knows the backend.
    ///     Ok(set)
    /// }
    /// ```
    fn lease_set(
        &self,
        identity: &str,
    ) -> impl Future<Output = Result<Self::LeaseSet, Self::Error>> + Send;
}

/// [`Election::observe`]'s default: `leader` read every `every`, changes
/// of term only.
fn poll_leader<E: Election + ?Sized>(
    election: &E,
    name: String,
    every: Duration,
) -> impl Stream<Item = Result<Option<Leader>, Error>> + Send + '_ {
    // `last`: the state last reported (`None` before the first read).
    let state = (None::<Option<Leader>>, true);
    futures::stream::unfold(state, move |(mut last, first)| {
        let name = name.clone();
        async move {
            let mut first = first;
            loop {
                if !first {
                    tokio::time::sleep(every).await;
                }
                first = false;
                match election.leader(&name).await {
                    Err(e) => return Some((Err(e), (last, false))),
                    Ok(now) => {
                        let now = vacant_if_presumed_dead(now);
                        let same = last.as_ref().is_some_and(|l| shows_same(l, &now));
                        if !same {
                            last = Some(now.clone());
                            return Some((Ok(now), (last, false)));
                        }
                    }
                }
            }
        }
    })
}

/// What an observer reports for a holder read now: a holder presumed
/// dead ([`Leader::presumed_dead_at`] the reader's wall clock) as a
/// vacancy (`None`). For display only: claims never read it.
///
/// ```
/// use election_core::{Election, vacant_if_presumed_dead};
///
/// /// Prints whether anybody leads `name`, a dead holder as nobody.
/// async fn show<E: Election>(election: &E, name: &str) -> Result<(), election_core::Error> {
///     match vacant_if_presumed_dead(election.leader(name).await?) {
///         Some(l) => println!("{} leads in term {}", l.identity, l.epoch),
///         None => println!("nobody leads {name}"),
///     }
///     Ok(())
/// }
/// ```
pub fn vacant_if_presumed_dead(leader: Option<Leader>) -> Option<Leader> {
    let now = std::time::SystemTime::now();
    leader.filter(|l| !l.presumed_dead_at(now))
}

/// Whether two reads of the leader show the same ([`Leader::shows_same`],
/// or both nobody): what tells them apart for an observer.
fn shows_same(a: &Option<Leader>, b: &Option<Leader>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.shows_same(b),
        _ => false,
    }
}
