//! Two (or more) candidates campaigning again and again against a real
//! server while a test injects faults, each term recorded, each term
//! writing to a fenced resource while it believes it leads. Violations of
//! the promise are recorded as they happen and asserted at the end:
//!
//! - a term begins while another recorded term is not yet lost (checked
//!   with `is_lost` at the moment of the win: both live in this process,
//!   on one monotonic clock, so this is "two live terms at once");
//! - a term begins with an epoch not above every earlier one;
//! - a fenced write is refused as stale while its term still believes it
//!   leads (a newer term wrote first: two leaders).
#![allow(dead_code)]

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use election_core::{Candidate, Lease, TermLease};
use election_postgres::{PostgresClaim, PostgresElection, PostgresFence, PostgresOptions};
use fencing::{ResourceName, Token};
use postgres_testkit::Server;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::watch;
use tokio::time::Instant;

/// One term as its holder saw it.
#[derive(Clone, Debug)]
pub(crate) struct TermRecord {
    pub(crate) who: String,
    pub(crate) epoch: u64,
    pub(crate) began: Instant,
    pub(crate) ended: Option<Instant>,
    pub(crate) fenced_writes: u64,
    lease: TermLease,
}

#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) terms: Vec<TermRecord>,
    pub(crate) violations: Vec<String>,
}

pub(crate) type Shared = Arc<Mutex<Log>>;

/// A pool of its own on `url` whose sessions carry `application_name`, so
/// a test can find them in `pg_stat_activity`.
pub(crate) fn pool(url: &str, application_name: &str) -> PgPool {
    let connect = PgConnectOptions::from_str(url)
        .expect("url")
        .application_name(application_name);
    PgPoolOptions::new()
        .max_connections(4)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy_with(connect)
}

/// The election on `url` through a pool named `application_name`.
pub(crate) async fn election(
    url: &str,
    application_name: &str,
    options: PostgresOptions,
) -> PostgresElection {
    PostgresElection::with_pool(pool(url, application_name), options)
        .await
        .expect("election")
}

/// The resource every term writes to: `public.ledger`, fenced by the mark
/// of resource `ledger`.
pub(crate) fn create_ledger(server: &Server) {
    server
        .sql("CREATE TABLE IF NOT EXISTS public.ledger (id bigserial PRIMARY KEY, epoch bigint NOT NULL, who text NOT NULL)")
        .expect("ledger");
}

/// Where a candidate makes its fenced writes: a pool straight to the
/// server (never through a test's proxy: a cut-off leader that can still
/// reach its resource is the case the fence exists for).
#[derive(Clone, Debug)]
pub(crate) struct Resource {
    pool: PgPool,
    fence: PostgresFence,
}

impl Resource {
    pub(crate) async fn open(server: &Server, who: &str) -> Resource {
        Resource::with_pool(pool(&server.url(), &format!("resource-{who}"))).await
    }

    /// The resource on `pool`.
    pub(crate) async fn with_pool(pool: PgPool) -> Resource {
        let fence = PostgresFence::new((pool.clone(), "election"))
            .await
            .expect("fence");
        Resource { pool, fence }
    }

    /// One fenced insert: `Ok(true)` committed, `Ok(false)` refused as
    /// stale, `Err` the database failed or did not answer in 1 s.
    pub(crate) async fn write(&self, token: Token, who: &str) -> Result<bool, String> {
        let r = ResourceName::new("ledger").expect("name");
        let attempt = async {
            let mut tx = self.pool.begin().await.map_err(|e| e.to_string())?;
            match self.fence.advance_in(&mut tx, &r, token).await {
                Ok(_) => {}
                Err(fencing::Error::Stale { .. }) => return Ok(false),
                Err(e) => return Err(e.to_string()),
            }
            sqlx::query("INSERT INTO public.ledger (epoch, who) VALUES ($1, $2)")
                .bind(i64::try_from(token.epoch().get()).expect("epoch"))
                .bind(who)
                .execute(&mut *tx)
                .await
                .map_err(|e| e.to_string())?;
            tx.commit().await.map_err(|e| e.to_string())?;
            Ok(true)
        };
        match tokio::time::timeout(Duration::from_secs(1), attempt).await {
            Ok(r) => r,
            Err(_) => Err("timed out".into()),
        }
    }
}

