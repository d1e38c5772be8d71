//! One member: started, healthy, driven by hand through the gateway,
//! killed and restarted on its data, behind a proxy.

use etcd_testkit::{Member, Proxy, gateway};

#[test]
fn a_member_starts_answers_and_keeps_its_data_across_a_restart() {
    let mut member = Member::start().expect("etcd must be available");
    let endpoint = member.endpoint();
    assert!(gateway::healthy(&endpoint));
    let before = gateway::revision(&endpoint).expect("a revision");
    assert_eq!(
        gateway::delete(&endpoint, b"nothing/here").expect("a delete"),
        0
    );
    assert_eq!(gateway::count(&endpoint, b"nothing/").expect("a count"), 0);
    gateway::compact(&endpoint, before).expect("a compaction");
    member.kill().expect("killed");
    assert!(!member.is_running());
    member.restart().expect("restarted");
    assert!(gateway::revision(&endpoint).expect("a revision") >= before);
    member.pause().expect("paused");
    member.resume().expect("resumed");
    assert!(gateway::healthy(&endpoint));
}

#[test]
fn a_black_holed_proxy_answers_nothing_until_it_forwards_again() {
    let member = Member::start().expect("etcd must be available");
    let proxy = Proxy::start(member.client_port()).expect("a proxy");
    let through = format!("127.0.0.1:{}", proxy.port());
    assert!(gateway::healthy(&through));
    proxy.black_hole(true);
    assert!(!gateway::healthy(&through)); // times out
    proxy.black_hole(false);
    assert!(gateway::healthy(&through));
    proxy.cut();
    assert!(gateway::healthy(&through)); // new connections go through
}
