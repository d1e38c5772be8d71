//! Lease-set heartbeats (ADR 0110): a lease set whose holder stopped renewing is
//! taken over a TTL after the contender's first sight of the holder's last
//! heartbeat, not a TTL after its first look at each key row; never while the
//! holder still renews, and never by a heartbeat deleted by hand.

use std::time::Duration;

use election_core::Identity;
use election_sqlite::{SqliteElection, SqliteKeyedClaims, SqliteOptions};
use election_testkit::heartbeats::{self, HandClock, HeartbeatCase};

const TTL: Duration = Duration::from_secs(3);

/// Two sets over one database, on one hand-moved clock; the database's
/// directory and an election over it, for a look by hand.
async fn case() -> (
    tempfile::TempDir,
    SqliteElection,
    HeartbeatCase<SqliteKeyedClaims>,
) {
    let dir = tempfile::tempdir().expect("dir");
    let clock = HandClock::new();
    let options = SqliteOptions::new(TTL, Duration::from_secs(1)).expect("options");
    let mut opened = Vec::new();
    for _ in 0..2 {
        let e = SqliteElection::open(dir.path().join("app.db"), options)
            .await
            .expect("open");
        opened.push(e.with_clock(clock.clone()));
    }
    let a = SqliteKeyedClaims::new(&opened[0], Identity::new("node-a").unwrap());
    let b = SqliteKeyedClaims::new(&opened[1], Identity::new("node-b").unwrap());
    let case = HeartbeatCase {
        a,
        b,
        advance: clock.advancer(),
        ttl: TTL,
    };
    (dir, opened.swap_remove(0), case)
}

#[tokio::test]
async fn a_set_that_stopped_renewing_is_taken_over_a_ttl_after_its_last_heartbeat() {
    let (_dir, _e, case) = case().await;
    heartbeats::taken_over_a_ttl_after_the_last_heartbeat(case).await;
}

#[tokio::test]
async fn a_set_that_renews_is_never_taken_over_by_heartbeat() {
    let (_dir, _e, case) = case().await;
    heartbeats::never_taken_over_while_renewing(case).await;
}

/// The heartbeat deleted between `b`'s last listing and its look: the
/// look finds no heartbeat, and the rows are held for a full TTL of `b`'s
/// own.
#[tokio::test]
async fn a_heartbeat_deleted_by_hand_takes_nothing_over() {
    let (_dir, e, case) = case().await;
    let id = case.a.state().heartbeat();
    heartbeats::deleted_by_hand_takes_nothing_over(case, id, async |id| {
        sqlx::query("DELETE FROM election_heartbeats WHERE id = ?1")
            .bind(id)
            .execute(e.pool())
            .await
            .expect("delete");
    })
    .await;
}
