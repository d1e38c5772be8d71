//! The conformance cases of names with N slots (a semaphore,
//! [`SlotCandidate`]), run by [`conformance_tests!`](crate::conformance_tests)
//! on every backend: N candidates all hold a slot; one more waits and wins
//! a slot only once a holder resigns or loses it, never more than N
//! holders at any instant, each slot's epochs growing; bad input refused
//! with a typed error.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use election_core::{ConfigError, Epoch, Error, SlotCandidate, SlotTerm, Slots};

use crate::conformance::{Backend, answered, within};

/// A slot candidate of `identity` for `slots` on `b`, polling every 20 ms.
///
/// Waits for a backend that does not answer yet ([`answered`]: in CI a
/// NATS R3 cluster, beside the torture runs, timed out looking up its
/// bucket while the claims were made); any other error fails the test.
async fn slot_candidate<B: Backend>(
    b: &B,
    slots: &Slots,
    identity: &str,
) -> SlotCandidate<B::Claim> {
    use election_core::Claim;
    let names: Vec<_> = slots
        .slot_names()
        .into_iter()
        .chain(slots.probe_names())
        .collect();
    let texts: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
    let what = format!("claims of {identity} for {}", slots.name());
    let claims = answered(&what, || b.claims(&texts, identity)).await;
    let mut by_name: HashMap<_, _> = claims.into_iter().map(|c| (c.name().clone(), c)).collect();
    SlotCandidate::new(slots.clone(), |n| by_name.remove(n).ok_or(n.clone()))
        .unwrap_or_else(|n| panic!("no claim made for {n}"))
        .with_poll_interval(Duration::from_millis(20))
        .expect("valid poll interval")
}

/// Counts the holders of a name this process knows of; panics when a win
/// makes more than `max`.
#[derive(Clone)]
struct Holders {
    now: Arc<AtomicU32>,
    max: u32,
}

impl Holders {
    fn new(max: u32) -> Self {
        Holders {
            now: Arc::new(AtomicU32::new(0)),
            max,
        }
    }

    fn won<C: election_core::Claim>(&self, held: &SlotTerm<C>) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(
            now <= self.max,
            "{now} holders of {} at once (slot {} won in term {}), at most {} allowed",
            held.name(),
            held.slot(),
            held.term().epoch(),
            self.max
        );
    }

    /// Before a holder's term ends (resign, drop), or once its loss was
    /// reported.
    fn left(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// N candidates for a name with N slots all win, each its own slot, and
/// each slot's holder reads back with its epoch.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::slots::slots_n_candidates_all_hold(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn slots_n_candidates_all_hold<B: Backend>(b: &B) {
    let slots = Slots::new("slots-all", 3).expect("slots");
    let mut candidates = Vec::new();
    for id in ["a", "b", "c"] {
        candidates.push(slot_candidate(b, &slots, id).await);
    }
    let campaigns = candidates.iter().map(|c| c.campaign());
    let held: Vec<_> = within("three campaigns", futures::future::join_all(campaigns))
        .await
        .into_iter()
        .map(|t| t.expect("every candidate wins a slot"))
        .collect();
    let mut taken: Vec<u32> = held.iter().map(SlotTerm::slot).collect();
    taken.sort_unstable();
    assert_eq!(taken, [0, 1, 2], "each candidate holds its own slot");
    let seen = candidates[0].holders().await.expect("holders");
    for (h, id) in held.iter().zip(["a", "b", "c"]) {
        let holder = seen[h.slot() as usize]
            .as_ref()
            .unwrap_or_else(|| panic!("slot {} reads free while {id} holds it", h.slot()));
        assert_eq!(holder.identity.as_str(), id);
        assert_eq!(holder.epoch, h.term().epoch());
        assert_eq!(
            h.term().name(),
            &slots.slot_name(h.slot()).expect("slot"),
            "the term is the slot's election"
        );
    }
    for h in held {
        h.into_term().resign().await.expect("resign");
    }
    let seen = candidates[0].holders().await.expect("holders");
    assert!(
        seen.iter().all(Option::is_none),
        "slots held after every resign: {seen:?}"
    );
}

