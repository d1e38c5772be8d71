//! The NATS backend's rows (`--only nats`), on real `nats-server`
//! processes that `nats-testkit` starts: first one node (buckets with one
//! replica), then a three-node cluster (buckets with three replicas, the
//! clients given all three URLs). For each:
//!
//! - in process, each round interleaved with its floor requests on the
//!   same bucket and connection (which goes first alternates): an
//!   uncontested campaign (and the campaign followed by a resign), and one
//!   lease renewal, with the bytes it puts on the wire;
//! - across processes, with `election-candidate --backend nats://`: a clean handover
//!   and a crash failover; then, on the chains' bucket, the bare KV
//!   requests of a handover as their floor.
//!
//! The floors are bare `async-nats` KV requests: `create` of a fresh key,
//! `create` of a key whose last entry is a delete marker (what a
//! re-campaign and a handover's winner do), `delete_expect_revision` (a
//! release) and `update` expecting the last revision (a renewal).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv;
use election_nats::{NatsElection, NatsOptions};
use election_url::BackendUrl;
use nats_testkit::{Cluster, Server};

use super::handover::{Chain, Exit, Process};
use super::idle::after_idle;
use super::report::{Row, met_2x};
use super::rounds::{Campaigns, interleaved, ms, runtime};
use super::stats::{Summary, ns};
use super::{Setup, step, summary, with_log_tail};
use crate::Result;

/// The bucket of the in-process rows.
const IN_PROCESS_BUCKET: &str = "bench";
/// The TTL of the in-process rows' bucket: long, so that a term's own
/// renewal loop (every third of it) never runs while they are measured.
const IN_PROCESS_TTL: Duration = Duration::from_secs(600);
/// The identity of the in-process candidates (it is part of the value,
/// so of the bytes a renewal sends).
pub(crate) const IDENTITY: &str = "bench-host/4711";

/// The lease TTL of both chains (they share the candidates' default
/// bucket, whose max age is the TTL).
pub(crate) const CHAIN_TTL_MS: u64 = 3000;
/// The renew interval and the failover grace that the chains' TTL
/// implies (both default to a third of the TTL).
pub(crate) const CHAIN_RENEW_MS: u64 = CHAIN_TTL_MS / 3;
/// The failover grace of the chains (the default, a third of the TTL).
pub(crate) const CHAIN_GRACE_MS: u64 = CHAIN_TTL_MS / 3;
/// The waiting candidates' poll interval: only a backstop (the KV watch
/// wakes them), long so that a wake-up by poll stands out.
pub(crate) const CHAIN_POLL_MS: u64 = 1000;
/// How long a new candidate is given, after it says `campaigning`, to try
/// once and set up its watch before the leader leaves.
pub(crate) const SETTLE: Duration = Duration::from_millis(50);

/// One set of servers.
#[derive(Debug)]
struct Topology {
    /// The row prefix.
    label: &'static str,
    /// Comma-separated client URLs.
    urls: String,
    /// The buckets' replicas.
    replicas: usize,
    /// The nodes' monitoring ports (for `/routez`; none on one node).
    monitor_ports: Vec<u16>,
}

/// The in-process rows' options: the long TTL, but the failover grace of
/// the default TTL (a third of it would be 200 s; the grace applies if a
/// campaign takes its own previous term for another holder's).
fn in_process_options(replicas: usize) -> Result<NatsOptions> {
    Ok(NatsOptions::new(IN_PROCESS_TTL)?
        .replicas(replicas)?
        .bucket(IN_PROCESS_BUCKET)?
        .failover_grace(NatsOptions::default().grace())?)
}

/// How many times a [`create_over_marker`] may find the key still there.
const STALE_RETRIES: usize = 1000;

