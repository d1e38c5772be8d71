//! `--slots N`: a name with N holders (ADR 0062). `elect run` campaigns
//! for any one slot ([`Campaigner`]); `elect leader` and `elect observe`
//! show every slot's holder.

use std::time::Duration;

use election_core::{
    Candidate, Claim, ConfigError, Election, ElectionName, Error, HealthCheck, Identity, Leader,
    SlotCandidate, Slots, Term,
};
use futures::StreamExt;
use serde_json::json;

use crate::backend::Opened;
use crate::exit::{self, Failure};
use crate::report::{Reporter, leader_json, leader_text};

/// What `elect run` campaigns with: the name itself, or any one of its
/// slots.
pub(crate) enum Campaigner<C: Claim> {
    /// The name itself (its every slot is read first, to refuse a name
    /// used with slots: [`Slots::check_plain`]).
    One { candidate: Candidate<C> },
    /// Any one slot.
    Slots(SlotCandidate<C>),
}

/// A term won: of the name itself, or of one slot.
pub(crate) struct Won<C: Claim> {
    pub(crate) term: Term<C>,
    /// The slot held, with `--slots`.
    pub(crate) slot: Option<u32>,
}

impl<C: Claim> Campaigner<C> {
    /// The candidate of `identity` for `name`, or for any of its `slots`;
    /// `claim` makes the backend's claim of a name.
    pub(crate) fn new<E>(
        name: &str,
        slots: Option<u32>,
        mut claim: impl FnMut(&str) -> Result<C, E>,
        config: impl Fn(ConfigError) -> Failure,
        failed: impl Fn(E) -> Failure,
    ) -> Result<Campaigner<C>, Failure> {
        match slots {
            None => {
                let candidate = Candidate::new(claim(name).map_err(&failed)?);
                Ok(Campaigner::One { candidate })
            }
            Some(n) => {
                let slots = Slots::new(name, n).map_err(config)?;
                SlotCandidate::new(slots, |n: &ElectionName| claim(n.as_str()))
                    .map(Campaigner::Slots)
                    .map_err(failed)
            }
        }
    }

    /// The name given (not a slot's).
    pub(crate) fn name(&self) -> ElectionName {
        match self {
            Campaigner::One { candidate, .. } => candidate.claim().name().clone(),
            Campaigner::Slots(s) => s.slots().name().clone(),
        }
    }

    /// The candidate's identity.
    pub(crate) fn identity(&self) -> Identity {
        match self {
            Campaigner::One { candidate, .. } => candidate.claim().identity().clone(),
            Campaigner::Slots(s) => s.candidates()[0].claim().identity().clone(),
        }
    }

    /// How many slots (`None`: the name itself).
    pub(crate) fn slots(&self) -> Option<u32> {
        match self {
            Campaigner::One { .. } => None,
            Campaigner::Slots(s) => Some(s.slots().count()),
        }
    }

    /// [`Candidate::on_retry`], for every slot.
    pub(crate) fn on_retry(self, report: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        match self {
            Campaigner::One { candidate } => Campaigner::One {
                candidate: candidate.on_retry(report),
            },
            Campaigner::Slots(s) => Campaigner::Slots(s.on_retry(report)),
        }
    }

    /// [`Candidate::with_priority`] (a run without slots only).
    pub(crate) fn with_priority(self, priority: u32) -> Self {
        match self {
            Campaigner::One { candidate } => Campaigner::One {
                candidate: candidate.with_priority(priority),
            },
            slots @ Campaigner::Slots(_) => slots,
        }
    }

    /// [`Candidate::on_wait`]: `report` when the campaign first waits for
    /// the name held by another (a run without slots only; with slots the
    /// holders are said when a run gives up).
    pub(crate) fn on_wait(self, report: impl Fn() + Send + Sync + 'static) -> Self {
        match self {
            Campaigner::One { candidate } => Campaigner::One {
                candidate: candidate.on_wait(report),
            },
            slots @ Campaigner::Slots(_) => slots,
        }
    }

    /// [`Candidate::health_check`], over every slot.
    pub(crate) fn health_check(&self, bound: Duration) -> HealthCheck {
        match self {
            Campaigner::One { candidate, .. } => candidate.health_check(bound),
            Campaigner::Slots(s) => s.health_check(bound),
        }
    }

