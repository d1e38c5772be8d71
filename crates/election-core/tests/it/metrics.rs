//! Issue 16, "metrics and health": each metric of the core moves on the
//! right event, on the memory backend, read back from a recorder installed
//! for the test's thread only; the health check turns unhealthy when a
//! leader's renewals hang past the bound, and reads healthy while renewals
//! land and while not leading.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use election_core::renewal::RenewalPolicy;
use election_core::{
    Candidate, Claim, ElectionName, End, Error, Health, Identity, Leader, LeaseSet, LossReason,
    PerKeyClaims, Renewed, TermReporter, WatchGuard, Won, renew_until_lost,
};
use election_testkit::memory::{MemoryAttempt, MemoryBackend, MemoryClaim, Step};
use election_testkit::recorder::TestRecorder;
use tokio::time::{Instant, sleep};

/// Runs `test` on a current-thread runtime on a paused clock, with
/// `recorder` installed for this thread (every task runs on it).
fn run<F: Future>(recorder: &TestRecorder, test: impl FnOnce() -> F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    metrics::with_local_recorder(recorder, || rt.block_on(test()))
}

/// The terms of `jobs` on the memory backend lost for `reason`.
fn lost_jobs(r: &TestRecorder, reason: &str) -> u64 {
    r.counter(
        LOST,
        &[("name", "jobs"), ("backend", "memory"), ("reason", reason)],
    )
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

const WON: &str = "election_terms_won_total";
const LOST: &str = "election_terms_lost_total";
const RESIGNED: &str = "election_terms_resigned_total";
const DROPPED: &str = "election_terms_dropped_total";
const TRANSFERRED: &str = "election_terms_transferred_total";
const REVOCATIONS: &str = "election_revocations_total";
const YIELDED: &str = "election_terms_yielded_total";
const LEADER: &str = "election_leader";
const WAIT: &str = "election_campaign_wait_seconds";
const RENEWAL: &str = "election_renewal_duration_seconds";
const FAILURES: &str = "election_renewal_failures_total";

#[test]
fn won_resigned_dropped_and_the_leader_gauge() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let a = Candidate::new(b.claim("jobs", "a").unwrap());
        assert_eq!(
            r.counter(WON, &[("name", "jobs"), ("backend", "memory")]),
            0
        );
        let term = a.campaign().await.unwrap();
        assert_eq!(
            r.counter(WON, &[("name", "jobs"), ("backend", "memory")]),
            1
        );
        assert_eq!(
            r.gauge(LEADER, &[("name", "jobs"), ("backend", "memory")]),
            Some(1.0)
        );
        assert_eq!(
            r.histogram(WAIT, &[("name", "jobs"), ("backend", "memory")])
                .len(),
            1
        );
        term.resign().await.unwrap();
        assert_eq!(
            r.counter(RESIGNED, &[("name", "jobs"), ("backend", "memory")]),
            1
        );
        assert_eq!(
            r.gauge(LEADER, &[("name", "jobs"), ("backend", "memory")]),
            Some(0.0)
        );
        term.resign().await.unwrap(); // idempotent: counted once
        assert_eq!(
            r.counter(RESIGNED, &[("name", "jobs"), ("backend", "memory")]),
            1
        );

        let term = a.campaign().await.unwrap();
        assert_eq!(
            r.gauge(LEADER, &[("name", "jobs"), ("backend", "memory")]),
            Some(1.0)
        );
        drop(term);
        assert_eq!(
            r.counter(DROPPED, &[("name", "jobs"), ("backend", "memory")]),
            1
        );
        assert_eq!(
            r.counter(WON, &[("name", "jobs"), ("backend", "memory")]),
            2
        );
        assert_eq!(
            r.gauge(LEADER, &[("name", "jobs"), ("backend", "memory")]),
            Some(0.0)
        );
        // Another election has its own series.
        let other = Candidate::new(b.claim("reports", "a").unwrap());
        let _t = other.campaign().await.unwrap();
        assert_eq!(
            r.gauge(LEADER, &[("name", "reports"), ("backend", "memory")]),
            Some(1.0)
        );
        assert_eq!(
            r.gauge(LEADER, &[("name", "jobs"), ("backend", "memory")]),
            Some(0.0)
        );
        assert_eq!(lost_jobs(&r, "revoked"), 0);
    });
}

