// A token must not outlive the guarded call: keeping it in a variable that
// outlives the call does not compile either.
use election_core::{Identity, LeaseSet, PerKeyClaims, WriteToken}; use election_testkit::memory::MemoryBackend;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let backend = MemoryBackend::new();
    let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a").unwrap(), move |k| {
        backend.claim(k.as_str(), "a")
    }));
    let mut kept: Vec<WriteToken<'_>> = Vec::new();
    set.guard("shard-1", async |token| kept.push(token)).await.unwrap();
    println!("{}", kept.len());
}
