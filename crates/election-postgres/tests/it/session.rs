//! The process's one session with the server (ADR 0105) is never held up
//! by one statement for longer than its request's bound: the server ends
//! a statement that waits for a lock at the request timeout, so the other
//! elections of the process keep being served.

use std::time::Duration;

use election_postgres::{PostgresElection, PostgresOptions};
use sqlx::Connection;

use crate::common;

/// A renewal waits for the lease row's lock, which another session (as
/// an application's long fenced transaction would) holds for longer than
/// the lease's validity: the server ends the renewal at the request
/// timeout, so the other election of the same process, on the same
/// session, is read from again within about one request timeout and its
/// leader keeps its term; the blocked term is reported lost at its
/// deadline, not kept. Before, the renewal held the session until the
/// lock was released (sqlx reads a timed-out statement's answer before
/// the next statement): no read of the other election answered for the
/// whole wait, and its leader lost its term too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_waiting_for_a_lock_does_not_stall_the_session() {
    let server = common::server();
    let request = Duration::from_millis(500);
    let options = PostgresOptions::new(Duration::from_secs(6), Duration::from_secs(2))
        .and_then(|o| o.with_request_timeout(request))
        .expect("options");
    // Two parts of one application: one session between them.
    let a_side = PostgresElection::connect(&server.url(), options.clone())
        .await
        .expect("connect");
    let b_side = PostgresElection::connect(&server.url(), options.clone())
        .await
        .expect("connect");
    let a = a_side
        .candidate("a", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let b = b_side
        .candidate("b", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b leads");

    let mut locker = sqlx::PgConnection::connect(&server.url())
        .await
        .expect("a session");
    for step in [
        "BEGIN",
        "SELECT 1 FROM election.leases WHERE name = 'a' FOR UPDATE",
    ] {
        sqlx::query(step).execute(&mut locker).await.expect(step);
    }
    // a's next renewal (within a renewal interval) waits for the lock.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while server
        .sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        .expect("pg_stat_activity")
        == "0"
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a's renewal never waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // b is read from all along, while the lock is held past a's validity.
    let held = tokio::time::Instant::now();
    let until = held + options.validity() + Duration::from_secs(1);
    let mut last = held;
    let mut longest = Duration::ZERO;
    let mut answered = 0;
    while tokio::time::Instant::now() < until {
        if let Ok(Some(leader)) = b_side.leader("b").await {
            assert_eq!(leader.identity.as_str(), "b");
            answered += 1;
            longest = longest.max(last.elapsed());
            last = tokio::time::Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    longest = longest.max(last.elapsed());
    let lost = a.is_lost();
    sqlx::query("ROLLBACK")
        .execute(&mut locker)
        .await
        .expect("rollback");
    assert!(
        longest <= request * 3,
        "while a's renewal waited for the lock, b was not read for {longest:?} \
         ({answered} reads answered in {:?}); the request timeout is {request:?}",
        held.elapsed()
    );
    assert!(!b.is_lost(), "b lost its term while a's renewal waited");
    assert!(
        lost,
        "a's term was kept though no renewal landed for {:?}",
        options.validity() + Duration::from_secs(1)
    );
    b.resign().await.expect("resign");
}

/// Three elections of one process check their terms at the commit point
/// while another session holds their rows' locks (as long fenced
/// transactions would), and a fourth checks its own term right after
/// them: on the process's session, its check is queued behind theirs,
/// each ended by the server at the request timeout, and waits about three
/// request timeouts, then lands within its bound (the lease's validity).
/// Before, a write waited in the session's queue at most one request
/// timeout, the bound of the statement that ran: it found the session
/// busy and failed (and a renewal so queued failed at each retry while
/// its phase matched the blocked ones', until its leader lost its term).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_queued_behind_statements_waiting_for_locks_lands() {
    let server = common::server();
    let request = Duration::from_millis(500);
    let options = PostgresOptions::new(Duration::from_secs(6), Duration::from_secs(2))
        .and_then(|o| o.with_request_timeout(request))
        .expect("options");
    let election = PostgresElection::connect(&server.url(), options.clone())
        .await
        .expect("connect");
    let campaign = async |name: &str| {
        election
            .candidate(name, name)
            .expect("candidate")
            .campaign()
            .await
            .expect("leads")
    };
    let (a1, a2, a3) = (
        campaign("a1").await,
        campaign("a2").await,
        campaign("a3").await,
    );
    let b = campaign("b").await;

    let mut locker = sqlx::PgConnection::connect(&server.url())
        .await
        .expect("a session");
    sqlx::query("BEGIN")
        .execute(&mut locker)
        .await
        .expect("begin");
    sqlx::query("SELECT 1 FROM election.leases WHERE name LIKE 'a_' FOR UPDATE")
        .execute(&mut locker)
        .await
        .expect("lock");
    // Polled first in this order: queued in this order.
    let asked = tokio::time::Instant::now();
    let (blocked1, blocked2, blocked3, confirmed) =
        tokio::join!(a1.confirm(), a2.confirm(), a3.confirm(), async {
            let confirmed = b.confirm().await;
            (confirmed, asked.elapsed())
        });
    let (confirmed, waited) = confirmed;
    sqlx::query("ROLLBACK")
        .execute(&mut locker)
        .await
        .expect("rollback");
    assert!(
        blocked1.is_err() && blocked2.is_err() && blocked3.is_err(),
        "a check of a locked row answered: {blocked1:?} {blocked2:?} {blocked3:?}"
    );
    confirmed.unwrap_or_else(|e| {
        panic!("b's check, queued behind the blocked ones, failed after {waited:?}: {e}")
    });
    assert!(
        waited >= request * 2,
        "b's check waited {waited:?}: the blocked checks were not queued ahead of it"
    );
    assert!(!b.is_lost(), "b lost its term");
    b.resign().await.expect("resign");
}
