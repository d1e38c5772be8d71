//! Faults against real nats-server processes: the server killed and
//! restarted, cluster nodes killed (the leader's own node, the JetStream
//! meta leader), a dropped client connection. After each: at most one live
//! term at a time, epochs grow, and a leader again within TTL + grace + a
//! bounded delay.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use election_core::{Candidate, Lease};
use election_nats::{NatsClaim, NatsElection, NatsOptions};
use nats_testkit::{Cluster, Server};
use tokio::sync::watch;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(3);
/// How long after TTL + grace a new leader may take (reconnects, stream
/// leader elections in the cluster, polling).
const SLACK: Duration = Duration::from_secs(20);

fn options(replicas: usize) -> NatsOptions {
    NatsOptions::new(TTL)
        .and_then(|o| o.replicas(replicas))
        .expect("options")
}

/// One term as its holder saw it.
#[derive(Clone, Debug)]
struct TermRecord {
    who: String,
    epoch: u64,
    began: Instant,
    ended: Option<Instant>,
}

type Terms = Arc<Mutex<Vec<TermRecord>>>;

/// Campaigns again and again until `stop`, recording each term. A term ends
/// when it is lost (then the loop campaigns again) or at `stop` (resign).
fn run_candidate(
    c: Candidate<NatsClaim>,
    who: &str,
    terms: Terms,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let who = who.to_owned();
    tokio::spawn(async move {
        loop {
            let term = tokio::select! {
                t = c.campaign() => match t {
                    Ok(t) => t,
                    Err(_) => { tokio::time::sleep(Duration::from_millis(100)).await; continue; }
                },
                _ = async { let _ = stop.wait_for(|s| *s).await; } => return,
            };
            let index = {
                let mut t = terms.lock().expect("terms");
                t.push(TermRecord {
                    who: who.clone(),
                    epoch: term.epoch().get(),
                    began: Instant::now(),
                    ended: None,
                });
                t.len() - 1
            };
            let stopping = tokio::select! {
                _ = term.lost() => false,
                _ = async { let _ = stop.wait_for(|s| *s).await; } => true,
            };
            terms.lock().expect("terms")[index].ended = Some(Instant::now());
            if stopping {
                let _ = term.resign().await;
                return;
            }
        }
    })
}

/// Candidates `a` and `b` campaigning again and again (see
/// [`run_candidate`]), recording their terms.
struct Race {
    terms: Terms,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Race {
    fn start(a: Candidate<NatsClaim>, b: Candidate<NatsClaim>) -> Race {
        let terms: Terms = Arc::default();
        let (stop, rx) = watch::channel(false);
        let tasks = vec![
            run_candidate(a, "a", terms.clone(), rx.clone()),
            run_candidate(b, "b", terms.clone(), rx),
        ];
        Race { terms, stop, tasks }
    }

    /// Stops both (a term held is resigned), then [`check`]s the terms.
    async fn finish(self) {
        self.stop.send(true).expect("stop");
        for t in self.tasks {
            t.await.expect("join");
        }
        check(&self.terms.lock().expect("terms"));
    }
}

/// At most one live term at a time, and epochs grow in the order terms began.
fn check(terms: &[TermRecord]) {
    let mut sorted = terms.to_vec();
    sorted.sort_by_key(|t| t.began);
    for pair in sorted.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            b.epoch > a.epoch,
            "epoch {} ({}) began after epoch {} ({}): {sorted:#?}",
            b.epoch,
            b.who,
            a.epoch,
            a.who
        );
        let a_end = a.ended.expect("an earlier term ended before a later began");
        assert!(
            a_end <= b.began,
            "two live terms: {} until {:?}, {} from {:?}: {sorted:#?}",
            a.who,
            a_end,
            b.who,
            b.began
        );
    }
}