/// A handover counts as transferred and as resigned; a refused transfer
/// (to the holder itself) counts nothing.
#[test]
fn transfers_are_counted_and_resigned() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let term = Candidate::new(b.claim("jobs", "a").unwrap())
            .campaign()
            .await
            .unwrap();
        let labels = [("name", "jobs"), ("backend", "memory")];
        let me = election_core::Identity::new("a").unwrap();
        assert!(term.transfer(&me, secs(5.0)).await.is_err());
        assert_eq!(r.counter(TRANSFERRED, &labels), 0);
        let to = election_core::Identity::new("b").unwrap();
        term.transfer(&to, secs(5.0)).await.unwrap();
        assert_eq!(r.counter(TRANSFERRED, &labels), 1);
        assert_eq!(r.counter(YIELDED, &labels), 0);
        assert_eq!(r.counter(RESIGNED, &labels), 1);
        assert_eq!(r.gauge(LEADER, &labels), Some(0.0));
        // A yield to the preferred candidate heard counts as one.
        let c = Candidate::new(b.claim("jobs", "c").unwrap());
        let term = c.campaign().await.unwrap();
        let primary = election_core::Identity::new("primary").unwrap();
        election_core::Election::prefer(&b, "jobs", &primary, 3)
            .await
            .unwrap();
        let heard = term.preferred().await;
        term.transfer(&heard.to, secs(5.0)).await.unwrap();
        assert_eq!(r.counter(TRANSFERRED, &labels), 2);
        assert_eq!(r.counter(YIELDED, &labels), 1);
    });
}

/// An operator's revoke that landed counts once in the revoking
/// process, and the deposed holder's loss counts with reason `revoked`; a
/// revoke of a name nobody leads counts nothing.
#[test]
fn revocations_are_counted_where_they_land() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let labels = [("name", "jobs"), ("backend", "memory")];
        let ops = Identity::new("ops").unwrap();
        let none = election_core::Election::revoke(&b, "jobs", &ops).await;
        assert!(matches!(none, Ok(None)), "{none:?}");
        assert_eq!(r.counter(REVOCATIONS, &labels), 0);
        let term = Candidate::new(b.claim("jobs", "a").unwrap())
            .campaign()
            .await
            .unwrap();
        let revoked = election_core::Election::revoke(&b, "jobs", &ops)
            .await
            .unwrap();
        assert!(revoked.is_some());
        assert_eq!(r.counter(REVOCATIONS, &labels), 1);
        term.lost().await;
        assert_eq!(lost_jobs(&r, "revoked"), 1);
    });
}

#[test]
fn losses_are_counted_by_reason() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let a = Candidate::new(b.claim("jobs", "a").unwrap());
        let term = a.campaign().await.unwrap();
        b.revoke("jobs");
        term.lost().await;
        assert_eq!(lost_jobs(&r, "revoked"), 1);
        assert_eq!(
            r.gauge(LEADER, &[("name", "jobs"), ("backend", "memory")]),
            Some(0.0)
        );
        // A resign after the loss is not a resign.
        assert!(term.resign().await.is_err());
        assert_eq!(
            r.counter(RESIGNED, &[("name", "jobs"), ("backend", "memory")]),
            0
        );
        drop(term);

        b.set_lease(Some(secs(1.0)));
        let term = a.campaign().await.unwrap();
        sleep(secs(1.5)).await; // never renewed: the validity runs out
        assert!(term.is_lost());
        assert_eq!(lost_jobs(&r, "expired"), 1);
        assert_eq!(
            r.gauge(LEADER, &[("name", "jobs"), ("backend", "memory")]),
            Some(0.0)
        );
        drop(term);
        assert_eq!(
            r.counter(DROPPED, &[("name", "jobs"), ("backend", "memory")]),
            0,
            "a lost term is not dropped"
        );
        assert_eq!(
            r.counter(WON, &[("name", "jobs"), ("backend", "memory")]),
            2
        );
    });
}

#[test]
fn the_campaign_wait_is_the_time_to_the_win() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let first = Candidate::new(b.claim("jobs", "a").unwrap())
            .campaign()
            .await
            .unwrap();
        let waiter = Candidate::new(b.claim("jobs", "b").unwrap());
        let resign = async {
            sleep(secs(5.0)).await;
            first.resign().await.unwrap();
        };
        let (second, ()) = tokio::join!(waiter.campaign(), resign);
        let _second = second.unwrap();
        let waits = r.histogram(WAIT, &[("name", "jobs"), ("backend", "memory")]);
        assert_eq!(waits.len(), 2, "{waits:?}");
        assert!(waits[0] < 0.1, "uncontested: {waits:?}");
        assert!(
            (5.0..5.5).contains(&waits[1]),
            "waited for the resign: {waits:?}"
        );
    });
}

