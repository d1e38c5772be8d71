//! etcd with authentication on: a user limited to the prefix campaigns,
//! a wrong password and a missing user are typed errors that say to fix
//! the credentials.

use election_core::{Classify, Disposition};
use election_etcd::{Error, EtcdElection};
use etcd_testkit::{Member, gateway};

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_limited_to_the_prefix_leads_and_bad_credentials_are_refused() {
    let member = Member::start().expect("etcd");
    let endpoint = member.endpoint();
    gateway::enable_auth(&endpoint, "rootpw", "app", "apppw", b"apps/").expect("auth on");
    let election = EtcdElection::connect_as(&endpoint, "app", "apppw", common::fast("apps"))
        .await
        .expect("the app's user connects");
    let term = election
        .candidate("jobs", "a")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    term.confirm().await.unwrap();
    term.resign().await.unwrap();
    for refused in [
        EtcdElection::connect_as(&endpoint, "app", "wrong", common::fast("apps")).await,
        EtcdElection::connect(&endpoint, common::fast("apps")).await,
        // The user may not read outside its prefix.
        EtcdElection::connect_as(&endpoint, "app", "apppw", common::fast("other")).await,
    ] {
        let e = refused.expect_err("refused");
        assert!(matches!(e, Error::Auth { .. }), "{e:?}");
        assert_eq!(e.class().disposition, Disposition::Permanent);
    }
}
