//! The etcd backend's rows (`--only etcd`), on one etcd member
//! ([`Member`]), each beside bare requests on the same member
//! ([`Bare`]):
//!
//! - in process, each round interleaved with its floor (which goes first
//!   alternates): an uncontested campaign (and the campaign followed by a
//!   resign) of `election-etcd`, beside a lease grant and a put-if-absent
//!   transaction (and a delete-if-unchanged transaction);
//! - across processes, with `election-candidate --backend etcd://`: a clean
//!   handover beside two bare transactions back to back (the release and
//!   the claim it cannot avoid), in a loop and after idleness, and a crash
//!   failover (SIGKILL) beside the configured TTL.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use election_etcd::{EtcdElection, EtcdOptions};
use election_url::BackendUrl;

use super::Member;
use super::bare::Bare;
use crate::Result;
use crate::handover::{Chain, Exit, LeaseTimings, Process};
use crate::idle::after_idle;
use crate::report::{Row, met_2x};
use crate::rounds::{Campaigns, interleaved, ms, runtime};
use crate::stats::{Summary, ns};
use crate::{Setup, step, summary, with_log_tail};

/// The key prefix of every key this group writes.
const PREFIX: &str = "bench-etcd";

/// The identity of the in-process candidates.
const IDENTITY: &str = "bench-host/4711";

/// The lease TTL of the in-process rows (whole seconds): long, so that a
/// term's keep-alives (every [`IN_PROCESS_RENEW`]) never run while they
/// are measured. The floors' leases have it too.
const IN_PROCESS_TTL: Duration = Duration::from_secs(600);
/// The in-process rows' renew interval.
const IN_PROCESS_RENEW: Duration = Duration::from_secs(240);

/// The lease timings of both chains: TTL 3 s (etcd's leases are whole
/// seconds and at least its minimum TTL, 2 s at its default election
/// timeout), a keep-alive every second; the poll is only a backstop (a
/// waiter is woken by its watch), so a wake-up by poll stands out.
pub(crate) const CHAIN: LeaseTimings = LeaseTimings {
    ttl_ms: 3000,
    renew_ms: 1000,
    poll_ms: 1000,
};

/// How long a new candidate is given, after it says `campaigning`, to try
/// once, queue and set up its watch before the leader leaves.
pub(crate) const SETTLE: Duration = Duration::from_millis(100);

/// The in-process rows' options: the long TTL and renew interval, under
/// the group's prefix.
fn in_process_options() -> Result<EtcdOptions> {
    Ok(EtcdOptions::new(IN_PROCESS_TTL)?
        .renew_interval(IN_PROCESS_RENEW)?
        .prefix(PREFIX)?)
}

/// A value shaped like the one a campaign puts (identity, a 19-digit
/// nonce, the wall clock in ms), for the floors' puts.
fn claim_like_value() -> Vec<u8> {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "identity={IDENTITY}\nnonce={}\nsince_unix_ms={ms}\n",
        1_234_567_890_123_456_789_u64
    )
    .into_bytes()
}

/// The whole seconds of `d`, as etcd's lease requests take them.
fn secs(d: Duration) -> Result<i64> {
    Ok(i64::try_from(d.as_secs())?)
}

/// Samples of the uncontested campaign and of its interleaved floors.
#[derive(Debug, Default)]
pub(crate) struct CampaignSamples {
    /// `candidate.campaign()` alone.
    pub(crate) campaign: Vec<u64>,
    /// `candidate.campaign()` then `term.resign()`.
    pub(crate) campaign_resign: Vec<u64>,
    /// A lease grant, then a put-if-absent with it.
    pub(crate) grant_put: Vec<u64>,
    /// Those two, then a delete if the key's create revision is the put's.
    pub(crate) grant_put_delete: Vec<u64>,
}