/// N+1 candidates for N slots: N hold; the one more does not win (a
/// bounded campaign and a single try say none) until a holder resigns,
/// then wins that slot in a later term; another waits until a holder's
/// slot is taken away by the backend (the holder's loss is reported) and
/// then dropped, and wins it. A counter of holders
/// checks the whole time that no win makes more than N.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::slots::slots_one_more_waits_for_a_freed_slot(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn slots_one_more_waits_for_a_freed_slot<B: Backend>(b: &B) {
    let slots = Slots::new("slots-more", 2).expect("slots");
    let holders = Holders::new(2);
    let a = slot_candidate(b, &slots, "a").await;
    let bc = slot_candidate(b, &slots, "b").await;
    let c = Arc::new(slot_candidate(b, &slots, "c").await);
    let d = Arc::new(slot_candidate(b, &slots, "d").await);

    let ta = within("a's campaign", a.campaign()).await.expect("a wins");
    holders.won(&ta);
    let tb = within("b's campaign", bc.campaign()).await.expect("b wins");
    holders.won(&tb);
    assert_ne!(ta.slot(), tb.slot());

    // Both slots held: the one more gets nothing.
    assert!(
        c.try_campaign().await.expect("c tries").is_none(),
        "a third holder of two slots"
    );
    assert!(
        c.campaign_timeout(Duration::from_millis(300))
            .await
            .expect("c's bounded campaign")
            .is_none(),
        "a third holder of two slots"
    );

    // c waits; a resigns; c wins a's slot in a later term.
    let c_won = {
        let (c, holders) = (c.clone(), holders.clone());
        tokio::spawn(async move {
            let held = c.campaign().await.expect("c's campaign");
            holders.won(&held);
            held
        })
    };
    let (a_slot, a_epoch) = (ta.slot(), ta.term().epoch());
    holders.left();
    resigned("a", ta.into_term().resign().await);
    let tc = within("c to win the freed slot", c_won)
        .await
        .expect("join");
    assert_eq!(tc.slot(), a_slot, "c wins the slot a gave up");
    assert!(
        tc.term().epoch() > a_epoch,
        "slot {a_slot}: term {} after term {a_epoch}",
        tc.term().epoch()
    );

    // d waits; b's slot is lost (or dropped); d wins it after the loss.
    let d_won = {
        let (d, holders) = (d.clone(), holders.clone());
        tokio::spawn(async move {
            let held = d.campaign().await.expect("d's campaign");
            holders.won(&held);
            held
        })
    };
    let (b_slot, b_epoch) = (tb.slot(), tb.term().epoch());
    let b_name = slots.slot_name(b_slot).expect("slot");
    let tb = tb.into_term();
    // From the take-away on, the backend no longer counts b as the holder
    // (on the file backend a replaced claim file can be locked at once;
    // rule 2 against the backend's own expiry is the single-election
    // suite's `lost_fires_when_taken_away`).
    holders.left();
    if b.take_away(b_name.as_str()).await {
        let lost = within("b's loss", tb.lost()).await;
        assert_eq!(lost.epoch, b_epoch);
        assert!(!lost.reason.is_end(), "b's loss: {lost}");
    }
    drop(tb);
    let td = within("d to win the lost slot", d_won).await.expect("join");
    assert_eq!(td.slot(), b_slot, "d wins the slot b lost");
    assert!(
        td.term().epoch() > b_epoch,
        "slot {b_slot}: term {} after term {b_epoch}",
        td.term().epoch()
    );

    // Each slot's epochs keep growing over further terms.
    let mut last: HashMap<u32, Epoch> = HashMap::from([
        (tc.slot(), tc.term().epoch()),
        (td.slot(), td.term().epoch()),
    ]);
    holders.left();
    resigned("c", tc.into_term().resign().await);
    holders.left();
    resigned("d", td.into_term().resign().await);
    for _ in 0..3 {
        let held = within("a's campaign", a.campaign()).await.expect("a wins");
        holders.won(&held);
        let before = last.insert(held.slot(), held.term().epoch());
        assert!(
            before.is_none_or(|e| held.term().epoch() > e),
            "slot {}: term {} after term {before:?}",
            held.slot(),
            held.term().epoch()
        );
        holders.left();
        resigned("a", held.into_term().resign().await);
    }
}

/// Checks a resign's answer. A store busy past its timeout may answer
/// `Unavailable` (SQLite: "database is locked", with many slot campaigns
/// polling one file on a loaded machine), and a short lease whose renewals
/// were held up that long may have been lost before the resign (`Lost`,
/// reported by the term as rule 2 asks): either way the term has ended, its
/// claim is released in the background or ages out, and the waiter still
/// wins the slot in a later term, which the case goes on to check.
fn resigned(who: &str, answer: Result<(), Error>) {
    match answer {
        Ok(()) | Err(Error::Unavailable { .. } | Error::Lost(_)) => {}
        Err(e) => panic!("{who} resigns: {e:?}"),
    }
}