/// `kv.create` of `key` right after its delete marker was written: tried
/// again at once while async-nats reports that the key exists, which on
/// a replicated bucket it can (its read of the entry, a direct get, may be
/// answered by a replica that has not applied the delete yet). Returns the
/// revision and how many tries found the key still there.
async fn create_over_marker(kv: &kv::Store, key: &str) -> Result<(u64, usize)> {
    for stale in 0..=STALE_RETRIES {
        match kv.create(key, lease_like_value().into()).await {
            Ok(rev) => return Ok((rev, stale)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(format!("create {key}: still exists after {STALE_RETRIES} tries since its delete").into())
}

/// The chains' options, as `election-candidate --backend nats://` builds them from
/// `--ttl-ms` and `--replicas` (default bucket, renew interval and grace).
fn chain_options(replicas: usize) -> Result<NatsOptions> {
    Ok(NatsOptions::new(Duration::from_millis(CHAIN_TTL_MS))?.replicas(replicas)?)
}

/// The bucket of `election`, opened on the election's own client: the
/// same bucket and connection its claims use.
async fn bucket(election: &NatsElection) -> Result<kv::Store> {
    let js = async_nats::jetstream::new(election.client().clone());
    let name = election.options().bucket_name();
    js.get_key_value(name)
        .await
        .map_err(|e| format!("open bucket {name}: {e}").into())
}

/// A value shaped like the one a campaign creates (header, identity, a
/// 19-digit nonce, the wall clock in ms), for the floors' creates.
fn lease_like_value() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "election-nats/1\nidentity={IDENTITY}\nnonce={}\nsince_unix_ms={ms}\n",
        1_234_567_890_123_456_789_u64
    )
}

/// Samples of the uncontested campaign and of its interleaved floors.
#[derive(Debug, Default)]
pub(crate) struct CampaignSamples {
    /// `candidate.campaign()` alone.
    pub(crate) campaign: Vec<u64>,
    /// `candidate.campaign()` then `term.resign()`.
    pub(crate) campaign_resign: Vec<u64>,
    /// `kv.create` of a key never written before.
    pub(crate) fresh_create: Vec<u64>,
    /// That create, then `kv.delete_expect_revision` of its revision.
    pub(crate) fresh_create_delete: Vec<u64>,
    /// `kv.create` of a key whose last entry is a delete marker.
    pub(crate) marker_create: Vec<u64>,
    /// How many of those creates found the key still there first.
    pub(crate) stale: usize,
    /// The server's version, as it announced it.
    pub(crate) server_version: String,
}

/// Campaigns and resigns `warmup + n` times in an election nobody else
/// contests (so every campaign after the first creates the key over the
/// previous resign's delete marker), interleaved with the floors: create a
/// fresh key and delete it; create a key over a delete marker and delete
/// it again.
pub(crate) fn campaign(
    urls: &str,
    replicas: usize,
    n: usize,
    warmup: usize,
) -> Result<CampaignSamples> {
    let options = in_process_options(replicas)?;
    runtime()?.block_on(async {
        let election = NatsElection::connect(urls, options).await?;
        let kv = bucket(&election).await?;
        let mut campaigns = Campaigns::new(&election, "campaign", IDENTITY)?;
        let (floors, measured) = interleaved(
            n,
            warmup,
            async |round| {
                let fresh = format!("floor-fresh-{round}");
                let t0 = Instant::now();
                let rev = kv.create(&fresh, lease_like_value().into()).await?;
                let t1 = Instant::now();
                kv.delete_expect_revision(&fresh, Some(rev)).await?;
                let t2 = Instant::now();
                let (rev, stale) = create_over_marker(&kv, "floor-marker").await?;
                let t3 = Instant::now();
                kv.delete_expect_revision("floor-marker", Some(rev)).await?;
                Ok((ns(t1 - t0), ns(t2 - t0), ns(t3 - t2), stale))
            },
            async |_| campaigns.round().await,
        )
        .await?;
        let server_version = election.client().server_info().version;
        Ok(CampaignSamples {
            campaign: measured.iter().map(|m| m.0).collect(),
            campaign_resign: measured.iter().map(|m| m.1).collect(),
            fresh_create: floors.iter().map(|f| f.0).collect(),
            fresh_create_delete: floors.iter().map(|f| f.1).collect(),
            marker_create: floors.iter().map(|f| f.2).collect(),
            stale: floors.iter().map(|f| f.3).sum(),
            server_version,
        })
    })
}

/// What one renewal puts on the wire.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RenewalBytes {
    /// The renewal's value, in bytes.
    pub(crate) value: usize,
    /// The subject the update is published on.
    pub(crate) subject: String,
    /// Bytes the client wrote to its socket per renewal.
    pub(crate) out: f64,
    /// Bytes the client read from its socket per renewal.
    pub(crate) inn: f64,
    /// Bytes the servers sent each other (routes) per renewal, idle
    /// traffic subtracted; `None` on one node.
    pub(crate) routes: Option<f64>,
    /// The renewals counted.
    pub(crate) batch: usize,
}

/// Samples of the renewal and of its interleaved floor.
#[derive(Debug)]
pub(crate) struct RenewalSamples {
    /// `kv.update` expecting the last revision, on a key of its own.
    pub(crate) floor: Vec<u64>,
    /// `Term::confirm` of a live term.
    pub(crate) measured: Vec<u64>,
    /// What one renewal puts on the wire.
    pub(crate) bytes: RenewalBytes,
}

