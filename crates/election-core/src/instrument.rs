//! The core's metrics, recorded through the [`metrics`] facade: every
//! name, label and unit in one place (docs/metrics.md has the table, ADR
//! 0043 the reasons).
//!
//! No recorder installed (the default): every handle is a no-op. Handles
//! are made once per term, renewal loop or lease set, never per `held`
//! call, so the hot paths cost nothing more than before.

use metrics::{Counter, Gauge, Histogram, SharedString, Unit};

use crate::error::Error;
use crate::{ElectionName, LossReason};

/// Terms this process won, per election.
pub(crate) const TERMS_WON: &str = "election_terms_won_total";
/// Terms the backend took away (or could no longer prove held), per
/// election and reason.
pub(crate) const TERMS_LOST: &str = "election_terms_lost_total";
/// Terms their holder ended with a resign.
pub(crate) const TERMS_RESIGNED: &str = "election_terms_resigned_total";
/// Terms this process handed to a successor (a subset of the resigned).
pub(crate) const TERMS_TRANSFERRED: &str = "election_terms_transferred_total";
/// Of those, the terms handed to a preferred candidate (a yield).
pub(crate) const TERMS_YIELDED: &str = "election_terms_yielded_total";
/// Terms an operator's revoke in this process took away (ADR 0111).
pub(crate) const REVOCATIONS: &str = "election_revocations_total";
/// Terms their holder ended by dropping them (or their `lead`).
pub(crate) const TERMS_DROPPED: &str = "election_terms_dropped_total";
/// 1 while this process leads the election, else 0.
pub(crate) const LEADER: &str = "election_leader";
/// From a campaign's start to its win.
pub(crate) const CAMPAIGN_WAIT: &str = "election_campaign_wait_seconds";
/// A landed renewal of a term, from before it was sent to its answer.
pub(crate) const RENEWAL_DURATION: &str = "election_renewal_duration_seconds";
/// Renewals of a term that did not land, by kind.
pub(crate) const RENEWAL_FAILURES: &str = "election_renewal_failures_total";
/// Keys a lease set holds now.
pub(crate) const SET_KEYS_HELD: &str = "election_lease_set_keys_held";
/// Keys a lease set won.
pub(crate) const SET_KEYS_WON: &str = "election_lease_set_keys_won_total";
/// Keys a lease set lost, by reason.
pub(crate) const SET_KEYS_LOST: &str = "election_lease_set_keys_lost_total";
/// A landed batch renewal of a lease set.
pub(crate) const SET_RENEWAL_DURATION: &str = "election_lease_set_renewal_duration_seconds";
/// Batch renewals of a lease set that did not land, by kind.
pub(crate) const SET_RENEWAL_FAILURES: &str = "election_lease_set_renewal_failures_total";

/// Registers the help text and unit of every metric the core records with
/// the installed recorder (exporters print them as `# HELP` lines). Call
/// it once after installing a recorder; without one it does nothing.
///
/// The table of every metric is in the repository's `docs/metrics.md`.
///
/// ```
/// // After installing a recorder (e.g. metrics-exporter-prometheus):
/// election_core::describe_metrics();
/// ```
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(TERMS_WON, "Terms this process won, per election.");
    describe_counter!(
        TERMS_LOST,
        "Terms the backend took away or could no longer prove held (reason: expired, revoked, failed)."
    );
    describe_counter!(TERMS_RESIGNED, "Terms this process ended with a resign.");
    describe_counter!(
        TERMS_TRANSFERRED,
        "Terms this process handed to a named successor (also counted resigned)."
    );
    describe_counter!(
        TERMS_YIELDED,
        "Terms this process handed to a waiting candidate of a higher priority (also counted transferred)."
    );
    describe_counter!(
        REVOCATIONS,
        "Terms this process took away with an operator's revoke (the deposed holder counts a loss, reason revoked)."
    );
    describe_counter!(
        TERMS_DROPPED,
        "Terms this process ended by dropping the term or its lead."
    );
    describe_gauge!(LEADER, "1 while this process leads the election, else 0.");
    describe_histogram!(
        CAMPAIGN_WAIT,
        Unit::Seconds,
        "Time from a campaign's start to its win."
    );
    describe_histogram!(
        RENEWAL_DURATION,
        Unit::Seconds,
        "Landed renewals of a term, from before the request was sent to its answer."
    );
    describe_counter!(
        RENEWAL_FAILURES,
        "Renewals of a term that did not land (kind: unknown, unavailable, refused, other)."
    );
    describe_gauge!(SET_KEYS_HELD, "Keys the lease set holds now.");
    describe_counter!(SET_KEYS_WON, "Keys the lease set won.");
    describe_counter!(
        SET_KEYS_LOST,
        "Keys the lease set lost (reason: expired, revoked, failed)."
    );
    describe_histogram!(
        SET_RENEWAL_DURATION,
        Unit::Seconds,
        "Landed batch renewals of a lease set, from before the request was sent to its answer."
    );
    describe_counter!(
        SET_RENEWAL_FAILURES,
        "Batch renewals of a lease set that did not land (kind: unknown, unavailable, refused, other)."
    );
}