/// Campaigns and resigns `warmup + n` times in an election nobody else
/// contests on the member at `endpoint`, interleaved with the floors on a
/// channel of their own: grant a lease, put a fresh key if absent with it,
/// delete it if unchanged (then revoke the lease, untimed).
pub(crate) fn campaign(endpoint: &str, n: usize, warmup: usize) -> Result<CampaignSamples> {
    let options = in_process_options()?;
    let ttl = secs(IN_PROCESS_TTL)?;
    runtime()?.block_on(async {
        let election = EtcdElection::connect(endpoint, options).await?;
        let bare = Bare::connect(endpoint).await?;
        let mut campaigns = Campaigns::new(&election, "campaign", IDENTITY)?;
        let key = format!("{PREFIX}/floor/campaign").into_bytes();
        let (floors, measured) = interleaved(
            n,
            warmup,
            async |_| {
                let value = claim_like_value();
                let t0 = Instant::now();
                let lease = bare.grant(ttl).await?;
                let revision = bare.put_if_absent(&key, &value, lease).await?;
                let t1 = Instant::now();
                bare.delete_if_created_at(&key, revision).await?;
                let t2 = Instant::now();
                bare.revoke(lease).await?;
                Ok((ns(t1 - t0), ns(t2 - t0)))
            },
            async |_| campaigns.round().await,
        )
        .await?;
        Ok(CampaignSamples {
            campaign: measured.iter().map(|m| m.0).collect(),
            campaign_resign: measured.iter().map(|m| m.1).collect(),
            grant_put: floors.iter().map(|f| f.0).collect(),
            grant_put_delete: floors.iter().map(|f| f.1).collect(),
        })
    })
}

/// Samples of the handover's floor.
#[derive(Debug)]
pub(crate) struct HandoverFloor {
    /// A delete if unchanged, then a put-if-absent of the same key with a
    /// live lease, back to back in a loop.
    pub(crate) release_claim: Vec<u64>,
    /// The same two, each pair after [`SETTLE`] with nothing sent, as a
    /// handover starts (ADR 0090).
    pub(crate) release_claim_settled: Vec<u64>,
}

/// The handover's floor on the member at `endpoint`: `warmup + n` pairs in
/// a loop, then, `settled` being `(n, warmup)`, as many after idleness.
/// One lease (granted first, revoked last) holds every put, as a waiting
/// candidate's own lease does when it claims.
pub(crate) fn handover_floor(
    endpoint: &str,
    n: usize,
    warmup: usize,
    settled: (usize, usize),
) -> Result<HandoverFloor> {
    let ttl = secs(IN_PROCESS_TTL)?;
    runtime()?.block_on(async {
        let bare = Bare::connect(endpoint).await?;
        let lease = bare.grant(ttl).await?;
        let key = format!("{PREFIX}/floor/handover").into_bytes();
        let value = claim_like_value();
        let mut revision = bare.put_if_absent(&key, &value, lease).await?;
        let mut release_claim = Vec::with_capacity(n);
        for round in 0..warmup + n {
            let t0 = Instant::now();
            bare.delete_if_created_at(&key, revision).await?;
            revision = bare.put_if_absent(&key, &value, lease).await?;
            if round >= warmup {
                release_claim.push(ns(t0.elapsed()));
            }
        }
        let release_claim_settled = after_idle(settled.0, settled.1, SETTLE, async |_| {
            bare.delete_if_created_at(&key, revision).await?;
            revision = bare.put_if_absent(&key, &value, lease).await?;
            Ok(())
        })
        .await?;
        bare.revoke(lease).await?;
        Ok(HandoverFloor {
            release_claim,
            release_claim_settled,
        })
    })
}

/// One chain of `election-candidate --backend etcd://` processes on the
/// member at `endpoint`: handovers (`exit` resign) or failovers (SIGKILL).
/// Returns the samples in nanoseconds.
fn chain(s: &Setup<'_>, endpoint: &str, exit: Exit) -> Result<Vec<u64>> {
    let c = s.counts;
    let (tag, n, warm, spread) = match exit {
        Exit::Resign => ("handover", c.handovers, c.cross_warm, Duration::ZERO),
        // The kill lands at every phase of A's keep-alives.
        Exit::Kill => (
            "failover",
            c.failovers,
            c.failover_warm,
            Duration::from_millis(CHAIN.renew_ms),
        ),
    };
    let url: BackendUrl = format!("etcd://{endpoint}/{PREFIX}")
        .parse()
        .map_err(|e| format!("bad etcd URL for {endpoint:?}: {e}"))?;
    let mut chain = Chain::new(
        Process::candidate(s.candidate_bin, &url, tag, CHAIN.flags()),
        s.log.to_path_buf(),
    );
    step(&format!("etcd: election-etcd {tag}"), || {
        chain.measure(exit, n, warm, SETTLE, spread)
    })
    .map_err(|e| with_log_tail(e, s.log))
}

/// The campaign rows' floors, in the table.
const GRANT_PUT: &str = "bare `LeaseGrant`, then a `Txn` putting the key if absent with that \
                         lease (same member, a channel of its own, interleaved)";
/// The campaign + resign row's floor.
const GRANT_PUT_DELETE: &str = "the same two, then a `Txn` deleting the key if its create \
                                revision is still the put's (interleaved)";