/// Renews a live term (won by a real campaign) `warmup + n` times with
/// `Term::confirm` (the renewal loop's compare-and-set update,
/// expecting the revision last written), interleaved with a raw update
/// expecting the last revision of a key holding a value of the same size;
/// then counts the bytes of a batch of `batch` renewals on the client's
/// socket and, given the nodes' monitoring ports, on the servers' routes.
pub(crate) fn renewal(
    urls: &str,
    replicas: usize,
    monitor_ports: &[u16],
    n: usize,
    warmup: usize,
    batch: usize,
) -> Result<RenewalSamples> {
    let options = in_process_options(replicas)?;
    runtime()?.block_on(async {
        let election = NatsElection::connect(urls, options).await?;
        let kv = bucket(&election).await?;
        let name = "renewal";
        let candidate = election.candidate(name, IDENTITY)?;
        let term = candidate.campaign().await?;
        term.confirm().await?;
        let entry = kv
            .entry(name)
            .await?
            .ok_or("the won key is missing from the bucket")?;
        if entry.operation != kv::Operation::Put
            || !std::str::from_utf8(&entry.value)?.contains(&format!("identity={IDENTITY}\n"))
        {
            return Err(format!("the won key does not hold this term: {entry:?}").into());
        }
        let value = entry.value.clone();
        let floor_key = "floor-update";
        let mut floor_rev = kv.put(floor_key, value.clone()).await?;
        let (floor, measured) = interleaved(
            n,
            warmup,
            async |_| {
                let t0 = Instant::now();
                floor_rev = kv.update(floor_key, value.clone(), floor_rev).await?;
                Ok(ns(t0.elapsed()))
            },
            async |_| {
                let t0 = Instant::now();
                term.confirm().await?;
                Ok(ns(t0.elapsed()))
            },
        )
        .await?;

        // The bytes: a batch of renewals alone on the connection. On a
        // cluster, the routes' traffic over an idle stretch as long as
        // the batch is subtracted from theirs.
        let stats = election.client().statistics();
        let routes_before_idle = routes_out_bytes(monitor_ports)?;
        let idle_start = Instant::now();
        if !monitor_ports.is_empty() {
            // About as long as the batch will take (the floor's median
            // each), and at least a second, to even out the routes'
            // periodic traffic.
            let per = Summary::of(&floor).map_or(0, |s| s.median_ns);
            let idle = Duration::from_nanos(per * batch as u64).max(Duration::from_secs(1));
            tokio::time::sleep(idle).await;
        }
        let idle = idle_start.elapsed();
        let routes_before = routes_out_bytes(monitor_ports)?;
        let (out0, in0) = (
            stats.out_bytes.load(Ordering::Relaxed),
            stats.in_bytes.load(Ordering::Relaxed),
        );
        let t0 = Instant::now();
        for _ in 0..batch {
            term.confirm().await?;
        }
        let busy = t0.elapsed();
        let (out1, in1) = (
            stats.out_bytes.load(Ordering::Relaxed),
            stats.in_bytes.load(Ordering::Relaxed),
        );
        let routes_after = routes_out_bytes(monitor_ports)?;
        let per = |bytes: u64| bytes as f64 / batch.max(1) as f64;
        let routes = (!monitor_ports.is_empty()).then(|| {
            let idle_rate =
                (routes_before - routes_before_idle) as f64 / idle.as_secs_f64().max(1e-9);
            let during = (routes_after - routes_before) as f64 - idle_rate * busy.as_secs_f64();
            during.max(0.0) / batch.max(1) as f64
        });
        let after = kv.entry(name).await?.ok_or("the term's key vanished")?;
        if term.is_lost() {
            return Err("the term was lost during the renewals".into());
        }
        term.resign().await?;
        Ok(RenewalSamples {
            floor,
            measured,
            bytes: RenewalBytes {
                value: after.value.len(),
                subject: format!("$KV.{IN_PROCESS_BUCKET}.{name}"),
                out: per(out1 - out0),
                inn: per(in1 - in0),
                routes,
                batch,
            },
        })
    })
}

/// The sum of `out_bytes` over every route of every node (`/routez`);
/// 0 without nodes.
fn routes_out_bytes(monitor_ports: &[u16]) -> Result<u64> {
    let mut sum = 0;
    for &port in monitor_ports {
        let body = http_get(port, "/routez")?;
        sum += sum_json_field(&body, "out_bytes");
    }
    Ok(sum)
}

/// `GET path` on 127.0.0.1:`port` (HTTP/1.0: the server closes after the
/// answer); the whole response, headers included.
fn http_get(port: u16, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    if !text.starts_with("HTTP/1.") || !text.contains(" 200 ") {
        let first = text.lines().next().unwrap_or("");
        return Err(format!("GET {path} on port {port}: {first:?}").into());
    }
    Ok(text)
}

/// The sum of every number that follows `"field":` in `json`.
fn sum_json_field(json: &str, field: &str) -> u64 {
    let pattern = format!("\"{field}\":");
    json.match_indices(&pattern)
        .filter_map(|(at, _)| {
            let rest = json[at + pattern.len()..].trim_start();
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse::<u64>().ok()
        })
        .sum()
}