/// What the renewals of a [`Renewing`] claim do.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Land,
    Unavailable,
    Hang,
    Refuse,
}

/// The memory backend's claim with a renewal loop, as the lease backends
/// run one: the core's [`renew_until_lost`], whose renewals land, fail,
/// hang or are refused as the test says.
struct Renewing {
    inner: MemoryClaim,
    mode: Arc<Mutex<Mode>>,
    policy: RenewalPolicy,
}

impl Renewing {
    /// A claim valid 9 s from each renewal, renewed every 3 s.
    fn new(b: &MemoryBackend, name: &str, id: &str) -> (Self, Arc<Mutex<Mode>>) {
        b.set_lease(Some(secs(9.0)));
        let mode = Arc::new(Mutex::new(Mode::Land));
        let claim = Renewing {
            inner: b.claim(name, id).unwrap(),
            mode: mode.clone(),
            policy: RenewalPolicy::new(secs(9.0), secs(3.0)).unwrap(),
        };
        (claim, mode)
    }
}

impl Claim for Renewing {
    type Attempt = MemoryAttempt;

    fn name(&self) -> &ElectionName {
        self.inner.name()
    }

    fn identity(&self) -> &Identity {
        self.inner.identity()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn open(&self) -> Result<MemoryAttempt, Error> {
        self.inner.open().await
    }

    async fn try_claim(&self, attempt: &mut MemoryAttempt) -> Result<Option<Won>, Error> {
        self.inner.try_claim(attempt).await
    }

    fn watch(
        &self,
        attempt: &mut MemoryAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, Error> {
        drop(self.inner.watch(attempt, won, reporter.clone())?);
        let (mode, policy, name) = (self.mode.clone(), self.policy, self.name().clone());
        let valid_until = won.valid_until.expect("a lease is set");
        Ok(WatchGuard::task(tokio::spawn(async move {
            renew_until_lost(policy, valid_until, &reporter, |_budget| {
                let mode = *mode.lock().unwrap();
                let name = name.clone();
                async move {
                    match mode {
                        Mode::Land => Renewed::Landed,
                        Mode::Unavailable => Renewed::Failed(Error::unavailable(
                            &name,
                            std::io::Error::other("down"),
                        )),
                        Mode::Hang => std::future::pending().await,
                        Mode::Refuse => Renewed::Refused(LossReason::Revoked {
                            detail: "taken".into(),
                        }),
                    }
                }
            })
            .await;
        })))
    }

    async fn release(&self, attempt: &mut MemoryAttempt) -> Result<(), Error> {
        self.inner.release(attempt).await
    }

    fn close(&self, attempt: MemoryAttempt, end: End) {
        self.inner.close(attempt, end)
    }

    async fn leader(&self) -> Result<Option<Leader>, Error> {
        self.inner.leader().await
    }
}

#[test]
fn renewals_are_timed_and_failures_counted_by_kind() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let (claim, mode) = Renewing::new(&b, "jobs", "a");
        let term = Candidate::new(claim).campaign().await.unwrap();
        let jobs = [("name", "jobs"), ("backend", "memory")];
        let kind = |k| {
            r.counter(
                FAILURES,
                &[("name", "jobs"), ("backend", "memory"), ("kind", k)],
            )
        };
        sleep(secs(3.5)).await; // the renewal at 3 s landed
        assert_eq!(r.histogram(RENEWAL, &jobs).len(), 1);
        assert_eq!(kind("unavailable"), 0);

        *mode.lock().unwrap() = Mode::Unavailable;
        sleep(secs(3.0)).await; // fails at 6 s, retried every 0.75 s
        assert!(kind("unavailable") >= 1, "{:?}", r.series());
        assert_eq!(r.histogram(RENEWAL, &jobs).len(), 1);

        *mode.lock().unwrap() = Mode::Hang;
        sleep(secs(6.0)).await; // cut off at the deadline (12 s): unknown
        assert!(kind("unknown") >= 1, "{:?}", r.series());
        assert!(term.is_lost());
        assert_eq!(lost_jobs(&r, "expired"), 1);
        assert_eq!(kind("refused"), 0);
        drop(term);

        let (claim, mode) = Renewing::new(&b, "jobs", "a");
        *mode.lock().unwrap() = Mode::Refuse;
        let term = Candidate::new(claim).campaign().await.unwrap();
        term.lost().await;
        assert_eq!(kind("refused"), 1);
        assert_eq!(lost_jobs(&r, "revoked"), 1);
        assert_eq!(r.gauge(LEADER, &jobs), Some(0.0));
    });
}