/// The handover rows' floor in a loop.
const RELEASE_CLAIM: &str = "two bare `Txn`s back to back: delete the key if its create revision \
                             is unchanged, then put it if absent with a live lease (same member: \
                             A's release and B's claim, without the watch push)";

/// The handover rows' floor after idleness.
fn release_claim_settled() -> String {
    format!(
        "the same two, each pair after {} ms of idleness (as a handover starts; ADR 0090)",
        SETTLE.as_millis()
    )
}

/// Measures the etcd group on one member: pushes its rows, and the figures
/// derived from them to `notes`.
pub(crate) fn rows(s: &Setup<'_>, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let c = s.counts;
    let member = step("etcd: start one member", || Member::start(s.log))?;
    let endpoint = member.endpoint();
    let (filesystem, _) = crate::host::filesystem(&std::env::temp_dir());
    notes.push(format!(
        "etcd member: {}, on 127.0.0.1, its data in {} ({filesystem}), etcd's defaults \
         (a WAL fsync per write).",
        member.describe(),
        std::env::temp_dir().display()
    ));

    let camp = step(
        "etcd: uncontested campaign + resign, with its floors",
        || campaign(&endpoint, c.in_process, c.warm),
    )?;
    let grant_put = summary(&camp.grant_put, "grant + put-if-absent")?;
    let grant_put_delete = summary(&camp.grant_put_delete, "grant + put + delete")?;
    let what = "etcd: uncontested campaign (in-process)";
    let campaign_summary = summary(&camp.campaign, what)?;
    rows.push(Row {
        what: what.into(),
        measured: campaign_summary,
        floor: GRANT_PUT.into(),
        floor_measured: Some(grant_put),
        ops_per_s: None,
    });
    let what = "etcd: uncontested campaign + resign (in-process)";
    let both = summary(&camp.campaign_resign, what)?;
    rows.push(Row {
        what: what.into(),
        measured: both,
        floor: GRANT_PUT_DELETE.into(),
        floor_measured: Some(grant_put_delete),
        ops_per_s: None,
    });
    notes.push(campaign_note(
        campaign_summary,
        grant_put,
        both,
        grant_put_delete,
    ));

    let handover = chain(s, &endpoint, Exit::Resign)?;
    let failover = chain(s, &endpoint, Exit::Kill)?;
    let floor = step("etcd: floor: bare transactions of a handover", || {
        handover_floor(&endpoint, c.in_process, c.warm, (c.handovers, c.cross_warm))
    })?;

    let what = format!(
        "etcd: clean handover: resign in A → elected in B (processes; TTL {} ms, renew {} ms, \
         poll {} ms)",
        CHAIN.ttl_ms, CHAIN.renew_ms, CHAIN.poll_ms
    );
    let measured = summary(&handover, &what)?;
    let in_loop = summary(&floor.release_claim, "delete + put")?;
    let settled = summary(&floor.release_claim_settled, "delete + put after idleness")?;
    for (floor_what, floor_measured) in [
        (RELEASE_CLAIM.to_owned(), in_loop),
        (release_claim_settled(), settled),
    ] {
        rows.push(Row {
            what: what.clone(),
            measured,
            floor: floor_what,
            floor_measured: Some(floor_measured),
            ops_per_s: None,
        });
    }
    let by_poll = handover
        .iter()
        .filter(|&&h| h > CHAIN.poll_ms * 1_000_000 / 2)
        .count();
    notes.push(handover_note(
        measured,
        in_loop,
        settled,
        (by_poll, handover.len()),
    ));

    let ttl = CHAIN.ttl_ms * 1_000_000;
    let what = format!(
        "etcd: crash failover: SIGKILL of A → elected in B (processes; TTL {} ms, renew {} ms, \
         poll {} ms)",
        CHAIN.ttl_ms, CHAIN.renew_ms, CHAIN.poll_ms
    );
    let failover_summary = summary(&failover, &what)?;
    rows.push(Row {
        what,
        measured: failover_summary,
        floor: format!("the configured TTL, {} ms", CHAIN.ttl_ms),
        floor_measured: Some(summary(&[ttl], "TTL")?),
        ops_per_s: None,
    });
    notes.push(failover_note(failover_summary));
    drop(member);
    Ok(())
}

