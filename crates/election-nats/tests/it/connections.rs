//! Issue 42 (ADR 0106): one connection per process, whatever the number of
//! elections and candidates, counted from the server's `/connz`.

use std::time::Duration;

use election_nats::{NatsElection, NatsOptions};
use nats_testkit::Server;

fn options() -> NatsOptions {
    NatsOptions::new(Duration::from_secs(3))
        .expect("options")
        .single_replica_ok(true)
}

/// Ten elections opened with `connect`, ten candidates campaigning in
/// them (one leads, nine wait on their watches): one connection. Once
/// every election is gone, the connection is closed, and the next opening
/// makes a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_elections_and_ten_candidates_make_one_connection() {
    let server = Server::start().expect("nats-server");
    let mut elections = Vec::new();
    for _ in 0..10 {
        elections.push(
            NatsElection::connect(&server.url(), options())
                .await
                .expect("connect"),
        );
    }
    let leader = elections[0]
        .candidate("jobs", "c0")
        .expect("candidate")
        .campaign()
        .await
        .expect("c0 wins");
    let mut waiting = Vec::new();
    for (i, election) in elections.iter().enumerate().skip(1) {
        let candidate = election
            .candidate("jobs", &format!("c{i}"))
            .expect("candidate");
        waiting.push(tokio::spawn(async move { candidate.campaign().await }));
    }
    // Give every waiter time to make its watch.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        server.connections().expect("/connz"),
        1,
        "ten elections and ten candidates of one process"
    );
    for w in &waiting {
        w.abort();
    }
    leader.resign().await.expect("resign");
    drop(elections);
    // The client closes once the last handle (the aborted campaigns' too)
    // is gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.connections().expect("/connz") != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the shared connection outlived every election"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let again = NatsElection::connect(&server.url(), options())
        .await
        .expect("connect again");
    assert_eq!(server.connections().expect("/connz"), 1);
    drop(again);
}

/// A client the user brings is the user's own: never shared.
#[tokio::test]
async fn a_client_of_ones_own_is_not_shared() {
    let server = Server::start().expect("nats-server");
    let shared = NatsElection::connect(&server.url(), options())
        .await
        .expect("connect");
    let own = async_nats::connect(server.url()).await.expect("connect");
    let mine = NatsElection::with_client(own, options())
        .await
        .expect("open");
    let other = NatsElection::connect(&server.url(), options())
        .await
        .expect("connect");
    assert_eq!(server.connections().expect("/connz"), 2);
    drop((shared, mine, other));
}

/// An election opened on a second runtime of the process gets a client of
/// its own (ADR 0114): the first runtime's client dies with it.
#[test]
fn an_election_on_a_second_runtime_outlives_the_first() {
    let server = Server::start().expect("nats-server");
    let url = server.url();
    election_testkit::runtimes::a_second_runtime_outlives_the_first(|| {
        let url = url.clone();
        async move {
            NatsElection::connect(&url, options())
                .await
                .expect("connect")
        }
    });
}