/// Samples of the handover's floors.
#[derive(Debug)]
pub(crate) struct HandoverFloor {
    /// `kv.create` of a key never written before.
    pub(crate) create: Vec<u64>,
    /// `kv.delete_expect_revision` of a live key, then `kv.create` of it
    /// over that delete marker, back to back.
    pub(crate) release_create: Vec<u64>,
    /// The same delete and create, each pair after [`SETTLE`] with nothing
    /// sent, as a handover starts (ADR 0090).
    pub(crate) release_create_settled: Vec<u64>,
    /// How many of all those creates found the key still there first.
    pub(crate) stale: usize,
}

/// The handover's floors, `warmup + n` rounds of each interleaved, on the
/// chains' bucket (opened with the chains' options); then, `settled`
/// being `(n, warmup)`, `warmup + n` rounds of the delete and create after
/// idleness.
pub(crate) fn handover_floor(
    urls: &str,
    replicas: usize,
    n: usize,
    warmup: usize,
    settled: (usize, usize),
) -> Result<HandoverFloor> {
    let options = chain_options(replicas)?;
    runtime()?.block_on(async {
        let election = NatsElection::connect(urls, options).await?;
        let kv = bucket(&election).await?;
        let key = "floor-handover";
        let mut rev = kv.put(key, lease_like_value().into()).await?;
        let (create, release_create) = interleaved(
            n,
            warmup,
            async |round| {
                let fresh = format!("floor-fresh-{round}");
                let t0 = Instant::now();
                kv.create(&fresh, lease_like_value().into()).await?;
                Ok(ns(t0.elapsed()))
            },
            async |_| {
                let t0 = Instant::now();
                kv.delete_expect_revision(key, Some(rev)).await?;
                let (new_rev, stale) = create_over_marker(&kv, key).await?;
                rev = new_rev;
                Ok((ns(t0.elapsed()), stale))
            },
        )
        .await?;
        let mut stale: usize = release_create.iter().map(|r| r.1).sum();
        let release_create_settled = after_idle(settled.0, settled.1, SETTLE, async |round| {
            kv.delete_expect_revision(key, Some(rev)).await?;
            let (new_rev, found) = create_over_marker(&kv, key).await?;
            rev = new_rev;
            // Counted as the samples are: not in the warm-up.
            if round >= settled.1 {
                stale += found;
            }
            Ok(())
        })
        .await?;
        kv.delete_expect_revision(key, Some(rev)).await?;
        Ok(HandoverFloor {
            create,
            stale,
            release_create: release_create.iter().map(|r| r.0).collect(),
            release_create_settled,
        })
    })
}

/// Opens (creating if need be) the chains' bucket before the first
/// candidate starts.
fn open_chain_bucket(urls: &str, replicas: usize) -> Result<()> {
    let options = chain_options(replicas)?;
    runtime()?.block_on(async {
        NatsElection::connect(urls, options).await?;
        Ok(())
    })
}

/// The floors' names in the table.
const FRESH_CREATE: &str =
    "raw KV `create` of a fresh key (same bucket and connection, interleaved)";
const MARKER_CREATE: &str = "raw KV `create` of a key whose last entry is a delete marker \
     (async-nats: update expecting revision 0 fails, read the entry, update expecting its \
     revision; interleaved)";
const FRESH_CREATE_DELETE: &str =
    "raw KV `create` of a fresh key + `delete` expecting its revision (interleaved)";

/// Measures the NATS group on one node, then on a three-node cluster:
/// pushes its rows, and the figures derived from them to `notes`.
pub(crate) fn rows(s: &Setup<'_>, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let first_note = notes.len();
    let version = {
        let server = step("start one nats-server", || Ok(Server::start()?))?;
        let t = Topology {
            label: "NATS 1 node",
            urls: server.url(),
            replicas: 1,
            monitor_ports: Vec::new(),
        };
        topology(s, &t, rows, notes)?
    };
    {
        let cluster = step("start a 3-node nats-server cluster", || {
            Ok(Cluster::start(3)?)
        })?;
        let t = Topology {
            label: "NATS R3",
            urls: cluster.urls().join(","),
            replicas: 3,
            monitor_ports: cluster.nodes().iter().map(Server::monitor_port).collect(),
        };
        topology(s, &t, rows, notes)?;
    }
    let (filesystem, _) = super::host::filesystem(&std::env::temp_dir());
    notes.insert(
        first_note,
        format!(
            "NATS servers: nats-server {version} on 127.0.0.1 (started by nats-testkit), \
             JetStream file storage in {} ({filesystem}), the server's default sync \
             (no fsync per write).",
            std::env::temp_dir().display()
        ),
    );
    Ok(())
}

