//! The handover chains with many waiters (`--only waiters`, issue 42's
//! goal 1: a handover flat in the number of waiters), over every backend
//! with a server of its own ([`Kind::has_server`], one node): `K`
//! candidate processes of `election-candidate --backend URL`, one leading
//! and `K − 1` waiting, for each `K` of [`WAITER_COUNTS`]. The chain never
//! looks at which backend it runs on: backend-kit starts the server and
//! gives its URL, and the candidates open it.

use std::time::Duration;

use backend_kit::{Kind, Timing};
use election_url::BackendUrl;

use super::handover::{Chain, Process};
use super::report::Row;
use super::rounds::{ms, runtime};
use super::stats::Summary;
use super::{Setup, step, summary, with_log_tail};
use crate::Result;

/// The numbers of candidates of the chains.
pub(crate) const WAITER_COUNTS: [usize; 3] = [2, 10, 30];

/// How long the waiters are given, after the newest says `campaigning`,
/// before the leader resigns: enough for 30 processes on two cores to have
/// tried once and queued.
pub(crate) const WAITER_SETTLE: Duration = Duration::from_millis(300);

/// The chains' lease timings: TTL 3 s, renew every 1 s, poll 1 s (only a
/// backstop: a wake-up by poll stands out); the failover grace (NATS) is
/// the backend's default, a third of the TTL.
pub(crate) const TIMING: Timing = Timing {
    ttl: Duration::from_millis(3000),
    renew: Duration::from_millis(1000),
    grace: Duration::from_millis(1000),
    poll: Duration::from_millis(1000),
};

/// The flags of [`TIMING`] every backend with a lease takes (not the
/// grace, which only some have).
fn flags() -> Vec<String> {
    [
        ("--ttl-ms", TIMING.ttl),
        ("--renew-ms", TIMING.renew),
        ("--poll-ms", TIMING.poll),
    ]
    .into_iter()
    .flat_map(|(flag, d)| [flag.to_owned(), d.as_millis().to_string()])
    .collect()
}

/// The kinds the chains run on: every backend with a server, one node.
pub(crate) fn kinds() -> impl Iterator<Item = Kind> {
    Kind::ALL
        .into_iter()
        .filter(|k| k.has_server() && !k.is_replicated())
}

/// The chains with `K` candidates ([`WAITER_COUNTS`]) on `kind`: one row
/// per `K`, each against the chain with two, and a note with each `K`'s
/// median and the ratio of the largest to two (issue 42's goal: within
/// 1.2×).
pub(crate) fn rows(
    s: &Setup<'_>,
    kind: Kind,
    n: usize,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let label = kind.label();
    let store = step(&format!("{label}: start the server"), || {
        Ok(kind.start(s.dir)?)
    })?;
    // The schema (where there is one) made once, not by the first leader.
    step(&format!("{label}: prepare the store"), || {
        runtime()?.block_on(store.prepare())?;
        Ok(())
    })?;
    let url: BackendUrl = store
        .url()
        .parse()
        .map_err(|e| format!("bad URL {:?}: {e}", store.url()))?;
    let mut measured = Vec::new();
    for k in WAITER_COUNTS {
        let mut chain = Chain::new(
            Process::candidate(s.candidate_bin, &url, &format!("waiters-{k}"), flags()),
            s.log.to_path_buf(),
        );
        let samples = step(&format!("{label}: handover with {k} candidates"), || {
            chain.measure_waiters(k, n, 2, WAITER_SETTLE)
        })
        .map_err(|e| with_log_tail(e, s.log))?;
        measured.push((k, summary(&samples, "handover with waiters")?));
    }
    drop(store);
    let two = measured[0].1;
    for (k, m) in &measured {
        rows.push(Row {
            what: format!(
                "{label}: clean handover with {k} candidates (1 leader, {} waiting; \
                 processes; TTL {} ms, poll {} ms)",
                k - 1,
                TIMING.ttl.as_millis(),
                TIMING.poll.as_millis()
            ),
            measured: *m,
            floor: "the same chain with 2 candidates".into(),
            floor_measured: Some(two),
            ops_per_s: None,
        });
    }
    notes.push(note(label, &measured));
    Ok(())
}

/// The note of one kind's chains: each `K`'s median, and the largest
/// against two.
fn note(label: &str, measured: &[(usize, Summary)]) -> String {
    let shown: Vec<String> = measured
        .iter()
        .map(|(k, m)| {
            format!(
                "K = {k}: median {} (min {}, max {}, n = {})",
                ms(m.median_ns),
                ms(m.min_ns),
                ms(m.max_ns),
                m.n
            )
        })
        .collect();
    let (Some((_, two)), Some((largest, last))) = (measured.first(), measured.last()) else {
        return format!("{label}: no handover chains with waiters measured.");
    };
    let ratio = last.over(two);
    format!(
        "{label}, clean handover with K candidates (one leader, K − 1 waiting, a new \
         waiter started after each handover; {WAITER_SETTLE:?} before each resign): {}. \
         K = {largest} is {ratio:.2}× K = 2 (issue 42's goal: within 1.2×, {}).",
        shown.join("; "),
        if ratio <= 1.2 { "met" } else { "missed" }
    )
}

/// How to read the rows: their section of the report's notes after the
/// table.
pub(crate) const READING: &str = "Handovers with many waiters (`--only waiters`, issue 42), on
every backend with a server (one node, started by `backend-kit`):
`election-candidate --backend URL` processes (TTL 3000 ms, renew
1000 ms, poll 1000 ms, only a backstop; NATS's failover grace is its
default, 1000 ms), K of them, one
leading and K − 1 waiting; from the leader's `resigning` stamp to the
`elected` stamp of whichever waiter wins. The winner leads the next
round and a new waiter takes its place, so every round has K
candidates; the waiters are given 300 ms after the newest says
`campaigning` before each resign. The floor of each row is the same
chain with 2 candidates.

";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chains_run_on_servers_of_one_node() {
        let kinds: Vec<Kind> = kinds().collect();
        assert!(kinds.len() >= 2, "{kinds:?}");
        assert!(kinds.iter().all(|k| k.has_server() && !k.is_replicated()));
        assert_eq!(WAITER_COUNTS[0], 2, "the floor is the chain with two");
    }

    #[test]
    fn the_reading_states_the_timings() {
        let text = READING.split_whitespace().collect::<Vec<_>>().join(" ");
        for expected in [
            format!("(TTL {} ms,", TIMING.ttl.as_millis()),
            format!("renew {} ms,", TIMING.renew.as_millis()),
            format!("poll {} ms,", TIMING.poll.as_millis()),
            format!("given {} ms after", WAITER_SETTLE.as_millis()),
        ] {
            assert!(text.contains(&expected), "the reading lacks {expected:?}");
        }
    }
}
