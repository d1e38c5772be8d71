//! Faults against real PostgreSQL servers while two candidates campaign
//! again and again (see `common/race.rs`): the server restarted inside
//! and past the TTL, killed with SIGKILL and restarted, frozen with
//! SIGSTOP past the TTL, the holder's connections terminated, the lease
//! row and epoch record deleted by hand. After each: never two live terms
//! at once, epochs strictly growing, no fenced write refused while its term
//! was live, and a leader again within a generous bound.

mod common;
#[path = "common/race.rs"]
mod race;

use std::time::Duration;

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
async fn the_lease_row_and_epoch_record_deleted_under_a_holder() {
    let server = common::server();
    let race = race_of_two(&server).await;
    let mut highest = 0;
    for _ in 0..3 {
        let (_, epoch) = race.some_leader(SLACK).await;
        highest = highest.max(epoch);
        let deleted = Instant::now();
        server
            .sql("DELETE FROM election.leases; DELETE FROM election.epochs")
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