/// The rows of one topology. Returns the server's version.
fn topology(
    s: &Setup<'_>,
    t: &Topology,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<String> {
    let c = s.counts;
    let label = t.label;

    let camp = step(
        &format!("{label}: uncontested campaign + resign, with its floors"),
        || campaign(&t.urls, t.replicas, c.in_process, c.warm),
    )?;
    let fresh = summary(&camp.fresh_create, "fresh create")?;
    let marker = summary(&camp.marker_create, "create over a delete marker")?;
    let fresh_delete = summary(&camp.fresh_create_delete, "create + delete")?;
    let campaign_what = format!("{label}: uncontested campaign (in-process)");
    let campaign_summary = summary(&camp.campaign, &campaign_what)?;
    for (floor, floor_measured) in [(FRESH_CREATE, fresh), (MARKER_CREATE, marker)] {
        rows.push(Row {
            what: campaign_what.clone(),
            measured: campaign_summary,
            floor: floor.into(),
            floor_measured: Some(floor_measured),
            ops_per_s: None,
        });
    }
    let what = format!("{label}: uncontested campaign + resign (in-process)");
    rows.push(Row {
        measured: summary(&camp.campaign_resign, &what)?,
        what,
        floor: FRESH_CREATE_DELETE.into(),
        floor_measured: Some(fresh_delete),
        ops_per_s: None,
    });

    let poll = election_core::DEFAULT_POLL_INTERVAL;
    let grace = NatsOptions::default().grace();
    let at_least = |d: Duration| camp.campaign.iter().filter(|&&c| c >= ns(d)).count();
    let (slow, graced) = (at_least(poll), at_least(poll + grace));
    notes.push(format!(
        "{label} uncontested campaign: every campaign after the first claims the key over \
         the delete marker of the previous resign; the claim remembers that marker's \
         revision (from its own release's acknowledgement), so the campaign is one update \
         expecting it, where async-nats' create over a marker takes three requests \
         (the floor's create over a marker: {}, median; a fresh key's \
         create: {}); the \
         campaign took {} (median; p99 {}, max {}). {slow} of {} campaigns took at least the \
         poll interval ({} ms: a try that found the key still there waits for the next one), \
         {graced} of them at least the poll interval + the failover grace ({} s: a read \
         showing the previous term's value would make the campaign take its own resigned \
         term for a holder that did not resign; the library reads through the stream \
         leader to avoid it). The floor's create over a marker found the key still there, and tried \
         again, {} times in {} rounds.",
        ms(marker.median_ns),
        ms(fresh.median_ns),
        ms(campaign_summary.median_ns),
        ms(campaign_summary.p99_ns),
        ms(campaign_summary.max_ns),
        camp.campaign.len(),
        poll.as_millis(),
        grace.as_secs_f64(),
        camp.stale,
        camp.marker_create.len(),
    ));

    let renew = step(&format!("{label}: renewal, with its floor"), || {
        renewal(
            &t.urls,
            t.replicas,
            &t.monitor_ports,
            c.in_process,
            c.warm,
            c.byte_batch,
        )
    })?;
    let what = format!(
        "{label}: lease renewal, one compare-and-set `update` (in-process; \
         `Term::confirm` on a live term)"
    );
    let renewal_summary = summary(&renew.measured, &what)?;
    rows.push(Row {
        what,
        measured: renewal_summary,
        floor: "raw KV `update` expecting the last revision, same value size (interleaved)".into(),
        floor_measured: Some(summary(&renew.floor, "raw update")?),
        ops_per_s: None,
    });
    notes.push(renewal_note(label, renewal_summary, &renew.bytes));

    step(&format!("{label}: open the chains' bucket"), || {
        open_chain_bucket(&t.urls, t.replicas)
    })?;
    let handover = chain(s, t, Exit::Resign)?;
    let failover = chain(s, t, Exit::Kill)?;
    let floor = step(
        &format!("{label}: floor: raw KV requests of a handover"),
        || {
            handover_floor(
                &t.urls,
                t.replicas,
                c.in_process,
                c.warm,
                (c.handovers, c.cross_warm),
            )
        },
    )?;

    let what = format!(
        "{label}: clean handover: resign in A → elected in B (processes; TTL {CHAIN_TTL_MS} ms, \
         poll {CHAIN_POLL_MS} ms)"
    );
    let handover_summary = summary(&handover, &what)?;
    let create = summary(&floor.create, "raw create")?;
    let release_create = summary(&floor.release_create, "delete + create")?;
    let settled = summary(
        &floor.release_create_settled,
        "delete + create after idleness",
    )?;
    for (floor_what, floor_measured) in [
        (
            "raw KV `create` of a fresh key (same bucket, one round trip)".to_owned(),
            create,
        ),
        (
            "raw KV `delete` expecting the revision, then `create` over that delete marker, \
             back to back (same bucket: A's release and B's create, without the watch push)"
                .to_owned(),
            release_create,
        ),
        (
            format!(
                "the same `delete` and `create`, each pair after {} ms of idleness (as a \
                 handover starts; ADR 0090)",
                SETTLE.as_millis()
            ),
            settled,
        ),
    ] {
        rows.push(Row {
            what: what.clone(),
            measured: handover_summary,
            floor: floor_what,
            floor_measured: Some(floor_measured),
            ops_per_s: None,
        });
    }
    let by_poll = handover
        .iter()
        .filter(|&&h| h > CHAIN_POLL_MS * 1_000_000 / 2)
        .count();
    notes.push(format!(
        "{label} clean handover: A's release is one KV request (a delete expecting its \
         revision); B's watch delivers the delete marker with its revision, and B claims \
         the key with one update expecting that revision. The floor's requests (delete, \
         then async-nats' create over the marker, three requests) back to \
         back take {} (median; one fresh create {}); the handover took {} (min {}, max {}), \
         so the watch push and the two processes' wake-ups add about {}: {:.2}× that floor \
         (target ≤ 2×: {}). The same requests, each pair after {} ms of idleness as each \
         handover starts (ADR 0090), take {}: the handover is {:.2}× them ({}). \
         {by_poll} of {} handovers took over half the poll interval (a wake-up by poll, not \
         by the watch). In the floors, the create over the fresh marker found the key still \
         there, and tried again, {} times in {} rounds.",
        ms(release_create.median_ns),
        ms(create.median_ns),
        ms(handover_summary.median_ns),
        ms(handover_summary.min_ns),
        ms(handover_summary.max_ns),
        ms(handover_summary
            .median_ns
            .saturating_sub(release_create.median_ns)),
        handover_summary.over(&release_create),
        met_2x(handover_summary.over(&release_create)),
        SETTLE.as_millis(),
        ms(settled.median_ns),
        handover_summary.over(&settled),
        met_2x(handover_summary.over(&settled)),
        handover.len(),
        floor.stale,
        floor.release_create.len() + floor.release_create_settled.len(),
    ));

    let ttl_grace = (CHAIN_TTL_MS + CHAIN_GRACE_MS) * 1_000_000;
    let what = format!(
        "{label}: crash failover: SIGKILL of A → elected in B (processes; TTL {CHAIN_TTL_MS} ms, \
         renew {CHAIN_RENEW_MS} ms, grace {CHAIN_GRACE_MS} ms, poll {CHAIN_POLL_MS} ms)"
    );
    let failover_summary = summary(&failover, &what)?;
    rows.push(Row {
        what,
        measured: failover_summary,
        floor: format!("the configured TTL + failover grace, {CHAIN_TTL_MS} + {CHAIN_GRACE_MS} ms"),
        floor_measured: Some(summary(&[ttl_grace], "TTL + grace")?),
        ops_per_s: None,
    });
    let ttl = CHAIN_TTL_MS * 1_000_000;
    notes.push(format!(
        "{label} crash failover: min {}, median {}, p99 {}, max {} (n = {}) against TTL + \
         grace = {} (median {:.2}×, p99 {:.2}×). The key expires a TTL after A's last \
         renewal as the server stored it, the server then writes its TTL marker, which wakes \
         B, and B, having found a holder that did not resign, waits the failover grace before \
         its term begins: expect TTL − (time from A's last renewal to the kill) + the \
         marker's delay + grace, so between {} and {} plus the marker's delay and a create, \
         depending on when in A's renewal cycle the kill came.",
        ms(failover_summary.min_ns),
        ms(failover_summary.median_ns),
        ms(failover_summary.p99_ns),
        ms(failover_summary.max_ns),
        failover_summary.n,
        ms(ttl_grace),
        failover_summary.median_ns as f64 / ttl_grace as f64,
        failover_summary.p99_ns as f64 / ttl_grace as f64,
        ms(ttl - CHAIN_RENEW_MS * 1_000_000 + CHAIN_GRACE_MS * 1_000_000),
        ms(ttl_grace),
    ));
    Ok(camp.server_version)
}

/// The renewal traffic of one term at the default renew interval.
fn renewal_note(label: &str, renewal: Summary, b: &RenewalBytes) -> String {
    let every = NatsOptions::default().renew_every();
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a positive rate of a few thousand at most; `as` saturates"
    )]
    let per_minute = (60.0 / every.as_secs_f64()).round() as u64;
    let minute = |bytes: f64| format!("{:.1} kB", per_minute as f64 * bytes / 1e3);
    let routes = match b.routes {
        Some(r) => format!(
            "; between the servers, the routes carried {r:.0} B more per renewal (the \
             forward to the stream leader if the client is on another node, replication to \
             the two followers and their acks: `/routez` `out_bytes` summed over the nodes, \
             the routes' idle rate, measured just before, subtracted), {} a \
             minute",
            minute(r)
        ),
        None => String::new(),
    };
    format!(
        "{label} renewal traffic per term: at the default TTL ({} s) a term renews every {} s, \
         {per_minute} times a minute, each one compare-and-set `update` on the subject `{}` \
         ({} B) with a {}-byte value (identity `{IDENTITY}`, nonce, epoch, start time) and \
         the expected revision in a header; one renewal took {:.0} µs (median; p99 {:.0} µs). \
         On the wire the client wrote {:.0} B and read {:.0} B per renewal (its socket's \
         byte counters over a batch of {} renewals: the publish with subject, reply inbox, \
         header and value, and the JSON ack), so a term costs {} out and {} in a minute{routes}.",
        election_nats::DEFAULT_TTL.as_secs(),
        every.as_secs_f64(),
        b.subject,
        b.subject.len(),
        b.value,
        renewal.median_us(),
        renewal.p99_us(),
        b.out,
        b.inn,
        b.batch,
        minute(b.out),
        minute(b.inn),
    )
}