/// Waits until a term began after `after`; returns how long after.
async fn leader_after(terms: &Terms, after: Instant, bound: Duration) -> Duration {
    let deadline = after + bound;
    loop {
        let begun = terms
            .lock()
            .expect("terms")
            .iter()
            .filter(|t| t.began > after && t.ended.is_none())
            .map(|t| t.began)
            .min();
        if let Some(at) = begun {
            return at - after;
        }
        assert!(
            Instant::now() < deadline,
            "no leader within {bound:?} of the fault: {:#?}",
            terms.lock().expect("terms")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn candidate(urls: &str, replicas: usize, who: &str) -> Candidate<NatsClaim> {
    let election = NatsElection::connect(urls, options(replicas))
        .await
        .expect("connect");
    election
        .candidate("jobs", who)
        .expect("candidate")
        .with_poll_interval(Duration::from_millis(200))
        .expect("poll")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_and_restarting_the_server() {
    let mut server = Server::start().expect("nats-server");
    let race = Race::start(
        candidate(&server.url(), 1, "a").await,
        candidate(&server.url(), 1, "b").await,
    );
    let terms = &race.terms;
    leader_after(terms, Instant::now() - Duration::from_secs(1), SLACK).await;
    // A short outage: the leader's renewals fail, then succeed again.
    server.kill().expect("kill");
    server.restart().expect("restart");
    // A long outage: past the TTL, the term is lost.
    server.kill().expect("kill");
    let killed = Instant::now();
    tokio::time::sleep(TTL + Duration::from_secs(1)).await;
    assert!(
        terms
            .lock()
            .expect("terms")
            .iter()
            .all(|t| t.ended.is_some()),
        "a term outlived the outage: {:#?}",
        terms.lock().expect("terms")
    );
    server.restart().expect("restart");
    let restarted = Instant::now();
    let took = leader_after(terms, restarted, TTL + options(1).grace() + SLACK).await;
    eprintln!(
        "leader again {took:?} after the restart ({:?} after the kill)",
        restarted - killed + took
    );
    race.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_connection() {
    let server = Server::start().expect("nats-server");
    let election = NatsElection::connect(&server.url(), options(1))
        .await
        .expect("connect");
    let a = election.candidate("jobs", "a").expect("a");
    let term = a.campaign().await.expect("a wins");
    election
        .client()
        .force_reconnect()
        .await
        .expect("reconnect");
    // The client reconnects at once; the term survives and keeps renewing.
    let before = term.valid_until().expect("validity");
    tokio::time::timeout(Duration::from_secs(30), async {
        while term.valid_until().expect("validity") <= before {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("renewed after the reconnect");
    assert!(!term.is_lost());
    term.confirm()
        .await
        .expect("still held at the commit point");
    term.resign().await.expect("resign");
}

/// Runs two candidates against a cluster, applies `fault`, and checks.
async fn cluster_fault(pick: impl FnOnce(&Cluster, &str) -> usize) {
    let mut cluster = Cluster::start(3).expect("cluster");
    let urls = cluster.urls();
    // Each candidate connects through one node first (the client learns the
    // others from the cluster and fails over to them).
    let race = Race::start(
        candidate(&urls[0], 3, "a").await,
        candidate(&urls[1], 3, "b").await,
    );
    let terms = &race.terms;
    leader_after(terms, Instant::now() - Duration::from_secs(1), SLACK).await;
    let leader = terms
        .lock()
        .expect("terms")
        .iter()
        .find(|t| t.ended.is_none())
        .map(|t| t.who.clone())
        .expect("a leader");
    let victim = pick(&cluster, &leader);
    cluster.kill(victim).expect("kill");
    let killed = Instant::now();
    // A leader again: the same term surviving, or a new one.
    tokio::time::timeout(TTL + options(3).grace() + SLACK, async {
        loop {
            let live = terms
                .lock()
                .expect("terms")
                .iter()
                .any(|t| t.ended.is_none());
            if live && Instant::now() > killed + TTL {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a leader again within TTL + grace + slack");
    cluster.restart(victim).expect("restart");
    race.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_node_the_leader_is_connected_to() {
    // a connects through node 0, b through node 1.
    cluster_fault(|_, leader| if leader == "a" { 0 } else { 1 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_jetstream_meta_leader() {
    cluster_fault(|cluster, _| {
        let name = cluster.meta_leader().expect("meta leader");
        cluster.index_of(&name).expect("a node of the cluster")
    })
    .await;
}