/// The stuck leader: renewals hang. Healthy before the win, right after
/// it and while renewals land; unhealthy once no renewal has landed for
/// longer than the bound while the term still reads as leading; healthy
/// again once the renewal loop reports the loss (not leading).
#[test]
fn the_health_check_fails_while_a_leaders_renewals_hang() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let (claim, mode) = Renewing::new(&b, "jobs", "a");
        let candidate = Candidate::new(claim);
        let bound = secs(5.0);
        let health = candidate.health_check(bound);
        assert_eq!(health.check(), Health::Healthy, "not leading");
        let term = candidate.campaign().await.unwrap();
        let t0 = Instant::now();
        let of_term = term.health_check(bound);
        assert_eq!(health.check(), Health::Healthy, "just won");
        sleep(secs(7.0)).await; // renewals at 3 s and 6 s landed
        assert_eq!(health.check(), Health::Healthy, "renewals land");
        assert_eq!(of_term.check(), Health::Healthy);

        *mode.lock().unwrap() = Mode::Hang;
        // Last landed renewal at 6 s; the next hangs from 9 s. Valid
        // until 6 + 9 = 15 s.
        tokio::time::sleep_until(t0 + secs(10.9)).await;
        assert_eq!(
            health.check(),
            Health::Healthy,
            "4.9 s since the last renewal"
        );
        tokio::time::sleep_until(t0 + secs(11.5)).await;
        match health.check() {
            Health::Unhealthy {
                since_last_renewal,
                bound: b,
            } => {
                assert_eq!(b, bound);
                assert!(
                    (secs(5.4)..secs(5.6)).contains(&since_last_renewal),
                    "{since_last_renewal:?}"
                );
            }
            other => panic!("a hung leader reads {other:?}"),
        }
        assert!(!of_term.check().is_healthy());
        assert!(!term.is_lost(), "still within its validity");

        tokio::time::sleep_until(t0 + secs(15.5)).await;
        assert!(term.is_lost());
        assert_eq!(health.check(), Health::Healthy, "lost: not leading");
        assert_eq!(of_term.check(), Health::Healthy);
    });
}

/// A claim that does not expire (an OS lock) has no renewals: healthy
/// while held, however long; so is a resigned term.
#[test]
fn a_claim_that_does_not_expire_reads_healthy() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let candidate = Candidate::new(b.claim("jobs", "a").unwrap());
        let health = candidate.health_check(secs(1.0));
        let term = candidate.campaign().await.unwrap();
        sleep(secs(60.0)).await;
        assert_eq!(health.check(), Health::Healthy);
        term.resign().await.unwrap();
        assert_eq!(health.check(), Health::Healthy);
    });
}

/// A term whose watch never renews and never reports (a stalled renewal
/// loop) reads unhealthy past the bound, and keeps reading so past its
/// validity, until its holder ends it.
#[test]
fn a_stalled_renewal_loop_reads_unhealthy_until_the_term_ends() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        b.set_lease(Some(secs(10.0))); // the memory claim never renews
        let candidate = Candidate::new(b.claim("jobs", "a").unwrap());
        let health = candidate.health_check(secs(3.0));
        let term = candidate.campaign().await.unwrap();
        sleep(secs(2.0)).await;
        assert!(health.check().is_healthy());
        sleep(secs(2.0)).await;
        assert!(!health.check().is_healthy());
        sleep(secs(10.0)).await;
        assert!(!health.check().is_healthy(), "nothing reported the loss");
        drop(term);
        assert!(health.check().is_healthy());
    });
}

const HELD: &str = "election_lease_set_keys_held";
const KEYS_WON: &str = "election_lease_set_keys_won_total";
const KEYS_LOST: &str = "election_lease_set_keys_lost_total";
const SET_RENEWAL: &str = "election_lease_set_renewal_duration_seconds";
const SET_FAILURES: &str = "election_lease_set_renewal_failures_total";