/// One chain of candidate processes on `t`'s servers: handovers (`exit`
/// resign) or failovers (SIGKILL). Returns the samples in nanoseconds.
fn chain(s: &Setup<'_>, t: &Topology, exit: Exit) -> Result<Vec<u64>> {
    let c = s.counts;
    let (tag, n, warm, spread) = match exit {
        Exit::Resign => ("handover", c.handovers, c.cross_warm, Duration::ZERO),
        // The kill lands at every phase of A's renewals.
        Exit::Kill => (
            "failover",
            c.failovers,
            c.failover_warm,
            Duration::from_millis(CHAIN_RENEW_MS),
        ),
    };
    let url: BackendUrl = format!("{}?replicas={}", t.urls, t.replicas)
        .parse()
        .map_err(|e| format!("bad NATS URLs {:?}: {e}", t.urls))?;
    let flags = [("--ttl-ms", CHAIN_TTL_MS), ("--poll-ms", CHAIN_POLL_MS)]
        .into_iter()
        .flat_map(|(flag, ms)| [flag.to_owned(), ms.to_string()])
        .collect();
    let mut chain = Chain::new(
        Process::candidate(s.candidate_bin, &url, tag, flags),
        s.log.to_path_buf(),
    );
    step(&format!("{}: election-nats {tag}", t.label), || {
        chain.measure(exit, n, warm, SETTLE, spread)
    })
    .map_err(|e| with_log_tail(e, s.log))
}

