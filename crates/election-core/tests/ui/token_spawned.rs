// A token cannot be handed to a spawned task that may outlive the guard.
use election_core::{Identity, LeaseSet, PerKeyClaims}; use election_testkit::memory::MemoryBackend;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let backend = MemoryBackend::new();
    let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a").unwrap(), move |k| {
        backend.claim(k.as_str(), "a")
    }));
    set.guard("shard-1", async |token| {
        tokio::spawn(async move { println!("{}", token.epoch()) });
    })
    .await
    .unwrap();
}
