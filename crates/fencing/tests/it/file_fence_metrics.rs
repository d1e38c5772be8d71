//! Issue 16: the file fence decides on a blocking thread, so its refusals
//! reach the process-wide recorder (as in a service), not a thread-local
//! one. Its own test binary, with one test, so no other test adds to the
//! global counter.

use election_core::Epoch;
use election_testkit::recorder::TestRecorder;
use fencing::{Error, Fence, FileFence, ResourceName, Token};

fn t(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).unwrap())
}

#[tokio::test]
async fn the_file_fence_counts_each_refusal_in_the_global_recorder() {
    let recorder = TestRecorder::new();
    metrics::set_global_recorder(recorder.clone()).expect("the only recorder of this binary");
    let dir = tempfile::tempdir().unwrap();
    let fence = FileFence::open(dir.path()).unwrap();
    let r = ResourceName::new("ledger").unwrap();
    for ok in [2, 2, 3] {
        fence.fenced(&r, t(ok), || async {}).await.unwrap();
    }
    assert_eq!(recorder.counter("election_fence_refusals_total", &[]), 0);
    for stale in [1, 2] {
        let out = fence.fenced(&r, t(stale), || async {}).await;
        assert!(matches!(out, Err(Error::Stale { .. })), "{out:?}");
    }
    assert_eq!(recorder.counter("election_fence_refusals_total", &[]), 2);
}