/// How to read the NATS backend's rows: its section of the report's notes after
/// the table (see [`report::document`](super::report::document)).
pub(crate) const READING: &str =
    "NATS backend (`election-nats`), on real `nats-server` processes that
`nats-testkit` starts on 127.0.0.1: one node (buckets with one replica),
then a three-node cluster (*R3*: buckets with three replicas, clients
given all three URLs, connected to one of them). Every floor is a bare
`async-nats` KV request on the same server(s) in the same run:

- *uncontested campaign*: `Candidate::campaign()` of a `NatsClaim` nobody
  else contests, in process (bucket TTL 600 s, so a term's renewal loop
  never runs during it; failover grace 5 s and poll 250 ms, the
  defaults); *+ resign* adds `Term::resign()`, one
  `delete` expecting the term's revision. Floors, on the same bucket and
  connection, interleaved round by round: a `create` of a fresh key (one
  round trip: an update expecting revision 0), and a `create` of a key
  whose last entry is a delete marker. The second is what every campaign
  after the first one does (the previous resign left a marker), and
  async-nats makes it three requests: the update expecting revision 0
  fails, it reads the entry, then updates expecting the marker's
  revision. That read is a direct get, which on R3 any replica may
  answer, also one that has not applied the delete yet: the create then
  reports that the key exists. The floors try again at once and count
  it; a campaign waits for its next poll (and, if the next read shows
  the old value too, the failover grace), and the derived figures count
  the campaigns that did.
- *clean handover*: separate `election-candidate --backend nats://` processes (TTL
  3000 ms, poll 1000 ms, only a backstop); from A's `resigning` stamp to
  B's `elected` stamp. B waits on a KV watch of the key, which delivers
  A's delete marker, then creates the key over it (three requests, as
  above); no failover grace after a clean release. Floors, measured on
  the chains' bucket after the chains: one `create` of a fresh key, and
  the handover's own requests back to back without the watch push: a
  `delete` expecting the revision, then a `create` over that marker,
  once in a loop and once with each pair after 50 ms of idleness, as each
  handover starts (ADR 0090: on this machine a request after idleness
  costs several times one in a loop). B
  is given 50 ms after it says `campaigning` to try once and set up its
  watch; the derived figures below count handovers slow enough to have
  been woken by a poll instead.