/// The note under the campaign rows.
fn campaign_note(campaign: Summary, floor: Summary, both: Summary, both_floor: Summary) -> String {
    format!(
        "etcd uncontested campaign: a lease grant, then one transaction that puts the \
         election key with that lease if nobody holds it (comparing its create revision, and \
         the revocation and handover keys', to 0); the transaction's revision is the term's \
         epoch. Median {} (p99 {}, max {}) against {} for a bare grant and put-if-absent on \
         the same member: {:.2}×. With the resign (one more transaction, a delete if the \
         key's create revision is still the epoch; the lease is revoked in the background): \
         {} against {}, {:.2}×.",
        ms(campaign.median_ns),
        ms(campaign.p99_ns),
        ms(campaign.max_ns),
        ms(floor.median_ns),
        campaign.over(&floor),
        ms(both.median_ns),
        ms(both_floor.median_ns),
        both.over(&both_floor),
    )
}

/// The note under the handover rows; `by_poll` is how many of how many
/// handovers took over half the poll interval.
fn handover_note(
    measured: Summary,
    in_loop: Summary,
    settled: Summary,
    by_poll: (usize, usize),
) -> String {
    let (over_loop, over_settled) = (measured.over(&in_loop), measured.over(&settled));
    format!(
        "etcd clean handover: A's release is one transaction that passes the term to B, \
         first in the waiters' line (ADR 0119): it puts the election key over with B's lease \
         and deletes B's waiter key; B's watch of the election key sees the put on its own \
         lease, and B holds the term without a write of its own (the floor below is the \
         two writes of a handover without the pass: a release, then a claim). Median {} \
         (min {}, max {}) against {} for the two bare \
         transactions back to back in a loop: {over_loop:.2}× that floor (target ≤ 2×: {}); \
         against {} for the same two after {} ms of idleness, as each handover starts (ADR \
         0090): {over_settled:.2}× ({}). {} of {} handovers took over half the poll interval \
         ({} ms: a wake-up by poll, not by the watch).",
        ms(measured.median_ns),
        ms(measured.min_ns),
        ms(measured.max_ns),
        ms(in_loop.median_ns),
        met_2x(over_loop),
        ms(settled.median_ns),
        SETTLE.as_millis(),
        met_2x(over_settled),
        by_poll.0,
        by_poll.1,
        CHAIN.poll_ms,
    )
}

/// The note under the failover row.
fn failover_note(f: Summary) -> String {
    let ttl = CHAIN.ttl_ms * 1_000_000;
    format!(
        "etcd crash failover: min {}, median {}, p99 {}, max {} (n = {}) against a TTL of {} \
         (median {:.2}×). Nothing deletes a killed holder's key but its lease's expiry: etcd \
         revokes a lease a TTL after the last keep-alive it received, at its next check for \
         expired leases (every 500 ms), which deletes the key; B's watch wakes on the delete \
         and B claims. Expect TTL − (time from A's last keep-alive to the kill) + up to \
         500 ms + B's claim: between {} and {} plus the claim, depending on when in A's \
         keep-alive cycle the kill came.",
        ms(f.min_ns),
        ms(f.median_ns),
        ms(f.p99_ns),
        ms(f.max_ns),
        f.n,
        ms(ttl),
        f.median_ns as f64 / ttl as f64,
        ms(ttl - CHAIN.renew_ms * 1_000_000),
        ms(ttl + 500 * 1_000_000),
    )
}

/// How to read the etcd backend's rows: its section of the report's notes
/// after the table (see [`report::document`](crate::report::document)).
pub(crate) const READING: &str = "etcd backend (`election-etcd`), on one etcd member on 127.0.0.1
(`--only etcd`; the installed `etcd` when there is one, the build the
CLI rows' `etcdctl` runs against, else etcd-testkit's pinned build).
Every floor is a bare request on the same member in the same run, sent
on the client stack the backend uses (a tonic channel of its own,
prost's encoding, `TCP_NODELAY`):

- *uncontested campaign*: `Candidate::campaign()` of an `EtcdClaim`
  nobody else contests, in process (TTL 600 s, renew 240 s, so a
  term's keep-alives never run during it; every campaign must win a
  higher epoch than the last): a lease grant and one transaction that
  puts the key with it if absent. *+ resign* adds `Term::resign()`, one
  transaction deleting the key if its create revision is still the
  term's epoch. Floors, interleaved round by round (which goes first
  alternates): a bare `LeaseGrant` and a `Txn` putting a key if absent
  with that lease (what any claim in etcd must at least send), and the
  same then a `Txn` deleting it if unchanged; the floor's lease is then
  revoked, untimed.
- *clean handover*: separate `election-candidate --backend etcd://`
  processes (TTL 3000 ms, renew 1000 ms, poll 1000 ms, only a
  backstop); from A's `resigning` stamp to B's `elected` stamp (both
  `CLOCK_MONOTONIC`). B is given 100 ms after it says `campaigning` to
  try once, queue and watch. A's release deletes the key, the delete
  event on B's watch wakes B, and B claims with its own lease. Floor:
  two bare `Txn`s back to back (a delete if unchanged, then a put if
  absent with a live lease: the release and the claim; target ≤ 2×),
  once in a loop and once with each pair after 100 ms of idleness, as
  each handover starts (ADR 0090).