    /// Every candidate campaigned with (one per slot).
    pub(crate) fn candidates(&self) -> Vec<&Candidate<C>> {
        match self {
            Campaigner::One { candidate, .. } => vec![candidate],
            Campaigner::Slots(s) => s.candidates().iter().collect(),
        }
    }

    /// Campaigns: forever (`None`), once (`Some(ZERO)`... see the caller)
    /// or for at most a time.
    /// Without slots, every slot of the name is read first on `election`
    /// ([`Slots::check_plain`]: slot 0 alone misses a slotted use whose
    /// holder of slot 0 left first).
    pub(crate) async fn campaign<E: Election>(
        &self,
        election: &E,
        once: bool,
        timeout: Option<Duration>,
    ) -> Result<Option<Won<C>>, Error> {
        match self {
            Campaigner::One { candidate } => {
                Slots::check_plain(candidate.claim().name().as_str(), election).await?;
                let term = match (once, timeout) {
                    (true, _) => candidate.try_campaign().await?,
                    (false, Some(d)) => candidate.campaign_timeout(d).await?,
                    (false, None) => Some(candidate.campaign().await?),
                };
                Ok(term.map(|term| Won { term, slot: None }))
            }
            Campaigner::Slots(s) => {
                let held = match (once, timeout) {
                    (true, _) => s.try_campaign().await?,
                    (false, Some(d)) => s.campaign_timeout(d).await?,
                    (false, None) => Some(s.campaign().await?),
                };
                Ok(held.map(|h| Won {
                    slot: Some(h.slot()),
                    term: h.into_term(),
                }))
            }
        }
    }

    /// Who holds the name (the first slot's holder with `--slots`, for the
    /// "not elected" message), as the backend reads it.
    pub(crate) async fn holders(&self) -> Result<Vec<Option<Leader>>, Error> {
        match self {
            Campaigner::One { candidate, .. } => Ok(vec![candidate.leader().await?]),
            Campaigner::Slots(s) => s.holders().await,
        }
    }
}

/// The text after `NAME: ` for one slot.
fn slot_text(slot: u32, holder: Option<&Leader>) -> String {
    match holder {
        None => format!("slot {slot}: free"),
        Some(_) => format!(
            "slot {slot}: {}",
            leader_text(holder).replacen("led by", "held by", 1)
        ),
    }
}

fn slot_json(name: &str, slot: u32, count: u32, holder: Option<&Leader>) -> serde_json::Value {
    json!({ "name": name, "slots": count, "slot": slot, "holder": leader_json(holder) })
}

fn print(line: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot write to stdout: {e}")))
}

fn slots_of(name: &str, count: u32) -> Result<Slots, Failure> {
    Slots::new(name, count).map_err(|e| {
        Failure::config(exit::chain(&e))
            .hint("a name with slots is 1-192 bytes, no '/' or control characters")
    })
}

/// `elect leader --slots N`: a line per slot (`NAME: slot I: held by ID in
/// term E (since ...)` or `NAME: slot I: free`), then `NAME: K of N slots
/// held`; with `--json` one object per slot.
pub(crate) async fn leader(
    backend: &Opened,
    name: &str,
    count: u32,
    json: bool,
    report: Reporter,
) -> Result<u8, Failure> {
    let slots = slots_of(name, count)?;
    let mut held = 0;
    let mut lines = Vec::new();
    for (slot, slot_name) in (0..).zip(slots.slot_names()) {
        // A NATS holder still in its failover grace is pending, as plain
        // `elect leader` shows it: it does not hold the slot yet.
        let (now, pending) = match backend {
            Opened::Ready(b) if b.may_be_pending() => {
                match b
                    .holder(slot_name.as_str())
                    .await
                    .map_err(|e| crate::backend::backend_failure(&e))?
                {
                    Some(h) if h.pending => (None, Some(h.leader)),
                    h => (h.map(|h| h.leader), None),
                }
            }
            _ => (
                crate::leader::current(backend, slot_name.as_str()).await?,
                None,
            ),
        };
        held += u32::from(now.is_some());
        lines.push(match (&pending, json) {
            (Some(p), true) => json!({ "name": name, "slots": count, "slot": slot, "holder": null, "pending": leader_json(Some(p)) }).to_string(),
            (Some(p), false) => format!(
                "{name}: slot {slot}: pending: {} in term {} (waiting out the failover grace; not holding yet)",
                p.identity, p.epoch
            ),
            (None, true) => slot_json(name, slot, count, now.as_ref()).to_string(),
            (None, false) => format!("{name}: {}", slot_text(slot, now.as_ref())),
        });
    }
    if let Opened::Absent(absent) = backend {
        report.event(
            "note",
            &format!("note: {}", absent.note),
            json!({ "name": name, "note": absent.note }),
        );
    }
    if !json {
        lines.push(format!("{name}: {held} of {count} slots held"));
    }
    print(&lines.join("\n"))?;
    Ok(exit::OK)
}