#[test]
fn lease_set_keys_renewals_and_health() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        b.set_lease(Some(secs(3.0))); // renewed every second
        let set = LeaseSet::new(b.keys("node-a").unwrap());
        let node = [("set", "node-a"), ("backend", "memory")];
        let health = set.health_check(secs(1.5));
        assert!(set.ask("store-1").await.unwrap());
        assert!(set.ask("store-2").await.unwrap());
        assert!(set.ask("store-3").await.unwrap());
        assert_eq!(r.gauge(HELD, &node), Some(3.0));
        assert_eq!(r.counter(KEYS_WON, &node), 3);

        b.revoke("store-3");
        assert!(!set.held("store-3"));
        assert_eq!(r.gauge(HELD, &node), Some(2.0));
        assert_eq!(
            r.counter(
                KEYS_LOST,
                &[
                    ("set", "node-a"),
                    ("backend", "memory"),
                    ("reason", "revoked")
                ]
            ),
            1
        );

        sleep(secs(2.5)).await;
        assert!(set.held("store-3"), "won back: the set still asks for it");
        assert_eq!(r.counter(KEYS_WON, &node), 4);
        assert_eq!(r.gauge(HELD, &node), Some(3.0));
        assert!(
            !r.histogram(SET_RENEWAL, &node).is_empty(),
            "{:?}",
            r.series()
        );
        assert!(health.check().is_healthy(), "renewals land");

        // Renewals fail from now on: unhealthy past the bound, until the
        // holds' deadline loses them.
        b.fail(Step::Renew, 1000);
        let failed_at = Instant::now();
        sleep(secs(1.7)).await;
        assert!(
            r.counter(
                SET_FAILURES,
                &[
                    ("set", "node-a"),
                    ("backend", "memory"),
                    ("kind", "unavailable")
                ]
            ) >= 1,
            "{:?}",
            r.series()
        );
        assert!(set.held("store-1"));
        assert!(
            !health.check().is_healthy(),
            "no renewal for 1.7 s while holding"
        );
        tokio::time::sleep_until(failed_at + secs(3.5)).await;
        assert!(!set.held("store-1"));
        assert_eq!(r.gauge(HELD, &node), Some(0.0));
        assert_eq!(
            r.counter(
                KEYS_LOST,
                &[
                    ("set", "node-a"),
                    ("backend", "memory"),
                    ("reason", "expired")
                ]
            ),
            3
        );
        assert!(health.check().is_healthy(), "nothing held");
        set.close().await;
        assert_eq!(r.gauge(HELD, &node), Some(0.0));
    });
}

#[test]
fn closing_a_set_gives_its_keys_up_in_the_gauge() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let set = LeaseSet::new(b.keys("node-b").unwrap());
        for key in ["a", "b"] {
            assert!(set.ask(key).await.unwrap());
        }
        assert_eq!(
            r.gauge(HELD, &[("set", "node-b"), ("backend", "memory")]),
            Some(2.0)
        );
        set.close().await;
        assert_eq!(
            r.gauge(HELD, &[("set", "node-b"), ("backend", "memory")]),
            Some(0.0)
        );
        assert_eq!(
            r.counter(
                KEYS_LOST,
                &[
                    ("set", "node-b"),
                    ("backend", "memory"),
                    ("reason", "revoked")
                ]
            ),
            0
        );
    });
}

/// A lease set over per-key campaigns (`PerKeyClaims`, the file backend's
/// way) runs one term per key: those terms must not record per-key series
/// (10,000 keys would make 10,000 of each); the set counts them under its
/// own label.
#[test]
fn per_key_campaigns_of_a_lease_set_record_no_per_key_series() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let me = Identity::new("node-c").unwrap();
        let claims = b.clone();
        let set = LeaseSet::new(
            PerKeyClaims::new(me.clone(), move |key| {
                claims.claim(key.as_str(), me.as_str())
            })
            .with_backend("memory"),
        );
        for key in ["shard-1", "shard-2", "shard-3"] {
            assert!(set.ask(key).await.unwrap());
        }
        b.revoke("shard-2");
        sleep(secs(1.0)).await;
        assert_eq!(
            r.counter(KEYS_WON, &[("set", "node-c"), ("backend", "memory")]),
            4,
            "{:?}",
            r.series()
        );
        assert_eq!(
            r.gauge(HELD, &[("set", "node-c"), ("backend", "memory")]),
            Some(3.0)
        );
        set.close().await;
        let per_key: Vec<String> = r
            .series()
            .into_iter()
            .filter(|s| s.contains("shard-"))
            .collect();
        assert!(per_key.is_empty(), "per-key series: {per_key:?}");
    });
}