- *crash failover*: from the bench's stamp just before `kill(A,
  SIGKILL)` to B's `elected` stamp (same timings), against the TTL: the
  key goes only when etcd expires A's lease. The pause before the kill
  (100 ms plus a share of one renew interval that varies evenly from
  round to round) makes the kill land at every phase of A's
  keep-alives.
- *`etcdctl elect`* (the CLI group, `--only cli`, or `--only cli-etcd`
  for the etcd backend's race alone; beside `etcdctl lock` in that
  race): `etcdctl elect NAME PROPOSAL` as a shell job; it has
  no child to run, so its leader line is the key and proposal it prints
  once elected, stamped by the bench as it reads the line from the pipe
  (`etcdctl lock`'s and `elect run`'s lines are their child's own
  stamp). Its session TTL is etcd's default, 60 s (`etcdctl elect` has
  no `--ttl`), which a clean handover never waits for: SIGINT makes it
  resign, deleting its key. Each start and each chain campaigns under a
  name of its own: a chain's processes are killed when it ends, and a
  killed one's key stands for that TTL.

";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_valid() {
        let o = in_process_options().unwrap();
        assert_eq!(o.key_prefix(), PREFIX);
        assert!(o.renew_every() > Duration::from_secs(60));
        let chain = EtcdOptions::new(Duration::from_millis(CHAIN.ttl_ms))
            .unwrap()
            .renew_interval(Duration::from_millis(CHAIN.renew_ms));
        assert!(chain.is_ok(), "{chain:?}");
    }

    #[test]
    fn the_report_states_the_timings() {
        let text = READING.split_whitespace().collect::<Vec<_>>().join(" ");
        for expected in [
            format!(
                "(TTL {} ms, renew {} ms, poll {} ms,",
                CHAIN.ttl_ms, CHAIN.renew_ms, CHAIN.poll_ms
            ),
            format!(
                "(TTL {} s, renew {} s,",
                IN_PROCESS_TTL.as_secs(),
                IN_PROCESS_RENEW.as_secs()
            ),
            format!("given {} ms after", SETTLE.as_millis()),
            format!("after {} ms of idleness", SETTLE.as_millis()),
            format!("({} ms plus a share of one renew", SETTLE.as_millis()),
        ] {
            assert!(text.contains(&expected), "the report lacks {expected:?}");
        }
    }

    #[test]
    fn the_notes_name_the_floors_and_the_targets() {
        let s = |median_ns: u64| Summary::of(&[median_ns]).unwrap();
        let note = handover_note(s(4_000_000), s(1_000_000), s(3_000_000), (1, 20));
        assert!(
            note.contains("4.00× that floor (target ≤ 2×: missed)"),
            "{note}"
        );
        assert!(note.contains("1.33× (met)"), "{note}");
        assert!(note.contains("1 of 20 handovers"), "{note}");
        let note = failover_note(s(3_300_000_000));
        assert!(
            note.contains("median 3300.0 ms") && note.contains("(median 1.10×)"),
            "{note}"
        );
        assert!(note.contains("between 2000.0 ms and 3500.0 ms"), "{note}");
        let note = campaign_note(s(2_000_000), s(1_000_000), s(3_000_000), s(2_000_000));
        assert!(note.contains("2.00×") && note.contains("1.50×"), "{note}");
    }

    /// The in-process rows and the handover floor on a real member (the
    /// installed etcd, else etcd-testkit's): a handful of each.
    #[test]
    fn in_process_rows_run_on_one_member() {
        let log = tempfile::NamedTempFile::new().unwrap();
        let member = Member::start(log.path()).expect("an etcd member");
        let endpoint = member.endpoint();
        let c = campaign(&endpoint, 3, 1).unwrap();
        assert_eq!((c.campaign.len(), c.campaign_resign.len()), (3, 3));
        assert_eq!((c.grant_put.len(), c.grant_put_delete.len()), (3, 3));
        assert!(
            c.grant_put
                .iter()
                .zip(&c.grant_put_delete)
                .all(|(a, b)| a < b)
        );
        let f = handover_floor(&endpoint, 3, 1, (2, 1)).unwrap();
        assert_eq!(
            (f.release_claim.len(), f.release_claim_settled.len()),
            (3, 2)
        );
    }
}
