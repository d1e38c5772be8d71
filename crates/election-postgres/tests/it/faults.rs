//! Faults against real PostgreSQL servers while two candidates campaign
//! again and again (see `common/race.rs`): the server restarted inside
//! and past the TTL, killed with SIGKILL and restarted, frozen with
//! SIGSTOP past the TTL, the holder's connections terminated, the lease
//! row and epoch record deleted by hand. After each: never two live terms
//! at once, epochs strictly growing, no fenced write refused while its term
//! was live, and a leader again within a generous bound.

use crate::common;
use crate::race;

use std::time::Duration;

use election_core::Lease;
use election_postgres::PostgresOptions;
use race::Race;
use tokio::time::Instant;

/// TTL 2 s, renewal every 500 ms, requests bounded at 400 ms: validity
/// 1.8 s.
fn options() -> PostgresOptions {
    PostgresOptions::new(Duration::from_secs(2), Duration::from_millis(500))
        .and_then(|o| o.with_request_timeout(Duration::from_millis(400)))
        .expect("options")
}

/// How long past the TTL a new leader may take (restarts, reconnects,
/// polls on a loaded machine): generous, not a goal.
const SLACK: Duration = Duration::from_secs(30);

async fn race_of_two(server: &postgres_testkit::Server) -> Race {
    let url = server.url();
    Race::start(
        server,
        vec![
            ("a", race::election(&url, "cand-a", options()).await),
            ("b", race::election(&url, "cand-b", options()).await),
        ],
    )
    .await
}