- *crash failover*: from the bench's stamp just before `kill(A, SIGKILL)`
  to B's `elected` stamp (TTL 3000 ms, renew 1000 ms, grace 1000 ms,
  poll 1000 ms), against TTL + grace as the floor. Nothing deletes the
  key: it expires a TTL after A's last renewal as the server stored it
  (the bucket's max age), the server writes a TTL marker, B's watch
  wakes on it, B creates the key and, because the previous holder did
  not resign, waits the failover grace before its term begins. So expect
  TTL − (time from A's last renewal to the kill) + the marker's delay +
  grace. The pause before the kill (50 ms, plus a share of one renew
  interval that varies evenly from round to round) makes the kill land
  at every phase of A's renewals.
- *lease renewal*: `Term::confirm` on a live term won by a real
  campaign: the same compare-and-set `update` the renewal loop sends
  (expecting the revision last written; it renews the lease), against a
  raw `update` expecting the last revision of another key holding a value
  of the same size, interleaved. The bytes per renewal are counted on the
  client's socket (async-nats' byte counters, a separate batch of
  renewals), on R3 also between the servers; the traffic per term-minute
  at the default renew interval is worked out below the table.

";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_valid() {
        for replicas in [1, 3] {
            assert!(in_process_options(replicas).is_ok());
            let o = chain_options(replicas).unwrap();
            assert_eq!(o.renew_every(), Duration::from_millis(CHAIN_RENEW_MS));
            assert_eq!(o.grace(), Duration::from_millis(CHAIN_GRACE_MS));
        }
        assert!(in_process_options(1).unwrap().renew_every() > Duration::from_secs(60));
    }

    #[test]
    fn the_report_states_the_chains_timings() {
        let h = super::super::report::Header {
            command: String::new(),
            date: String::new(),
            kernel: String::new(),
            filesystem: String::new(),
            iterations: String::new(),
            cpus: 1,
            build: String::new(),
        };
        let doc = super::super::report::document(&h, &[], &[], &[READING]);
        let text = doc.split_whitespace().collect::<Vec<_>>().join(" ");
        for expected in [
            format!("(TTL {CHAIN_TTL_MS} ms, poll {CHAIN_POLL_MS} ms,"),
            format!(
                "(TTL {CHAIN_TTL_MS} ms, renew {CHAIN_RENEW_MS} ms, grace {CHAIN_GRACE_MS} ms, \
                 poll {CHAIN_POLL_MS} ms)"
            ),
            format!("(bucket TTL {} s,", IN_PROCESS_TTL.as_secs()),
            format!("given {} ms after", SETTLE.as_millis()),
            format!("({} ms, plus a share of one renew", SETTLE.as_millis()),
        ] {
            assert!(text.contains(&expected), "the report lacks {expected:?}");
        }
    }

    #[test]
    fn in_process_rows_run_on_one_node() {
        let server = Server::start().expect("nats-server (see nats-testkit)");
        let url = server.url();
        let c = campaign(&url, 1, 3, 1).unwrap();
        assert_eq!((c.campaign.len(), c.campaign_resign.len()), (3, 3));
        assert_eq!((c.fresh_create.len(), c.marker_create.len()), (3, 3));
        assert!(!c.server_version.is_empty());
        let r = renewal(&url, 1, &[], 3, 1, 2).unwrap();
        assert_eq!((r.floor.len(), r.measured.len()), (3, 3));
        assert_eq!(r.bytes.subject, "$KV.bench.renewal");
        assert!(r.bytes.value > IDENTITY.len() && r.bytes.out > r.bytes.value as f64);
        assert_eq!(r.bytes.routes, None);
        open_chain_bucket(&url, 1).unwrap();
        let f = handover_floor(&url, 1, 3, 1, (2, 1)).unwrap();
        assert_eq!((f.create.len(), f.release_create.len()), (3, 3));
        assert_eq!(f.release_create_settled.len(), 2);
    }

    #[test]
    fn sums_json_fields() {
        let json = r#"{"routes": [{"in_bytes": 5, "out_bytes": 120}, {"out_bytes":30}], "out_bytes_x": 1}"#;
        assert_eq!(sum_json_field(json, "out_bytes"), 150);
        assert_eq!(sum_json_field("{}", "out_bytes"), 0);
    }

    #[test]
    fn the_floor_value_is_lease_shaped() {
        let v = lease_like_value();
        assert!(v.starts_with("election-nats/1\nidentity=bench-host/4711\nnonce="));
        assert!(v.ends_with('\n'));
    }
}