/// `elect observe --slots N`: every slot's holder, then a line per change
/// of any slot, until interrupted (SIGINT/SIGTERM end it with 0). Each
/// slot is observed as `elect observe` observes a name (the backend's
/// `observe`: pushed on NATS and PostgreSQL, a look every `poll` on SQLite
/// and the file backend).
pub(crate) async fn observe(
    backend: &Opened,
    name: &str,
    count: u32,
    json: bool,
    poll: Duration,
    report: Reporter,
) -> Result<u8, Failure> {
    use election_core::Election;
    let slots = slots_of(name, count)?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| Failure::new(exit::INTERNAL, format!("signal handler: {e}")))?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::new(exit::INTERNAL, format!("signal handler: {e}")))?;
    let mut stop = Box::pin(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    });
    let show = |slot: u32, holder: Option<&Leader>| {
        if json {
            slot_json(name, slot, count, holder).to_string()
        } else {
            format!("{name}: {}", slot_text(slot, holder))
        }
    };
    let opened;
    let mut backend = backend;
    // What was printed last per slot (`None`: nothing yet).
    let mut last: Vec<Option<Option<Leader>>> = vec![None; count as usize];
    if backend.is_pending() {
        if let Opened::Absent(absent) = backend {
            report.event(
                "note",
                &format!("note: {}", absent.note),
                json!({ "name": name, "note": absent.note }),
            );
        }
        for slot in 0..count {
            print(&show(slot, None))?;
            last[slot as usize] = Some(None);
        }
        loop {
            tokio::select! {
                () = &mut stop => return Ok(exit::OK),
                () = tokio::time::sleep(poll) => {}
            }
            if let Some(b) = backend.ready().await? {
                opened = b;
                backend = &opened;
                break;
            }
        }
    }
    let Opened::Ready(election) = backend else {
        return Err(Failure::new(exit::INTERNAL, "the backend is not open"));
    };
    let mut streams = Vec::new();
    for (slot, slot_name) in (0..).zip(slots.slot_names()) {
        let changes = election.observe(slot_name.as_str(), poll).await?;
        streams.push(Box::pin(changes.map(move |c| (slot, c))));
    }
    let mut all = futures::stream::select_all(streams);
    loop {
        tokio::select! {
            () = &mut stop => return Ok(exit::OK),
            change = all.next() => match change {
                Some((slot, Ok(now))) => {
                    let before = &mut last[slot as usize];
                    let same = before.as_ref().is_some_and(|b| {
                        b.as_ref().map(|l| (&l.identity, l.epoch)) == now.as_ref().map(|l| (&l.identity, l.epoch))
                    });
                    if !same {
                        print(&show(slot, now.as_ref()))?;
                        *before = Some(now);
                    }
                }
                Some((_, Err(e))) => return Err(e.into()),
                None => return Err(Failure::new(exit::UNAVAILABLE, "the observation ended")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_lines_say_held_or_free() {
        assert_eq!(slot_text(2, None), "slot 2: free");
        let l = Leader {
            identity: Identity::new("h/1").unwrap(),
            epoch: election_core::Epoch::new(7).unwrap(),
            since: None,
            renewed: None,
            ttl: None,
            value: None,
        };
        assert_eq!(slot_text(0, Some(&l)), "slot 0: held by h/1 in term 7");
        let j = slot_json("w", 0, 2, Some(&l));
        assert_eq!(j["slot"], 0);
        assert_eq!(j["holder"]["epoch"], 7);
    }
}