/// Asserts that the terms recorded ran one after another with growing
/// epochs, and that the resource saw them in that order.
fn check(server: &postgres_testkit::Server, terms: &[race::TermRecord]) {
    let mut sorted = terms.to_vec();
    sorted.sort_by_key(|t| t.began);
    for w in sorted.windows(2) {
        assert!(w[1].epoch > w[0].epoch, "epochs went back: {sorted:#?}");
    }
    race::ledger_epochs_never_go_down(server);
    assert!(
        terms.iter().any(|t| t.fenced_writes > 0),
        "no term wrote to the resource: {terms:#?}"
    );
    eprintln!(
        "{} terms: {:?}",
        terms.len(),
        sorted
            .iter()
            .map(|t| (t.who.as_str(), t.epoch, t.fenced_writes))
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_restarted_inside_and_past_the_ttl_and_killed() {
    let mut server = common::server();
    let race = race_of_two(&server).await;
    let (_, first) = race.some_leader(SLACK).await;
    race.leader_wrote(SLACK).await;

    // A short outage: a fast shutdown and a start, usually within the
    // validity. The leader may survive it or lose; either way a leader
    // again, and never two.
    server.stop().expect("stop");
    server.restart().expect("restart");
    let (_, after_short) = race.some_leader(options().ttl() + SLACK).await;
    assert!(after_short >= first);

    // An outage past the TTL: the holder loses at its deadline (its
    // renewals fail), a successor comes only after the restart, with a
    // higher epoch.
    server.stop().expect("stop");
    let stopped = Instant::now();
    let lost = race.all_lost(options().validity() + SLACK).await;
    eprintln!("every term lost {:?} after the stop", lost - stopped);
    assert!(race.leader().is_none(), "a leader while the server is down");
    server.restart().expect("restart");
    let restarted = Instant::now();
    let (_, after_long) = race.leader_after(restarted, options().ttl() + SLACK).await;
    assert!(after_long > after_short);
    eprintln!(
        "a leader again {:?} after the restart",
        Instant::now() - restarted
    );

    // A crash: SIGKILL to every server process, then crash recovery.
    server.kill().expect("kill");
    let killed = Instant::now();
    race.all_lost(options().validity() + SLACK).await;
    server.restart().expect("restart after the crash");
    let (_, after_crash) = race.leader_after(killed, options().ttl() + SLACK).await;
    assert!(after_crash > after_long, "the epoch survives the crash");

    race.leader_wrote(SLACK).await;
    let terms = race.finish().await;
    check(&server, &terms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_frozen_past_the_ttl() {
    let mut server = common::server();
    let race = race_of_two(&server).await;
    let (_, first) = race.some_leader(SLACK).await;
    race.leader_wrote(SLACK).await;
    server.pause().expect("SIGSTOP");
    let paused = Instant::now();
    // Nothing answers: the holder's renewals time out (unknown outcome)
    // and it loses at its deadline.
    let lost = race.all_lost(options().validity() + SLACK).await;
    eprintln!("every term lost {:?} after the freeze", lost - paused);
    // Past the TTL, still frozen: nobody leads.
    tokio::time::sleep(options().ttl()).await;
    assert!(
        race.leader().is_none(),
        "a leader while the server is frozen"
    );
    server.resume().expect("SIGCONT");
    let resumed = Instant::now();
    let (_, next) = race.leader_after(resumed, options().ttl() + SLACK).await;
    assert!(next > first);
    race.leader_wrote(SLACK).await;
    let terms = race.finish().await;
    check(&server, &terms);
}

/// The backends whose `application_name` is `name`, terminated; how many.
fn terminate(server: &postgres_testkit::Server, name: &str) -> usize {
    server
        .sql(&format!(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}') t"
        ))
        .expect("terminate")
        .parse()
        .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holders_connections_terminated() {
    let server = common::server();
    let race = race_of_two(&server).await;
    for _ in 0..3 {
        let (who, epoch) = race.some_leader(SLACK).await;
        let n = terminate(&server, &format!("cand-{who}"));
        assert!(n >= 1, "the holder {who} had no connection");
        // The holder reconnects and renews, or loses at its deadline and
        // someone wins after the TTL: a leader again either way.
        let (_, now) = race.some_leader(options().ttl() + SLACK).await;
        assert!(now >= epoch);
        // A renewal of the surviving or new term sent after the fault
        // lands.
        race.renewed_after(Instant::now(), options().ttl() + SLACK)
            .await;
    }
    race.leader_wrote(SLACK).await;
    let terms = race.finish().await;
    check(&server, &terms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_row_deleted_under_a_holder_again_and_again() {
    let server = common::server();
    let race = race_of_two(&server).await;
    let mut highest = 0;
    for _ in 0..3 {
        let (_, epoch) = race.some_leader(SLACK).await;
        highest = highest.max(epoch);
        let deleted = Instant::now();
        server
            .sql("DELETE FROM election.leases")
            .expect("delete by hand");
        // The holder finds its row gone at its next renewal and loses;
        // a contender treats the vanished row as held for a full TTL.
        let (_, next) = race.leader_after(deleted, options().ttl() + SLACK).await;
        assert!(next > highest, "epoch {next} after {highest}");
        highest = next;
    }
    race.leader_wrote(SLACK).await;
    let terms = race.finish().await;
    check(&server, &terms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_contender_after_the_lease_row_was_deleted_waits_a_ttl() {
    let server = common::server();
    let a = race::election(&server.url(), "cand-a", options())
        .await
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    server
        .sql("DELETE FROM election.leases")
        .expect("delete the row by hand");
    // A contender that never saw the row: the epoch record says someone
    // held it, so the vanished row counts as held for a full TTL.
    let c = race::election(&server.url(), "cand-c", options())
        .await
        .candidate("jobs", "c")
        .expect("c")
        .with_poll_interval(Duration::from_millis(20))
        .expect("poll");
    let lease = a.lease();
    let (term, a_lost_at_win) = tokio::time::timeout(SLACK, async {
        let t = c.campaign().await.expect("c wins");
        let lost = lease.is_lost();
        (t, lost)
    })
    .await
    .expect("c wins within the bound");
    assert!(a_lost_at_win, "c won while a still believed it led");
    assert!(term.epoch() > a.epoch());
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holders_connection_black_holed_while_wall_clocks_jump() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use fencing::Token;

    let server = common::server();
    race::create_ledger(&server);
    let proxy = postgres_testkit::Proxy::start(server.port()).expect("proxy");
    let through_proxy = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port());
    let holder_wall = Arc::new(race::JumpingWall::default());
    let contender_wall = Arc::new(race::JumpingWall::default());
    let holder_e = race::election(&through_proxy, "holder", options())
        .await
        .with_clock(holder_wall.clone());
    let contender_e = race::election(&server.url(), "contender", options())
        .await
        .with_clock(contender_wall.clone());
    let a = holder_e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    // The holder's resource is reachable directly: cut off from the
    // election, it could still write, and the fence is what stops it.
    let res_a = race::Resource::open(&server, "a").await;
    assert!(
        res_a
            .write(Token::issue(&a).expect("token"), "a")
            .await
            .expect("write")
    );
    let b = contender_e
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(Duration::from_millis(50))
        .expect("poll");
    assert!(b.try_campaign().await.expect("answers").is_none());

    proxy.black_hole(true);
    // No renewal sent from now on lands; one in flight may land but its
    // answer is held back, so the holder's validity no longer moves.
    let last_sent = a.valid_until().expect("validity") - options().validity();
    let lease = a.lease();
    let contender = tokio::spawn(async move {
        let t = b.campaign().await.expect("b wins");
        let a_lost = lease.is_lost();
        (t, Instant::now(), a_lost)
    });
    // Wall clocks jump both ways by days while the contender waits.
    let mut jumps = 0i64;
    while !contender.is_finished() {
        jumps += 1;
        let day = 86_400_000;
        contender_wall
            .wall_ms
            .fetch_add(day * jumps, Ordering::SeqCst);
        holder_wall
            .wall_ms
            .fetch_add(-day * jumps, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            Instant::now() < last_sent + options().ttl() + SLACK,
            "b did not win within the bound"
        );
    }
    let (term, won_at, a_lost_at_win) = contender.await.expect("join");
    assert!(a.is_lost(), "a never lost its term");
    // Its renewals timed out (unknown outcomes): lost at its deadline, not
    // told by the server.
    let loss = a.loss().expect("lost");
    assert!(
        matches!(loss.reason, election_core::LossReason::Expired),
        "{loss:?}"
    );
    assert!(a_lost_at_win, "b won while a still believed it led");
    assert!(
        won_at >= last_sent + options().ttl(),
        "b won {:?} after a's last renewal was sent, within the TTL",
        won_at - last_sent
    );
    assert!(term.epoch() > a.epoch());
    let res_b = race::Resource::open(&server, "b").await;
    assert!(
        res_b
            .write(Token::issue(&term).expect("token"), "b")
            .await
            .expect("write")
    );

    // Healed: a's held-back renewals reach the server and change nothing;
    // b goes on renewing; a never acts again, and its old token is refused.
    proxy.black_hole(false);
    let healed = Instant::now();
    tokio::time::timeout(SLACK, async {
        while term.valid_until().expect("validity") < healed + options().validity() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("b renews after the heal");
    assert!(!term.is_lost());
    assert!(a.is_lost());
    assert!(Token::issue(&a).is_err(), "a token from a lost term");
    assert!(
        !res_a
            .write(Token::from_epoch(a.epoch()), "a")
            .await
            .expect("write"),
        "the deposed holder's write went through"
    );
    let leader = holder_e
        .leader("jobs")
        .await
        .expect("read through the healed proxy")
        .expect("b leads");
    assert_eq!(leader.identity.as_str(), "b");
    assert_eq!(leader.epoch, term.epoch());
    term.confirm()
        .await
        .expect("b still holds at its commit point");
    term.resign().await.expect("resign");
    race::ledger_epochs_never_go_down(&server);
}

/// Found by this suite: with the epoch record deleted by hand *as well as*
/// the lease row, nothing in the database said the name was ever held, so
/// a contender that never saw the row claimed it at once while the holder
/// still believed it led (until its next renewal). The epoch records now
/// refuse deletion in the database (triggers): the whole `DELETE` fails,
/// the row stays, and the contender is not elected while the holder
/// leads. Once the holder resigns, it is, with a higher epoch, and the
/// fence refuses the old holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_both_records_under_a_holder_never_elects_a_second_leader() {
    use fencing::Token;

    let server = common::server();
    race::create_ledger(&server);
    let a = race::election(&server.url(), "cand-a", options())
        .await
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a wins");
    let res_a = race::Resource::open(&server, "a").await;
    let a_token = Token::issue(&a).expect("token");
    assert!(res_a.write(a_token, "a").await.expect("write"));
    let c = race::election(&server.url(), "cand-c", options())
        .await
        .candidate("jobs", "c")
        .expect("c")
        .with_poll_interval(Duration::from_millis(20))
        .expect("poll");
    let deleted = server.sql("DELETE FROM election.leases; DELETE FROM election.epochs");
    // Two full TTLs in which a renews: c must not be elected beside it.
    let early = tokio::time::timeout(options().ttl() * 2, c.campaign()).await;
    if let Ok(won) = early {
        panic!(
            "c was elected while a still led (a lost: {}; the delete: {deleted:?}): {won:?}",
            a.is_lost()
        );
    }
    let err = deleted.expect_err("deleting the epoch records is refused");
    assert!(err.to_string().contains("refused"), "{err}");
    if a.is_lost() {
        panic!(
            "a lost its term though nothing was deleted: {:?}",
            a.lost().await
        );
    }
    a.resign().await.expect("a resigns");
    let term = tokio::time::timeout(SLACK, c.campaign())
        .await
        .expect("c wins within the bound once a resigned")
        .expect("c wins");
    assert!(term.epoch() > a.epoch());
    let res_c = race::Resource::open(&server, "c").await;
    assert!(
        res_c
            .write(Token::issue(&term).expect("token"), "c")
            .await
            .expect("write")
    );
    assert!(
        !res_a.write(a_token, "a").await.expect("write"),
        "the deposed holder's write went through"
    );
    term.resign().await.expect("resign");
    race::ledger_epochs_never_go_down(&server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_cut_by_the_network_again_and_again() {
    let server = common::server();
    let proxy = postgres_testkit::Proxy::start(server.port()).expect("proxy");
    let through_proxy = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port());
    // a reaches the server through the proxy, b directly.
    let race = Race::start(
        &server,
        vec![
            (
                "a",
                race::election(&through_proxy, "cand-a", options()).await,
            ),
            (
                "b",
                race::election(&server.url(), "cand-b", options()).await,
            ),
        ],
    )
    .await;
    for _ in 0..4 {
        race.some_leader(SLACK).await;
        // Every connection through the proxy reset, in the middle of
        // whatever it was doing (a claim, a renewal, a notification).
        proxy.cut();
        race.some_leader(options().ttl() + SLACK).await;
        race.renewed_after(Instant::now(), options().ttl() + SLACK)
            .await;
    }
    race.leader_wrote(SLACK).await;
    let terms = race.finish().await;
    check(&server, &terms);
}
