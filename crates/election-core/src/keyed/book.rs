//! The keyed engine's decisions as one pure book: what a lease set holds,
//! which terms were reported lost, and what the loop does next — claim
//! these keys, renew those, release every held key, or sleep until an
//! instant — as functions of that knowledge and the caller's instant. No
//! I/O, no clock, no runtime: the loop ([`drive`](super::engine)) asks
//! [`Book::next`], executes the [`Command`] and feeds the answer back
//! ([`Book::lost_before`] and [`Book::insert`] for a win,
//! [`Book::renew_landed`] / [`Book::renew_failed`] for a renewal), in the
//! manner of [`Renewal::decide`](crate::renewal::Renewal::decide).
//!
//! Expiry is judged in three places, no more: [`Book::expire`] (each held
//! key's own deadline, at every decision), [`Renewal::decide`] (the batch
//! renewal's deadline) and `KeyState::is_held` (readers of `held`, without
//! a lock, against the deadline the book last stored).
//!
//! Its invariants (property-tested below):
//! - it never asks to claim a key it holds;
//! - a key whose term was reported lost is never released in that term,
//!   and a win of that term (or an earlier one) is not recorded;
//! - after a decision at `now`, no key whose validity has passed by `now`
//!   is held;
//! - every key that leaves the book other than by release is reported
//!   lost, once.
//!
//! The book is generic over what the engine keeps per hold (`S`: the key's
//! `KeyState`, whose `held` it marks from what the book reports), so the
//! tests below run it on `()`.

use std::collections::HashMap;
use std::mem;
use std::time::Duration;

use tokio::time::Instant;

use crate::renewal::{Input, Next, Renewal, RenewalPolicy};
use crate::{ElectionName, Epoch, LossReason, Won};

use super::engine::HeldKey;

/// A key this process holds, as the book keeps it.
#[derive(Debug)]
pub(crate) struct Hold<S> {
    /// What the engine keeps with the hold.
    pub(crate) state: S,
    /// The term that holds the key.
    pub(crate) epoch: Epoch,
    /// The deadline of its last landed renewal; `None`: it does not expire.
    pub(crate) valid_until: Option<Instant>,
    /// When the win or its last landed renewal was recorded (health).
    pub(crate) renewed_at: Instant,
}

/// A key the book no longer holds because its term was lost: the engine
/// ends its hold (`held` reads false), logs and counts it, and never
/// releases it (rule 3).
#[derive(Debug)]
pub(crate) struct Lost<S> {
    pub(crate) key: ElectionName,
    pub(crate) epoch: Epoch,
    pub(crate) state: S,
    pub(crate) reason: LossReason,
}

/// What the loop does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// Claim these keys (asked, not held, still tried), then feed each
    /// answer back.
    Claim(Vec<ElectionName>),
    /// Renew these held keys in one batch, within `budget`, then feed the
    /// answer back.
    Renew {
        keys: Vec<HeldKey>,
        budget: Duration,
    },
    /// Give these keys up (the set closes; none of them was lost), then
    /// end the set.
    Release(Vec<HeldKey>),
    /// Sleep until `until` (`None`: until woken), while the backend's
    /// wait runs if `wait` (some asked key is not held).
    Sleep { until: Option<Instant>, wait: bool },
}

/// One decision: the command, the keys lost on the way to it (each
/// reported once; the engine marks them before it executes the command),
/// and for a [`Command::Release`] what the engine kept with each released
/// hold (it ends them before the release is sent).
#[derive(Debug)]
pub(crate) struct Decision<S> {
    pub(crate) command: Command,
    pub(crate) lost: Vec<Lost<S>>,
    pub(crate) released: Vec<S>,
}

/// The engine's knowledge of one lease set and its rules (module doc).
#[derive(Debug)]
pub(crate) struct Book<S> {
    /// How held keys are renewed; `None`: holds do not expire.
    policy: Option<RenewalPolicy>,
    /// The keys held now; a key leaves on its loss or for its release,
    /// never both (rule 3).
    holds: HashMap<ElectionName, Hold<S>>,
    /// The highest epoch of each key whose loss was reported (also while
    /// the key was not held in it, before its win was recorded): a win of
    /// that term or an earlier one does not count.
    lost: HashMap<ElectionName, Epoch>,
    /// The batch renewal of every expiring key, while one expires.
    machine: Option<Renewal>,
    /// What the machine is told at the next decision.
    input: Input,
    /// A claim of the keys not held is due (woken, or never made).
    claim_due: bool,
}