/// The `reason` label of a backend's loss; `None` for the holder's own
/// ends (resigned, dropped), which are counted apart.
pub(crate) fn loss_label(reason: &LossReason) -> Option<&'static str> {
    match reason {
        LossReason::Expired => Some("expired"),
        LossReason::Revoked { .. } => Some("revoked"),
        LossReason::Failed(_) => Some("failed"),
        LossReason::Resigned | LossReason::Dropped => None,
    }
}

/// The `kind` label of a renewal that failed with `e`.
pub(crate) fn failure_kind(e: &Error) -> &'static str {
    match e {
        Error::OutcomeUnknown { .. } => "unknown",
        Error::Unavailable { .. } => "unavailable",
        _ => "other",
    }
}

/// The label value of an election's name.
fn label(name: &ElectionName) -> SharedString {
    SharedString::from(name.as_str().to_owned())
}

/// Shows `name` on `backend` in the leader gauge from the start of a
/// campaign: 0 while waiting (a series that exists), 1 once a term is won.
pub(crate) fn campaigning(name: &ElectionName, backend: &'static str) {
    metrics::gauge!(LEADER, "name" => label(name), "backend" => backend).increment(0.0);
}

/// Counts the end of a term of `name` that this process led.
pub(crate) fn term_ended(name: &ElectionName, backend: &'static str, reason: &LossReason) {
    let name = label(name);
    metrics::gauge!(LEADER, "name" => name.clone(), "backend" => backend).decrement(1.0);
    match reason {
        LossReason::Resigned => {
            metrics::counter!(TERMS_RESIGNED, "name" => name, "backend" => backend).increment(1)
        }
        LossReason::Dropped => {
            metrics::counter!(TERMS_DROPPED, "name" => name, "backend" => backend).increment(1)
        }
        other => {
            let reason = loss_label(other).unwrap_or("failed");
            metrics::counter!(TERMS_LOST, "name" => name, "backend" => backend, "reason" => reason)
                .increment(1);
        }
    }
}

/// Counts a revocation of `name` that landed (`Revoked::counted`).
pub(crate) fn revoked(name: &ElectionName, backend: &'static str) {
    metrics::counter!(REVOCATIONS, "name" => label(name), "backend" => backend).increment(1);
}

/// Counts a term of `name` handed to a successor (its end is counted
/// resigned by [`term_ended`]).
pub(crate) fn term_transferred(name: &ElectionName, backend: &'static str, yielded: bool) {
    metrics::counter!(TERMS_TRANSFERRED, "name" => label(name), "backend" => backend).increment(1);
    if yielded {
        metrics::counter!(TERMS_YIELDED, "name" => label(name), "backend" => backend).increment(1);
    }
}

/// Counts a won term of `name` and the campaign's wait for it.
pub(crate) fn term_won(name: &ElectionName, backend: &'static str, waited: std::time::Duration) {
    let name = label(name);
    metrics::counter!(TERMS_WON, "name" => name.clone(), "backend" => backend).increment(1);
    metrics::gauge!(LEADER, "name" => name.clone(), "backend" => backend).increment(1.0);
    metrics::histogram!(CAMPAIGN_WAIT, "name" => name, "backend" => backend)
        .record(waited.as_secs_f64());
}

