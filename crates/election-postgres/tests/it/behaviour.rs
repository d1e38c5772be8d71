//! The single claim on a real server: epochs from the sequence never
//! repeat (also after rows are deleted by hand), a deleted row counts as
//! held for a full TTL, wall-clock jumps change nothing, exhausted epochs
//! and an unreachable server are typed answers.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use election_core::{ConfigError, Epoch, Error};
use election_postgres::{Clock, PostgresElection};
use tokio::time::Instant;

/// A clock whose wall clock is whatever the test sets (the monotonic clock
/// is the system's).
#[derive(Debug, Default)]
struct WallClock {
    wall_ms: AtomicI64,
}

impl Clock for WallClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_unix_ms(&self) -> i64 {
        self.wall_ms.load(Ordering::SeqCst)
    }
}

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 30s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_never_repeat_after_rows_are_deleted_by_hand() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e.candidate("jobs", "a").expect("candidate");
    let first = a.campaign().await.expect("elected");
    let first_epoch = first.epoch();
    assert_eq!(first_epoch, Epoch::FIRST);
    first.resign().await.expect("resign");
    // Both the lease row and its epoch record deleted by hand (the epoch
    // record only past its guard triggers, as the table's owner can): the
    // sequence still hands out a higher epoch.
    server
        .sql(
            "ALTER TABLE election.epochs DISABLE TRIGGER USER; \
             DELETE FROM election.leases; DELETE FROM election.epochs; \
             ALTER TABLE election.epochs ENABLE TRIGGER USER",
        )
        .expect("delete");
    let second = a.campaign().await.expect("elected again");
    assert!(
        second.epoch() > first_epoch,
        "{} after {first_epoch}",
        second.epoch()
    );
    second.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_row_counts_as_held_until_its_holder_has_lost() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let holder = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    server
        .sql("DELETE FROM election.leases")
        .expect("delete the row");
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(Duration::from_millis(20))
        .expect("poll");
    let term = within("b wins after the TTL", b.campaign())
        .await
        .expect("b wins");
    // The holder lost at its next renewal, before b could win.
    assert!(holder.is_lost(), "b won while a still believed it led");
    assert!(term.epoch() > holder.epoch());
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wall_clock_jumps_on_holder_and_contender_make_no_second_leader() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let holder_clock = Arc::new(WallClock::default());
    let contender_clock = Arc::new(WallClock::default());
    holder_clock
        .wall_ms
        .store(4_102_444_800_000, Ordering::SeqCst); // 2100
    contender_clock.wall_ms.store(0, Ordering::SeqCst); // 1970
    let holder = e
        .clone()
        .with_clock(holder_clock.clone())
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    let contender = e
        .clone()
        .with_clock(contender_clock.clone())
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(Duration::from_millis(20))
        .expect("poll");
    // Several TTLs of jumps both ways while the holder renews: the
    // contender never wins.
    let until = Instant::now() + common::fast().ttl() * 4;
    let jumps = [1, -3, 10, -30, 365, -1000];
    let mut i = 0;
    while Instant::now() < until {
        let jump = jumps[i % jumps.len()] * 86_400_000;
        i += 1;
        holder_clock.wall_ms.fetch_add(-jump, Ordering::SeqCst);
        contender_clock.wall_ms.fetch_add(jump, Ordering::SeqCst);
        assert!(
            contender.try_campaign().await.expect("answers").is_none(),
            "the contender won while the holder renews"
        );
        assert!(!holder.is_lost());
    }
    // The leader's `since` is the holder's (jumped) wall clock: display only.
    let leader = e.leader("jobs").await.expect("read").expect("a leads");
    assert_eq!(leader.identity.as_str(), "a");
    holder.resign().await.expect("resign");
    let term = within("b wins after the release", contender.campaign())
        .await
        .expect("b");
    assert!(term.epoch() > holder.epoch());
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_epochs_are_a_configuration_error() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    server
        .sql("ALTER SEQUENCE election.epoch_seq RESTART WITH 9223372036854775807")
        .expect("near the end");
    let last = e
        .candidate("a", "x")
        .expect("a")
        .campaign()
        .await
        .expect("MAX");
    assert_eq!(last.epoch(), Epoch::MAX);
    last.resign().await.expect("resign");
    // The name's own floor is past MAX: refused before anything is sent.
    let again = e.candidate("a", "x").expect("a").try_campaign().await;
    assert!(
        matches!(again, Err(Error::Config(ConfigError::EpochExhausted))),
        "{again:?}"
    );
    // Another name: the sequence itself is used up.
    let other = e.candidate("b", "x").expect("b").try_campaign().await;
    assert!(
        matches!(other, Err(Error::Config(ConfigError::EpochExhausted))),
        "{other:?}"
    );
    assert_eq!(
        server
            .sql("SELECT count(*) FROM election.leases WHERE name = 'b'")
            .expect("read"),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_unavailable_for_a_campaign() {
    let mut server = common::server();
    let e: PostgresElection = common::open(&server, common::fast()).await;
    let c = e.candidate("jobs", "a").expect("a");
    server.stop().expect("stop");
    // A single try says why (ADR 0064: it was "not now", `Ok(None)`, as
    // if another candidate held the name); a campaign rides it out.
    assert!(matches!(
        c.try_campaign().await,
        Err(election_core::Error::Unavailable { .. })
    ));
    assert!(matches!(
        e.leader("jobs").await,
        Err(Error::Unavailable { .. })
    ));
    server.restart().expect("restart");
    let term = within("wins once the server is back", c.campaign())
        .await
        .expect("a");
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_renewals_hang_loses_at_its_deadline() {
    let mut server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    // Renewals sent to a stopped server never answer: unknown outcomes,
    // not counted; the term is lost at its deadline.
    server.pause().expect("pause");
    within("a loses while the server is stopped", a.lost()).await;
    server.resume().expect("resume");
    let b = e.candidate("jobs", "b").expect("b");
    let term = within("b wins once the lease aged out", b.campaign())
        .await
        .expect("b");
    assert!(term.epoch() > a.epoch());
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_do_not_hand_a_live_term_over() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    let b = common::open(&server, common::fast())
        .await
        .candidate("jobs", "b")
        .expect("b");
    let until = Instant::now() + common::fast().ttl() * 3;
    while Instant::now() < until {
        server
            .sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'election-postgres' AND pid <> pg_backend_pid()")
            .expect("terminate");
        let tried = match b.try_campaign().await {
            Ok(tried) => tried,
            // A claim statement on a connection just terminated.
            Err(Error::Unavailable { .. } | Error::OutcomeUnknown { .. }) => None,
            Err(e) => panic!("{e:?}"),
        };
        if let Some(term) = tried {
            // Only after a's term ended (its renewals failed to its
            // deadline): never two live terms.
            assert!(a.is_lost(), "b won while a's term was live");
            assert!(term.epoch() > a.epoch());
            term.resign().await.expect("resign");
            return;
        }
    }
}

/// Closes `e` and checks that the close came no sooner than the grace
/// after `released_from` (when the release began: `what`), and closed the
/// pool.
async fn close_after_the_grace(e: &PostgresElection, released_from: Instant, what: &str) {
    within("close", e.close()).await;
    let closed = released_from.elapsed();
    assert!(
        closed >= election_postgres::CLOSE_GRACE,
        "closed {closed:?} after {what} began"
    );
    assert!(e.pool().is_closed(), "the pool is closed after the grace");
}

/// A close right after a resign keeps the pool open for the grace (ADR
/// 0086): the server's processes of this pool end after a successor's take
/// of the released row, not during it. Then the pool is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_right_after_a_resign_waits_the_grace() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e.candidate("grace", "a").expect("candidate");
    let term = within("elected", a.campaign()).await.expect("elected");
    let before = Instant::now();
    within("resign", term.resign()).await.expect("resign");
    close_after_the_grace(&e, before, "the resign").await;
}

/// The same after a lease set's close, which releases its rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_right_after_a_lease_set_released_waits_the_grace() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let set = e.lease_set("node-a").await.expect("lease set");
    assert!(within("ask", set.ask("shard-1")).await.expect("ask"));
    let before = Instant::now();
    within("set closed", set.close()).await;
    close_after_the_grace(&e, before, "the lease set's close").await;
}
