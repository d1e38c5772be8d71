//! One gRPC channel per process (issue 44): every election opened to the
//! same endpoints with the same credentials and timings shares one
//! connection, as NATS (ADR 0106) and PostgreSQL (ADR 0105) do.

use std::collections::HashSet;

use etcd_testkit::Member;

use crate::common::{fast, prefix, within};

/// This process's established TCP connections to `port`, read from
/// Linux's `/proc`: the socket inodes among its open files, matched
/// against `/proc/self/net/tcp` and `tcp6` (state `01`, established).
fn connections_to(port: u16) -> usize {
    let inodes: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_str()?;
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let remote_port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next()?, 16).ok();
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/self/net/{t}")).ok())
        .map(|text| {
            text.lines()
                .skip(1)
                .filter(|line| {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    f.len() > 9
                        && remote_port(f[2]) == Some(port)
                        && f[3] == "01"
                        && inodes.contains(f[9])
                })
                .count()
        })
        .sum()
}

/// Ten elections in one process, each used (a claim won, a leader read),
/// hold one connection to the member; one opened after all of them were
/// dropped connects afresh and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_elections_in_one_process_share_one_connection() {
    // A member of its own: no other test of this process connects to it.
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let base = prefix("channels");
    let mut elections = Vec::new();
    let mut terms = Vec::new();
    for i in 0..10 {
        let election = within(
            "connect",
            election_etcd::EtcdElection::connect(&endpoint, fast(&base)),
        )
        .await
        .expect("connect");
        let name = format!("job-{i}");
        let term = within(
            "campaign",
            election
                .candidate(&name, "me")
                .expect("candidate")
                .campaign(),
        )
        .await
        .expect("campaign");
        let leader = within("leader", election.leader(&name))
            .await
            .expect("leader");
        assert_eq!(leader.map(|l| l.epoch), Some(term.epoch()), "{name}");
        terms.push(term);
        elections.push(election);
    }
    assert_eq!(
        connections_to(member.client_port()),
        1,
        "ten elections to one member: one connection"
    );
    for term in terms {
        within("resign", term.resign()).await.expect("resign");
    }
    drop(elections);
    let again = within(
        "connect again",
        election_etcd::EtcdElection::connect(&endpoint, fast(&base)),
    )
    .await
    .expect("a new channel after the last election went");
    assert!(
        within("leader", again.leader("job-0"))
            .await
            .expect("leader")
            .is_none()
    );
}

/// An election opened on a second runtime of the process gets a channel
/// of its own (ADR 0114): the first runtime's channel dies with it. Shared
/// across runtimes, its requests failed with "transport error" (what
/// `cargo test`, one runtime per test, showed on the shared member).
#[test]
fn an_election_on_a_second_runtime_outlives_the_first() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    let base = prefix("runtimes");
    election_testkit::runtimes::a_second_runtime_outlives_the_first(|| {
        let (endpoint, options) = (endpoint.clone(), fast(&base));
        async move {
            election_etcd::EtcdElection::connect(&endpoint, options)
                .await
                .expect("connect")
        }
    });
}