impl<S> Default for Book<S> {
    fn default() -> Self {
        Book {
            policy: None,
            holds: HashMap::new(),
            lost: HashMap::new(),
            machine: None,
            input: Input::Due,
            claim_due: true,
        }
    }
}

impl<S> Book<S> {
    /// Sets how held keys are renewed (the backend's
    /// [`renewal`](super::KeyedClaims::renewal)), before the first win.
    pub(crate) fn set_policy(&mut self, policy: Option<RenewalPolicy>) {
        self.policy = policy;
    }

    /// The hold of `key`, if held.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &ElectionName) -> Option<&Hold<S>> {
        self.holds.get(key)
    }

    /// True if `key` is held (in any term).
    #[cfg(test)]
    pub(crate) fn contains_key(&self, key: &ElectionName) -> bool {
        self.holds.contains_key(key)
    }

    /// The held keys.
    pub(crate) fn holds(&self) -> impl Iterator<Item = &Hold<S>> {
        self.holds.values()
    }

    /// A claim of the keys not held is due at the next decision (a new key
    /// was asked, a key was lost, the backend's wait ended, a guard nudged).
    pub(crate) fn wake(&mut self) {
        self.claim_due = true;
    }

    /// What to do next at `now`, given the asked keys still tried
    /// (`asked`: every asked key without a permanent error) and whether
    /// the set is `closing` (no guard runs any more).
    pub(crate) fn next(
        &mut self,
        now: Instant,
        asked: impl IntoIterator<Item = ElectionName>,
        closing: bool,
    ) -> Decision<S> {
        if closing {
            let (keys, released) = self.take().into_iter().unzip();
            return Decision {
                command: Command::Release(keys),
                lost: Vec::new(),
                released,
            };
        }
        // Rule 2's backstop: a hold whose deadline passed unreported is lost.
        let mut lost = self.expire(now);
        let mut renew_at = None;
        while let (Some(policy), Some(machine)) = (self.policy, self.machine.as_mut()) {
            match machine.decide(mem::replace(&mut self.input, Input::Due), now) {
                Next::SleepUntil(at) => {
                    renew_at = Some(at);
                    break;
                }
                Next::Renew { budget } => {
                    let keys = self.expiring();
                    if keys.is_empty() {
                        // Nothing expires any more: no renewal to run.
                        self.machine = None;
                        break;
                    }
                    return Decision {
                        command: Command::Renew { keys, budget },
                        lost,
                        released: Vec::new(),
                    };
                }
                Next::Lose(_) => {
                    // The batch lost its deadline (or every renewal was
                    // refused): what expired is lost, the rest runs on.
                    lost.extend(self.expire(now));
                    self.machine = self.first_deadline().map(|d| Renewal::new(policy, d));
                }
            }
        }
        let free: Vec<ElectionName> = asked
            .into_iter()
            .filter(|k| !self.holds.contains_key(k))
            .collect();
        let command = if mem::take(&mut self.claim_due) && !free.is_empty() {
            Command::Claim(free)
        } else {
            Command::Sleep {
                until: renew_at,
                wait: !free.is_empty(),
            }
        };
        Decision {
            command,
            lost,
            released: Vec::new(),
        }
    }

    /// True if a loss of `key` in term `epoch` (or a later one) was
    /// already reported: its win must not be recorded.
    pub(crate) fn lost_before(&self, key: &ElectionName, epoch: Epoch) -> bool {
        self.lost.get(key).is_some_and(|e| *e >= epoch)
    }

    /// Records a win of `key` (whose loss was not reported: check
    /// [`lost_before`](Book::lost_before) first, in the same decision) at
    /// `now`, and starts or keeps the batch renewal so it runs by the
    /// first deadline of all.
    pub(crate) fn insert(&mut self, key: ElectionName, state: S, won: Won, now: Instant) {
        self.holds.insert(
            key,
            Hold {
                state,
                epoch: won.epoch,
                valid_until: won.valid_until,
                renewed_at: now,
            },
        );
        if let Some(policy) = self.policy {
            let machine = self.machine.take();
            self.machine = self.first_deadline().map(|d| match machine {
                Some(m) if m.deadline() <= d => m,
                _ => Renewal::new(policy, d),
            });
        }
    }

    /// Records the loss of `key` in term `epoch`: a later win of that term
    /// does not count; the hold, if it is of that term, leaves the book
    /// and is returned (else `None`).
    pub(crate) fn lose(
        &mut self,
        key: &ElectionName,
        epoch: Epoch,
        reason: &LossReason,
    ) -> Option<Lost<S>> {
        let seen = self.lost.entry(key.clone()).or_insert(epoch);
        *seen = (*seen).max(epoch);
        if self.holds.get(key).is_none_or(|h| h.epoch != epoch) {
            return None;
        }
        let (key, hold) = self.holds.remove_entry(key)?;
        self.claim_due = true;
        Some(Lost {
            key,
            epoch,
            state: hold.state,
            reason: reason.clone(),
        })
    }

    /// Records that `key`, held in term `epoch`, is known held until
    /// `valid_until` (from `now`); the hold if it is of that term.
    pub(crate) fn renewed(
        &mut self,
        key: &ElectionName,
        epoch: Epoch,
        valid_until: Instant,
        now: Instant,
    ) -> Option<&S> {
        let hold = self.holds.get_mut(key).filter(|h| h.epoch == epoch)?;
        hold.valid_until = Some(valid_until);
        hold.renewed_at = now;
        Some(&hold.state)
    }

    /// The answer to a [`Command::Renew`] of `keys` sent at `sent`:
    /// `refused` keys are lost (returned), every other one is held for the
    /// policy's validity from `sent` (its hold handed to `renewed`).
    /// True if any landed.
    pub(crate) fn renew_landed(
        &mut self,
        keys: &[HeldKey],
        sent: Instant,
        refused: &HashMap<ElectionName, LossReason>,
        now: Instant,
        mut renewed: impl FnMut(&S, Epoch, Instant),
    ) -> (Vec<Lost<S>>, bool) {
        let validity = self.policy.map_or(Duration::ZERO, |p| p.validity());
        let mut lost = Vec::new();
        let mut landed = false;
        for (key, epoch) in keys {
            match refused.get(key) {
                Some(reason) => lost.extend(self.lose(key, *epoch, reason)),
                None => {
                    if let Some(state) = self.renewed(key, *epoch, sent + validity, now) {
                        renewed(state, *epoch, sent + validity);
                    }
                    landed = true;
                }
            }
        }
        self.input = if landed {
            Input::Renewed { sent }
        } else {
            Input::Refused
        };
        (lost, landed)
    }

    /// A [`Command::Renew`] failed or timed out (`input`): nothing counted.
    pub(crate) fn renew_failed(&mut self, input: Input) {
        self.input = input;
    }

    /// Every hold whose deadline has come by `now` leaves the book, lost.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<Lost<S>> {
        let expired: Vec<HeldKey> = self
            .holds
            .iter()
            .filter(|(_, h)| h.valid_until.is_some_and(|d| d <= now))
            .map(|(k, h)| (k.clone(), h.epoch))
            .collect();
        expired
            .into_iter()
            .filter_map(|(key, epoch)| self.lose(&key, epoch, &LossReason::Expired))
            .collect()
    }

    /// The first deadline of the held keys that expire.
    pub(crate) fn first_deadline(&self) -> Option<Instant> {
        self.holds.values().filter_map(|h| h.valid_until).min()
    }

    /// The held keys that expire.
    fn expiring(&self) -> Vec<HeldKey> {
        self.holds
            .iter()
            .filter(|(_, h)| h.valid_until.is_some())
            .map(|(k, h)| (k.clone(), h.epoch))
            .collect()
    }

    /// Every key still held, taken for release (with what the engine kept):
    /// a loss reported from here on finds nothing.
    pub(crate) fn take(&mut self) -> Vec<(HeldKey, S)> {
        self.holds
            .drain()
            .map(|(k, h)| ((k, h.epoch), h.state))
            .collect()
    }
}
