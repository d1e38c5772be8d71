// A token must not outlive the guarded call: returning it does not compile.
use election_core::{Identity, LeaseSet, PerKeyClaims}; use election_testkit::memory::MemoryBackend;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let backend = MemoryBackend::new();
    let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a").unwrap(), move |k| {
        backend.claim(k.as_str(), "a")
    }));
    let token = set.guard("shard-1", async |token| token).await.unwrap();
    println!("{}", token.epoch());
}
