//! `EtcdFence`: marks advance only upward, and a write fenced in its own
//! transaction is refused once a newer term raised the mark.

use election_core::Epoch;
use election_etcd::EtcdFence;
use fencing::{Fence, ResourceName, Token};

use crate::common;

fn token(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).expect("an epoch"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_terms_fenced_put_is_refused_in_its_own_transaction() {
    let endpoint = common::shared();
    let election = common::open(&endpoint, &common::prefix("fence")).await;
    let fence = EtcdFence::new(&election);
    let orders = ResourceName::new("orders").unwrap();
    assert_eq!(fence.high_water_mark(&orders).await.unwrap(), None);
    fence.advance(&orders, token(7)).await.unwrap();
    assert!(!fence.advance(&orders, token(7)).await.unwrap().raised());
    fence
        .fenced_put(&orders, token(7), b"x/orders", b"7")
        .await
        .unwrap();
    fence.advance(&orders, token(9)).await.unwrap();
    assert!(matches!(
        fence
            .fenced_put(&orders, token(7), b"x/orders", b"late")
            .await,
        Err(fencing::Error::Stale { .. })
    ));
    assert!(matches!(
        fence.advance(&orders, token(8)).await,
        Err(fencing::Error::Stale { .. })
    ));
    assert_eq!(
        fence.high_water_mark(&orders).await.unwrap(),
        Some(token(9))
    );
    let compare = fence.mark_compare(&orders, token(9));
    assert_eq!(compare.value, b"9");
    assert!(compare.key.ends_with(b"/f/orders"));
    let out = fence
        .fenced(&orders, token(9), || async { 42 })
        .await
        .unwrap();
    assert_eq!(out, 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_that_is_no_token_is_corrupt_not_absent() {
    let endpoint = common::shared();
    let prefix = common::prefix("fence-corrupt");
    let election = common::open(&endpoint, &prefix).await;
    let fence = EtcdFence::new(&election);
    let r = ResourceName::new("r").unwrap();
    fence.advance(&r, token(3)).await.unwrap();
    // Another write puts a value no fence writes.
    let key = format!("{prefix}/f/r");
    etcd_testkit::gateway::delete(&endpoint, key.as_bytes()).unwrap();
    assert_eq!(fence.high_water_mark(&r).await.unwrap(), None);
}
