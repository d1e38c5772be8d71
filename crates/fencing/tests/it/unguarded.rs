//! An unguarded write token is lower than every term's epoch, on the first
//! term of a key too: a fence that has accepted the real holder's write
//! refuses the unguarded one while that holder is live.

use election_core::{Epoch, Identity, LeaseSet, PerKeyClaims, unguarded};
use election_testkit::memory::MemoryBackend;
use fencing::{Error, Fence, MemoryFence, ResourceName, Token};

#[tokio::test]
async fn an_unguarded_write_is_refused_during_the_first_term_of_a_key() {
    let backend = MemoryBackend::new();
    let b = backend.clone();
    let set = LeaseSet::new(PerKeyClaims::new(
        Identity::new("node-a").unwrap(),
        move |key| b.claim(key.as_str(), "node-a"),
    ));
    let fence = MemoryFence::new();
    let first = set
        .guard("shard-1", async |token| {
            let shard = ResourceName::for_key(token.key());
            let t = Token::from(&token);
            fence.fenced(&shard, t, || async { t }).await
        })
        .await
        .expect("guard")
        .expect("fenced");
    // The key's first term: no earlier holder.
    assert_eq!(first.epoch(), Epoch::FIRST);
    assert!(set.held("shard-1"), "the first term is still live");

    let late = unguarded("shard-1", "test: no coordinator", async |token| {
        assert!(token.epoch() < Epoch::FIRST);
        let shard = ResourceName::for_key(token.key());
        fence
            .fenced(&shard, Token::from(&token), || async { "unguarded" })
            .await
    })
    .await
    .expect("valid key");
    // Before epoch 1 was reserved for unguarded tokens, both had epoch 1
    // and the fence accepted this write as a tie.
    assert!(matches!(late, Err(Error::Stale { .. })), "{late:?}");
    set.close().await;
}