/// Records a term that just began, checking it against the others.
fn begin(log: &Shared, who: &str, lease: TermLease) -> usize {
    let mut log = log.lock().expect("log");
    let epoch = lease.epoch().get();
    let now = Instant::now();
    let mut found = Vec::new();
    for t in &log.terms {
        if !t.lease.is_lost() {
            found.push(format!(
                "{who} won epoch {epoch} while {} still held epoch {} (since {:?} ago)",
                t.who,
                t.epoch,
                now - t.began
            ));
        }
        if t.epoch >= epoch {
            found.push(format!(
                "{who} won epoch {epoch} after {} had epoch {}",
                t.who, t.epoch
            ));
        }
    }
    log.violations.extend(found);
    log.terms.push(TermRecord {
        who: who.to_owned(),
        epoch,
        began: now,
        ended: None,
        fenced_writes: 0,
        lease,
    });
    log.terms.len() - 1
}

/// Campaigns again and again until `stop`. While a term lives it writes
/// to `resource` every 50 ms; it ends when lost (then campaigns again) or
/// at `stop` (resign).
fn run_candidate(
    c: Candidate<PostgresClaim>,
    who: String,
    resource: Resource,
    log: Shared,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let term = tokio::select! {
                t = c.campaign() => match t {
                    Ok(t) => t,
                    Err(_) => { tokio::time::sleep(Duration::from_millis(100)).await; continue; }
                },
                _ = async { let _ = stop.wait_for(|s| *s).await; } => return,
            };
            let index = begin(&log, &who, term.lease());
            let writes = async {
                loop {
                    let Ok(token) = Token::issue(&term) else {
                        // Lost: no token is issued any more.
                        return std::future::pending::<()>().await;
                    };
                    match resource.write(token, &who).await {
                        Ok(true) => log.lock().expect("log").terms[index].fenced_writes += 1,
                        Ok(false) if !term.is_lost() => {
                            log.lock().expect("log").violations.push(format!(
                                "{who}'s write under epoch {} was refused as stale while its term was live",
                                token.epoch()
                            ));
                        }
                        _ => {}
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            let stopping = tokio::select! {
                _ = term.lost() => false,
                _ = async { let _ = stop.wait_for(|s| *s).await; } => true,
                () = writes => unreachable!("the writes never end"),
            };
            log.lock().expect("log").terms[index].ended = Some(Instant::now());
            if stopping {
                let _ = term.resign().await;
                return;
            }
        }
    })
}

