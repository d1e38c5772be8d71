//! A three-member cluster: a leader, and a new one after it is killed.

use std::time::{Duration, Instant};

use etcd_testkit::{Cluster, gateway};

#[test]
fn a_cluster_elects_a_new_leader_when_its_leader_dies() {
    let mut cluster = Cluster::start(3).expect("etcd must be available");
    assert_eq!(cluster.endpoints().len(), 3);
    let leader = cluster.leader().expect("a leader");
    cluster.member_mut(leader).kill().expect("killed");
    let until = Instant::now() + Duration::from_secs(30);
    let next = loop {
        match cluster.leader() {
            Ok(i) if i != leader => break i,
            _ if Instant::now() > until => panic!("no new leader within 30 s"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert!(gateway::healthy(&cluster.endpoints()[next]));
    cluster.member_mut(leader).restart().expect("back");
}