/// Issue 26 item 4: a candidate shows up in the leader gauge (0) from the
/// start of its campaign, before any win, labelled with its backend; a
/// claim that does not name its backend is labelled `custom`.
#[test]
fn a_waiting_candidate_reads_zero_from_the_start_of_its_campaign() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        let a = Candidate::new(b.claim("jobs", "a").unwrap());
        let waiting = Candidate::new(b.claim("jobs", "b").unwrap());
        let labels = [("name", "jobs"), ("backend", "memory")];
        assert_eq!(r.gauge(LEADER, &labels), None, "nothing before a campaign");
        let term = a.campaign().await.unwrap();
        assert_eq!(r.gauge(LEADER, &labels), Some(1.0));
        // Another process's view: only the waiting candidate's series.
        let r2 = TestRecorder::new();
        metrics::with_local_recorder(&r2, || {
            let mut campaign = std::pin::pin!(waiting.campaign());
            let polled = futures::FutureExt::now_or_never(&mut campaign);
            assert!(polled.is_none(), "held by a: b waits");
        });
        assert_eq!(r2.gauge(LEADER, &labels), Some(0.0), "{:?}", r2.series());
        assert_eq!(r2.counter(WON, &labels), 0);
        term.resign().await.unwrap();
        // A claim of a backend that does not name itself.
        struct Unnamed(MemoryClaim);
        impl Claim for Unnamed {
            type Attempt = MemoryAttempt;
            fn name(&self) -> &ElectionName {
                self.0.name()
            }
            fn identity(&self) -> &Identity {
                self.0.identity()
            }
            async fn open(&self) -> Result<MemoryAttempt, Error> {
                self.0.open().await
            }
            async fn try_claim(&self, a: &mut MemoryAttempt) -> Result<Option<Won>, Error> {
                self.0.try_claim(a).await
            }
            fn watch(
                &self,
                a: &mut MemoryAttempt,
                won: Won,
                reporter: TermReporter,
            ) -> Result<WatchGuard, Error> {
                self.0.watch(a, won, reporter)
            }
            async fn release(&self, a: &mut MemoryAttempt) -> Result<(), Error> {
                self.0.release(a).await
            }
            fn close(&self, a: MemoryAttempt, end: End) {
                self.0.close(a, end)
            }
            async fn leader(&self) -> Result<Option<Leader>, Error> {
                self.0.leader().await
            }
        }
        let t = Candidate::new(Unnamed(b.claim("reports", "c").unwrap()))
            .campaign()
            .await
            .unwrap();
        assert_eq!(
            r.gauge(LEADER, &[("name", "reports"), ("backend", "custom")]),
            Some(1.0)
        );
        t.resign().await.unwrap();
    });
}

/// Issue 25 (ADR 0063 for lease sets): a lease set's series carry the
/// `backend` label its claims name, and exist (0 held, 0 won) from the
/// set's start, before any key is asked; per-key campaigns that do not
/// name their backend are labelled `custom`.
#[test]
fn lease_set_series_carry_the_backend_label_from_the_start() {
    let r = TestRecorder::new();
    run(&r, || async {
        let b = MemoryBackend::new();
        b.set_lease(Some(secs(3.0)));
        let set = LeaseSet::new(b.keys("node-d").unwrap());
        let labels = [("set", "node-d"), ("backend", "memory")];
        assert_eq!(r.gauge(HELD, &labels), Some(0.0), "{:?}", r.series());
        assert_eq!(r.counter(KEYS_WON, &labels), 0);
        assert!(set.ask("shard-1").await.unwrap());
        b.revoke("shard-1");
        sleep(secs(1.5)).await;
        assert_eq!(
            r.counter(
                KEYS_LOST,
                &[
                    ("set", "node-d"),
                    ("backend", "memory"),
                    ("reason", "revoked")
                ]
            ),
            1
        );
        assert!(
            !r.histogram(SET_RENEWAL, &labels).is_empty(),
            "{:?}",
            r.series()
        );
        let unlabelled: Vec<String> = r
            .series()
            .into_iter()
            .filter(|s| s.starts_with("election_lease_set") && !s.contains("backend=\"memory\""))
            .collect();
        assert!(unlabelled.is_empty(), "without the backend: {unlabelled:?}");
        set.close().await;

        let me = Identity::new("node-e").unwrap();
        let claims = b.clone();
        let custom = LeaseSet::new(PerKeyClaims::new(me.clone(), move |key| {
            claims.claim(key.as_str(), me.as_str())
        }));
        assert_eq!(
            r.gauge(HELD, &[("set", "node-e"), ("backend", "custom")]),
            Some(0.0),
            "{:?}",
            r.series()
        );
        custom.close().await;
    });
}