/// Candidates campaigning for `jobs`, recording their terms.
pub(crate) struct Race {
    pub(crate) log: Shared,
    validity: Duration,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Race {
    /// `candidates`: `(who, election)`; each campaigns for `jobs` polling
    /// every 50 ms and writes through a resource pool of its own.
    pub(crate) async fn start(server: &Server, candidates: Vec<(&str, PostgresElection)>) -> Race {
        create_ledger(server);
        let log: Shared = Arc::default();
        let (stop, rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut validity = Duration::MAX;
        for (who, e) in candidates {
            validity = validity.min(e.options().validity());
            let c = e
                .candidate("jobs", who)
                .expect("candidate")
                .with_poll_interval(Duration::from_millis(50))
                .expect("poll");
            let resource = Resource::open(server, who).await;
            tasks.push(run_candidate(
                c,
                who.to_owned(),
                resource,
                log.clone(),
                rx.clone(),
            ));
        }
        Race {
            log,
            validity,
            stop,
            tasks,
        }
    }

    /// The live term's holder and epoch, if one is recorded as live.
    pub(crate) fn leader(&self) -> Option<(String, u64)> {
        let log = self.log.lock().expect("log");
        log.terms
            .iter()
            .find(|t| t.ended.is_none() && !t.lease.is_lost())
            .map(|t| (t.who.clone(), t.epoch))
    }

    /// Waits (at most `bound`) until a term that began after `after` is
    /// live; returns its holder and epoch.
    pub(crate) async fn leader_after(&self, after: Instant, bound: Duration) -> (String, u64) {
        let deadline = Instant::now() + bound;
        loop {
            let found = {
                let log = self.log.lock().expect("log");
                log.terms
                    .iter()
                    .find(|t| t.began > after && t.ended.is_none())
                    .map(|t| (t.who.clone(), t.epoch))
            };
            if let Some(l) = found {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no new leader within {bound:?}: {:#?}",
                self.log.lock().expect("log")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (at most `bound`) until a leader is live, new or surviving.
    pub(crate) async fn some_leader(&self, bound: Duration) -> (String, u64) {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(l) = self.leader() {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no leader within {bound:?}: {:#?}",
                self.log.lock().expect("log")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (at most `bound`) until a live term has a validity that only
    /// a renewal (or claim) sent after `at` can have given it.
    pub(crate) async fn renewed_after(&self, at: Instant, bound: Duration) {
        let validity = self.validity;
        let deadline = Instant::now() + bound;
        loop {
            let renewed = {
                let log = self.log.lock().expect("log");
                log.terms.iter().any(|t| {
                    !t.lease.is_lost() && t.lease.valid_until().is_some_and(|v| v > at + validity)
                })
            };
            if renewed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no renewal within {bound:?}: {:#?}",
                self.log.lock().expect("log")
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (at most `bound`) until a live term has made a fenced write
    /// (the resource is reachable and takes the leader's token).
    pub(crate) async fn leader_wrote(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        loop {
            let wrote = {
                let log = self.log.lock().expect("log");
                log.terms
                    .iter()
                    .any(|t| !t.lease.is_lost() && t.fenced_writes > 0)
            };
            if wrote {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the leader made no fenced write within {bound:?}: {:#?}",
                self.log.lock().expect("log")
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (at most `bound`) until every recorded term is lost or ended.
    pub(crate) async fn all_lost(&self, bound: Duration) -> Instant {
        let deadline = Instant::now() + bound;
        loop {
            let live = {
                let log = self.log.lock().expect("log");
                log.terms.iter().any(|t| !t.lease.is_lost())
            };
            if !live {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "a term outlived the outage by {bound:?}: {:#?}",
                self.log.lock().expect("log")
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops every candidate (a term held is resigned) and asserts that no
    /// violation was recorded; returns the terms.
    pub(crate) async fn finish(self) -> Vec<TermRecord> {
        self.stop.send(true).expect("stop");
        for t in self.tasks {
            t.await.expect("a candidate's task panicked");
        }
        let log = self.log.lock().expect("log");
        assert!(
            log.violations.is_empty(),
            "violations: {:#?}\nterms: {:#?}",
            log.violations,
            log.terms
        );
        log.terms.clone()
    }
}

/// The ledger's epochs in commit order never go down (the fence's
/// promise, seen in the data).
pub(crate) fn ledger_epochs_never_go_down(server: &Server) {
    let epochs = server
        .sql("SELECT epoch FROM public.ledger ORDER BY id")
        .expect("ledger");
    let epochs: Vec<u64> = epochs.lines().map(|l| l.parse().expect("epoch")).collect();
    assert!(
        epochs.windows(2).all(|w| w[0] <= w[1]),
        "the ledger went back: {epochs:?}"
    );
}

/// A wall clock the test moves (the monotonic clock is the system's):
/// the backend writes it to the rows for display and must decide nothing
/// by it.
#[derive(Debug)]
pub(crate) struct JumpingWall {
    pub(crate) wall_ms: std::sync::atomic::AtomicI64,
}

impl Default for JumpingWall {
    fn default() -> Self {
        JumpingWall {
            wall_ms: 1_700_000_000_000.into(),
        }
    }
}

impl JumpingWall {
    /// Moves the wall clock by `days` (either way).
    pub(crate) fn jump_days(&self, days: i64) {
        self.wall_ms
            .fetch_add(days * 86_400_000, std::sync::atomic::Ordering::SeqCst);
    }
}

impl election_postgres::Clock for JumpingWall {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_unix_ms(&self) -> i64 {
        self.wall_ms.load(std::sync::atomic::Ordering::SeqCst)
    }
}