/// Bad input gets a typed error: 0 slots and more than the cap
/// ([`ConfigError::BadSetting`]); a name held without slots, and a name
/// whose slot above the asked count is held, refused by the campaign
/// ([`ConfigError::SlotsMismatch`]) before anything is won.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::slots::slots_bad_input_is_refused(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn slots_bad_input_is_refused<B: Backend>(b: &B) {
    for count in [0, election_core::MAX_SLOTS + 1, u32::MAX] {
        assert!(
            matches!(
                Slots::new("slots-shape", count),
                Err(ConfigError::BadSetting {
                    setting: "slots",
                    ..
                })
            ),
            "{count} slots accepted"
        );
    }
    let mismatch = |r: Result<Option<SlotTerm<B::Claim>>, Error>, what: &str| match r {
        Err(Error::Config(ConfigError::SlotsMismatch { .. })) => {}
        Err(other) => panic!("{what}: not a slots mismatch: {other:?}"),
        Ok(held) => panic!("{what}: accepted (won: {})", held.is_some()),
    };

    // Held without slots.
    let plain = election_core::Candidate::new(
        b.candidate("slots-shape", "plain")
            .await
            .expect("plain candidate"),
    );
    let plain = within("the plain campaign", plain.campaign())
        .await
        .expect("plain wins");
    let two = Slots::new("slots-shape", 2).expect("slots");
    let slotted = slot_candidate(b, &two, "two").await;
    mismatch(
        slotted.try_campaign().await,
        "a slotted try on a name held without slots",
    );
    mismatch(
        slotted.campaign_timeout(Duration::from_secs(1)).await,
        "a slotted campaign on a name held without slots",
    );
    plain.resign().await.expect("resign");

    // Held with more slots: three holders of four slots hold slot 2.
    let four = Slots::new("slots-shape", 4).expect("slots");
    let mut held = Vec::new();
    for id in ["x", "y", "z"] {
        let c = slot_candidate(b, &four, id).await;
        held.push(
            within("a four-slot campaign", c.campaign())
                .await
                .expect("wins"),
        );
    }
    assert!(held.iter().any(|h| h.slot() >= 2));
    mismatch(
        slotted.try_campaign().await,
        "a two-slot try while slot 2 is held",
    );
    assert!(
        slotted
            .holders()
            .await
            .expect("holders")
            .iter()
            .all(Option::is_some),
        "the refused campaign won nothing"
    );
    for h in held {
        h.into_term().resign().await.expect("resign");
    }
    // The name free again: two slots are fine. A claim of the four-slot
    // campaigns whose answer came too late (a busy machine) was released
    // in the background, or ages out: its slot may show held a little
    // longer than the terms that resigned.
    let won = within("a two-slot try once the name is free", async {
        loop {
            match slotted.try_campaign().await {
                Err(Error::Config(ConfigError::SlotsMismatch { .. })) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => return other.expect("try").expect("a free slot"),
            }
        }
    })
    .await;
    won.into_term().resign().await.expect("resign");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryBackend, MemoryClaim};

    /// The memory backend, whose first `unavailable` calls of `claims`
    /// fail with `Unavailable` (a server that does not answer yet), then
    /// one with `config` if set.
    struct NotYet {
        inner: MemoryBackend,
        unavailable: AtomicU32,
        config: bool,
    }

    impl NotYet {
        fn new(unavailable: u32, config: bool) -> Self {
            NotYet {
                inner: MemoryBackend::new(),
                unavailable: AtomicU32::new(unavailable),
                config,
            }
        }
    }

    /// Two slots of `jobs`.
    fn jobs() -> Slots {
        Slots::new("jobs", 2).expect("slots")
    }

    impl Backend for NotYet {
        type Claim = MemoryClaim;

        async fn candidate(&self, name: &str, identity: &str) -> Result<MemoryClaim, Error> {
            self.inner.candidate(name, identity).await
        }

        async fn take_away(&self, name: &str) -> bool {
            self.inner.take_away(name).await
        }

        async fn bad_configurations(&self) -> Vec<Result<MemoryClaim, Error>> {
            self.inner.bad_configurations().await
        }

        async fn claims(&self, names: &[&str], identity: &str) -> Result<Vec<MemoryClaim>, Error> {
            let name = election_core::ElectionName::new("not-yet").expect("name");
            let left = self.unavailable.load(Ordering::SeqCst);
            if left > 0 {
                self.unavailable.store(left - 1, Ordering::SeqCst);
                return Err(Error::unavailable(
                    &name,
                    std::io::Error::other("timed out"),
                ));
            }
            if self.config {
                return Err(election_core::ElectionName::new("").unwrap_err().into());
            }
            self.inner.claims(names, identity).await
        }
    }

    /// A backend that is unavailable for the first tries still gives a slot
    /// candidate, which then wins (CI: an R3 NATS cluster timed out its
    /// bucket lookup while the claims were made).
    #[tokio::test]
    async fn a_slot_candidate_waits_for_a_backend_that_answers_later() {
        let b = NotYet::new(2, false);
        let candidate = slot_candidate(&b, &jobs(), "a").await;
        assert_eq!(
            b.unavailable.load(Ordering::SeqCst),
            0,
            "both failures were met"
        );
        let held = candidate.try_campaign().await.expect("campaign");
        assert!(held.is_some(), "a free slot is won");
    }

    /// Any other error still fails the test at once.
    #[tokio::test]
    #[should_panic(expected = "claims of a for jobs")]
    async fn a_slot_candidate_fails_on_any_other_error() {
        slot_candidate(&NotYet::new(1, true), &jobs(), "a").await;
    }
}
