//! Wake-ups by LISTEN/NOTIFY: a clean handover (resign or drop) reaches a
//! waiter whose poll interval is an hour, so only the notification can
//! have woken it; a notification for another name does not hand anything
//! over.

use crate::common;

use std::time::Duration;

use election_postgres::PostgresElection;

const HOUR: Duration = Duration::from_secs(3600);

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 30s"))
}

/// A waiting candidate `b` for `jobs`, polling once an hour, behind `a`'s
/// term; returns once `b` is known to be waiting (its first try failed).
async fn waiter(
    e: &PostgresElection,
) -> tokio::task::JoinHandle<election_core::Term<election_postgres::PostgresClaim>> {
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(HOUR)
        .expect("poll");
    assert!(
        b.try_campaign().await.expect("answers").is_none(),
        "a holds jobs"
    );
    tokio::spawn(async move { b.campaign().await.expect("b wins") })
}

/// `a` leads `jobs` on `holder`, and `b` waits behind it on `waiting`
/// (see [`waiter`]).
async fn behind_a(
    holder: &PostgresElection,
    waiting: &PostgresElection,
) -> (
    election_core::Term<election_postgres::PostgresClaim>,
    tokio::task::JoinHandle<election_core::Term<election_postgres::PostgresClaim>>,
) {
    let a = holder
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    (a, waiter(waiting).await)
}

