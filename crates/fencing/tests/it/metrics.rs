//! Issue 16: every refused stale token counts in
//! `election_fence_refusals_total`, in every store of this crate (they all
//! decide with `Advance::decide`); accepted tokens do not.

use election_core::Epoch;
use election_testkit::recorder::TestRecorder;
use fencing::{Error, Fence, MemoryFence, ResourceName, Token};

const REFUSALS: &str = "election_fence_refusals_total";

fn t(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).unwrap())
}

/// Presents 2, 2, 3, then the stale 1 and 2 to `fence`: two refusals.
async fn present(fence: &impl Fence) {
    let r = ResourceName::new("ledger").unwrap();
    for ok in [2, 2, 3] {
        fence.fenced(&r, t(ok), || async {}).await.unwrap();
    }
    for stale in [1, 2] {
        let out = fence.fenced(&r, t(stale), || async {}).await;
        assert!(matches!(out, Err(Error::Stale { .. })), "{out:?}");
    }
}

fn run(recorder: &TestRecorder, test: impl std::future::Future<Output = ()>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(recorder, || rt.block_on(test));
}

#[test]
fn the_memory_fence_counts_each_refusal() {
    let r = TestRecorder::new();
    run(&r, present(&MemoryFence::new()));
    assert_eq!(r.counter(REFUSALS, &[]), 2);
}
