//! The server's release: a member reports its version when an election
//! opens, and one older than the crate needs is refused before anything
//! is claimed, with a typed error that names the release needed.
//!
//! No etcd older than 3.4 can be installed here (Debian has 3.4, the
//! pinned crate 3.7), so the old server is the real member behind the
//! test kit's proxy, its `Maintenance.Status` answer rewritten to an
//! older release of the same length.

use election_core::{Classify, Disposition, ElectionName};
use election_etcd::{Error, EtcdElection, NEEDED_VERSION};
use etcd_testkit::Proxy;

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_knows_the_release_its_member_runs() {
    let election = common::open(&common::shared(), &common::prefix("version")).await;
    let installed = etcd_testkit::etcd_version().expect("etcd --version");
    assert_eq!(election.server_version(), installed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_older_than_needed_is_refused_before_any_claim() {
    let member = etcd_testkit::Member::shared().expect("etcd");
    let installed = etcd_testkit::etcd_version().expect("etcd --version");
    let older = etcd_testkit::older_release(&installed);
    assert_eq!(older.len(), installed.len());
    let proxy = Proxy::start_rewriting(member.client_port(), &installed, &older).expect("a proxy");
    let endpoint = format!("127.0.0.1:{}", proxy.port());
    let prefix = common::prefix("too-old");
    let e = EtcdElection::connect(&endpoint, common::fast(&prefix))
        .await
        .expect_err("too old");
    match &e {
        Error::ServerTooOld { found, needed } => {
            assert_eq!((found.as_str(), *needed), (older.as_str(), NEEDED_VERSION));
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("needs etcd 3.4 or later"), "{e}");
    assert_eq!(e.class().disposition, Disposition::Permanent);
    let name = ElectionName::new("job").unwrap();
    assert!(matches!(
        e.into_core(&name),
        election_core::Error::Config(_)
    ));
    // Nothing was written under the prefix.
    let direct = common::open(&common::shared(), &prefix).await;
    assert_eq!(direct.leader("job").await.expect("a read"), None);
}