/// The handles of one renewal loop (a term's, or a lease set's).
pub(crate) struct RenewalMetrics {
    duration: Histogram,
    unknown: Counter,
    unavailable: Counter,
    refused: Counter,
    other: Counter,
}

impl RenewalMetrics {
    /// A term's renewals, labelled with its election's `name`; no-op
    /// handles for a term that is not `instrumented` (a lease set's key).
    pub(crate) fn term(name: &ElectionName, backend: &'static str, instrumented: bool) -> Self {
        if !instrumented {
            return RenewalMetrics {
                duration: Histogram::noop(),
                unknown: Counter::noop(),
                unavailable: Counter::noop(),
                refused: Counter::noop(),
                other: Counter::noop(),
            };
        }
        let name = label(name);
        let failure = |kind: &'static str| metrics::counter!(RENEWAL_FAILURES, "name" => name.clone(), "backend" => backend, "kind" => kind);
        RenewalMetrics {
            duration: metrics::histogram!(RENEWAL_DURATION, "name" => name.clone(), "backend" => backend),
            unknown: failure("unknown"),
            unavailable: failure("unavailable"),
            refused: failure("refused"),
            other: failure("other"),
        }
    }

    /// A lease set's batch renewals, labelled with its `set` and `backend`.
    pub(crate) fn set(set: SharedString, backend: &'static str) -> Self {
        let failure = |kind: &'static str| metrics::counter!(SET_RENEWAL_FAILURES, "set" => set.clone(), "backend" => backend, "kind" => kind);
        RenewalMetrics {
            duration: metrics::histogram!(SET_RENEWAL_DURATION, "set" => set.clone(), "backend" => backend),
            unknown: failure("unknown"),
            unavailable: failure("unavailable"),
            refused: failure("refused"),
            other: failure("other"),
        }
    }

    /// A renewal landed after `took`.
    pub(crate) fn landed(&self, took: std::time::Duration) {
        self.duration.record(took.as_secs_f64());
    }

    /// A renewal failed: `kind` as [`failure_kind`] names it, or `refused`.
    pub(crate) fn failed(&self, kind: &str) {
        match kind {
            "unknown" => &self.unknown,
            "unavailable" => &self.unavailable,
            "refused" => &self.refused,
            _ => &self.other,
        }
        .increment(1);
    }
}

/// The handles of one lease set's keys.
pub(crate) struct SetMetrics {
    pub(crate) set: SharedString,
    pub(crate) backend: &'static str,
    held: Gauge,
    won: Counter,
}

impl SetMetrics {
    /// The set's series, labelled `set` and `backend`, registered at once
    /// (the held gauge reads 0 and the won counter 0 from the set's start,
    /// as a campaign's leader gauge does, ADR 0063).
    pub(crate) fn new(set: &str, backend: &'static str) -> Self {
        let set = SharedString::from(set.to_owned());
        let held = metrics::gauge!(SET_KEYS_HELD, "set" => set.clone(), "backend" => backend);
        held.increment(0.0);
        let won = metrics::counter!(SET_KEYS_WON, "set" => set.clone(), "backend" => backend);
        won.increment(0);
        SetMetrics {
            held,
            won,
            set,
            backend,
        }
    }

    pub(crate) fn won(&self) {
        self.won.increment(1);
        self.held.increment(1.0);
    }

    /// A key lost (`reason` a backend's loss) or given up (`None`).
    pub(crate) fn ended(&self, reason: Option<&LossReason>) {
        self.held.decrement(1.0);
        if let Some(reason) = reason.and_then(loss_label) {
            metrics::counter!(SET_KEYS_LOST, "set" => self.set.clone(), "backend" => self.backend, "reason" => reason)
                .increment(1);
        }
    }
}

impl std::fmt::Debug for SetMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetMetrics")
            .field("set", &self.set)
            .field("backend", &self.backend)
            .finish()
    }
}