/// Two elections on `server` (two pools, two listeners, as in two
/// processes): `a` leads `jobs` on the first, `b` waits on the second.
async fn across(
    server: &postgres_testkit::Server,
) -> (
    PostgresElection,
    PostgresElection,
    election_core::Term<election_postgres::PostgresClaim>,
    tokio::task::JoinHandle<election_core::Term<election_postgres::PostgresClaim>>,
) {
    let holder_side = common::open(server, common::fast()).await;
    let waiter_side = common::open(server, common::fast()).await;
    let (a, b) = behind_a(&holder_side, &waiter_side).await;
    (holder_side, waiter_side, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resign_wakes_a_waiter_without_a_poll() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let (a, b) = behind_a(&e, &e).await;
    // Let b's listener start (it wakes b once when it does).
    tokio::task::yield_now().await;
    a.resign().await.expect("resign");
    let term = within("b woken by the release", b).await.expect("task");
    assert!(term.epoch() > a.epoch());
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_term_wakes_a_waiter_without_a_poll() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let (a, b) = behind_a(&e, &e).await;
    let epoch = a.epoch();
    drop(a);
    let term = within("b woken by the background release", b)
        .await
        .expect("task");
    assert!(term.epoch() > epoch);
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_in_another_process_are_woken_too() {
    let server = common::server();
    let (holder_side, _waiter_side, a, b) = across(&server).await;
    // Another name's release does not hand `jobs` over.
    let other = holder_side
        .candidate("other", "a")
        .expect("a")
        .campaign()
        .await
        .expect("other");
    other.resign().await.expect("resign other");
    assert!(!b.is_finished() || a.is_lost());
    a.resign().await.expect("resign");
    let term = within("b woken across connections", b).await.expect("task");
    term.resign().await.expect("resign");
}

/// How many times the statements whose text starts with `starts` ran
/// since the last reset (`pg_stat_statements`).
fn calls(server: &postgres_testkit::Server, starts: &str) -> i64 {
    stat(server, "calls", starts)
}

/// The sum of column `what` of `pg_stat_statements` over the statements
/// whose text starts with `starts`.
fn stat(server: &postgres_testkit::Server, what: &str, starts: &str) -> i64 {
    let like = starts.replace('\'', "''");
    server
        .sql(&format!(
            "SELECT coalesce(sum({what}), 0) FROM pg_stat_statements WHERE query LIKE '{like}%'"
        ))
        .expect("pg_stat_statements")
        .parse()
        .expect("a count")
}

/// A server that counts its statements (`pg_stat_statements`).
fn counting_server() -> postgres_testkit::Server {
    let mut server = common::server();
    server
        .sql("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        .expect("preload");
    server.restart().expect("restart");
    server
        .sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .expect("extension");
    server
}

/// A release passes the term to the waiter at the head of the line in
/// its own statement (ADR 0120; before it, ADR 0045: the woken waiter
/// looked and took the row in one statement of its own): on the
/// handover's path, one release and not one statement of the waiter's,
/// neither a read, nor a claim, nor a look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_waiter_is_passed_the_term_without_a_statement_of_its_own() {
    let server = counting_server();
    let (_holder_side, _waiter_side, a, b) = across(&server).await;
    // b's listener wakes it once when it starts: wait for that look, so
    // that nothing of b's but the handover follows the reset.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while calls(&server, "WITH take AS") == 0 {
        assert!(std::time::Instant::now() < deadline, "b never looked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // And in line.
    while server
        .sql("SELECT count(*) FROM election.waiters")
        .expect("waiters")
        != "1"
    {
        assert!(std::time::Instant::now() < deadline, "b never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server
        .sql("SELECT pg_stat_statements_reset()")
        .expect("reset");
    a.resign().await.expect("resign");
    let term = within("b passed the term by the release", b)
        .await
        .expect("task");
    assert!(term.epoch() > a.epoch());
    let (reads, claimed, looks, releases) = (
        calls(&server, "SELECT k.name, l.holder"),
        calls(&server, "WITH t AS"),
        calls(&server, "WITH take AS"),
        calls(&server, "SELECT \"election\".release_one"),
    );
    assert_eq!(
        (reads, claimed, looks, releases),
        (0, 0, 0, 1),
        "on the handover's path: reads, claims, looks, releases"
    );
    term.resign().await.expect("resign");
}

/// Options of the lost-race tests: requests bounded by 20 s, since the
/// look waits for the other session's lock while the test sees it wait
/// (a `psql` per look, slow on a loaded machine) and commits.
fn patient() -> election_postgres::PostgresOptions {
    election_postgres::PostgresOptions::new(Duration::from_secs(60), Duration::from_secs(20))
        .and_then(|o| o.with_request_timeout(Duration::from_secs(20)))
        .expect("options")
}

/// A released row of `released` (epoch 5), as a resign leaves it.
fn released_row(server: &postgres_testkit::Server) {
    server
        .sql(
            "INSERT INTO election.leases (name, holder, nonce, epoch, version, ttl_ms)
               VALUES ('released', NULL, NULL, 5, 3, 1000);
             INSERT INTO election.epochs (name, epoch, ttl_ms) VALUES ('released', 5, 1000)",
        )
        .expect("a released row");
}

/// Another session that runs `win` in a transaction it leaves open: it
/// holds the row's lock until the caller commits.
async fn winning(server: &postgres_testkit::Server, win: &[&'static str]) -> sqlx::PgConnection {
    use sqlx::Connection;
    let mut other = sqlx::PgConnection::connect(&server.url())
        .await
        .expect("a session");
    for step in std::iter::once("BEGIN").chain(win.iter().copied()) {
        sqlx::query(step).execute(&mut other).await.expect(step);
    }
    other
}

/// Waits (bounded) until a session of `server` waits for a lock (the
/// look, for the winner's), then commits the winner's transaction.
async fn commit_once_the_look_waits(
    server: &postgres_testkit::Server,
    mut other: sqlx::PgConnection,
    name: &str,
) {
    assert!(
        server
            .one_session_waits_for_a_lock(Duration::from_secs(30))
            .await
            .expect("pg_stat_activity"),
        "{name}: the look never waited for the winner's lock"
    );
    sqlx::query("COMMIT")
        .execute(&mut other)
        .await
        .expect("commit");
}

/// A look that loses the race for a released (or never-held) name to
/// another winner sends no claim on what its snapshot showed (ADR 0093):
/// the look's snapshot shows the name free, its take waits for the
/// winner's lock and then takes nothing, and a claim conditional on that
/// snapshot could only fail. In a 3-process handover that claim was the
/// loser's second statement, and its pool opened a connection for the
/// third (the look after the winner's notification) on the winner's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_that_lost_the_race_for_a_free_name_sends_no_claim() {
    use election_core::{Claim, End};
    let server = counting_server();
    let e = common::open(&server, patient()).await;
    released_row(&server);
    for (name, win) in [
        (
            "released",
            "UPDATE election.leases SET holder = 'intruder', nonce = 0,
               epoch = nextval('election.epoch_seq'), version = version + 1
             WHERE name = 'released'",
        ),
        (
            "fresh",
            "INSERT INTO election.leases (name, holder, nonce, epoch, version, ttl_ms)
               VALUES ('fresh', 'intruder', 0, nextval('election.epoch_seq'), 1, 1000)",
        ),
    ] {
        // Another session wins the name and holds its lock, uncommitted.
        let other = winning(&server, &[win]).await;
        server
            .sql("SELECT pg_stat_statements_reset()")
            .expect("reset");
        let claim = e.claim(name, "c").expect("c");
        let look = tokio::spawn(async move {
            let mut attempt = claim.open().await.expect("open");
            let looked = claim.try_claim(&mut attempt).await;
            claim.close(attempt, End::NeverWon);
            looked
        });
        commit_once_the_look_waits(&server, other, name).await;
        let looked = within("the look", look).await.expect("task");
        assert!(
            matches!(looked, Ok(None)),
            "{name}: the look after another's win: {looked:?}"
        );
        assert_eq!(
            (calls(&server, "WITH take AS"), calls(&server, "WITH t AS")),
            (1, 0),
            "{name}: looks and claims sent"
        );
    }
}

/// After a look that lost the race for a free name, the look that a
/// wake-up right after it brings waits until 20 ms after the lost look
/// (ADR 0096). Before the queue (ADR 0108) that wake-up was the winner's
/// own notification, which comes as the winner starts its term, and a
/// look at once ran beside that start; here it is the wake-up of every
/// subscriber that the process's session sends once it listens on its
/// own channel, at the loser's first wait. Before ADR 0096, the wait
/// returned as soon as the wake-up came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_look_after_a_lost_race_waits_out_the_winners_start() {
    use election_core::{Claim, End};
    let server = common::server();
    // A process of its own: its session listens first at the loser's
    // wait.
    let e = crate::race::election(&server.url(), "loser", patient()).await;
    released_row(&server);
    // Another session wins the name, announces it as a win does, and
    // holds its lock, uncommitted.
    let other = winning(
        &server,
        &[
            "UPDATE election.leases SET holder = 'intruder', nonce = 0,
               epoch = nextval('election.epoch_seq'), version = version + 1
             WHERE name = 'released'",
            "SELECT pg_notify('election:election', 'released')",
        ],
    )
    .await;
    let claim = e.claim("released", "c").expect("c");
    let look = tokio::spawn(async move {
        let mut attempt = claim.open().await.expect("open");
        let looked = claim.try_claim(&mut attempt).await;
        let after = std::time::Instant::now();
        claim.wait(&mut attempt, HOUR).await.expect("wait");
        let waited = after.elapsed();
        claim.close(attempt, End::NeverWon);
        (looked, waited)
    });
    commit_once_the_look_waits(&server, other, "released").await;
    // Woken at once (the poll is an hour), but not before 20 ms.
    let (looked, waited) = within("the look and the wait after it", look)
        .await
        .expect("task");
    assert!(
        matches!(looked, Ok(None)),
        "the look after another's win: {looked:?}"
    );
    assert!(
        waited >= Duration::from_millis(19),
        "the wait after the lost race returned {waited:?} after the look"
    );
}

/// Whether `e`'s process listens: the channels its session with the
/// server listens on, asked through that session (ADR 0105: the session
/// runs statements between its `LISTEN`s, so `pg_stat_activity` no longer
/// tells a listening session by its last statement). A waiter in the
/// queue listens on its session's own channel (ADR 0108), observers and
/// lease sets on the election channel.
async fn listening(e: &PostgresElection) -> bool {
    let channels = e.listening_channels().await.expect("the channels");
    assert!(
        channels
            .iter()
            .all(|c| c == "election:election" || c.starts_with("election:wake:")),
        "listens on {channels:?}"
    );
    !channels.is_empty()
}

/// Waits (bounded) until `e`'s process listens, or no longer does.
async fn until_listening(e: &PostgresElection, listens: bool, why: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while listening(e).await != listens {
        assert!(
            std::time::Instant::now() < deadline,
            "{why}: the process {} on the election channel",
            if listens {
                "never listened"
            } else {
                "still listens"
            }
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A process that won and waits for nothing else stops listening during
/// its term (ADR 0071; since ADR 0105 an `UNLISTEN` on its session, which
/// stays for the term's renewals), so nothing of the listener is on the
/// path of the handover that ends the term; its next wait listens again
/// and is woken by a release, not by its hour-long poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_closes_its_listener_and_a_later_wait_listens_again() {
    let server = common::server();
    let (holder_side, _waiter_side, a, b) = across(&server).await;
    until_listening(&holder_side, true, "b waits").await;
    a.resign().await.expect("resign");
    let b = within("b woken by the release", b).await.expect("task");
    until_listening(&holder_side, false, "b leads and nothing else waits").await;
    let c = holder_side
        .candidate("jobs", "c")
        .expect("c")
        .with_poll_interval(HOUR)
        .expect("poll");
    assert!(
        c.try_campaign().await.expect("answers").is_none(),
        "b holds jobs"
    );
    let c = tokio::spawn(async move { c.campaign().await.expect("c wins") });
    until_listening(&holder_side, true, "c waits").await;
    b.resign().await.expect("resign");
    let c = within("c woken by the release", c).await.expect("task");
    assert!(c.epoch() > b.epoch());
    c.resign().await.expect("resign");
}
