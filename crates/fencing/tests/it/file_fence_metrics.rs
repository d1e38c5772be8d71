//! Issue 16: the file fence decides on a blocking thread, so its refusals
//! reach the process-wide recorder (as in a service), not a thread-local
//! one. The check runs in a process of its own (this test binary again,
//! told by an environment variable), so no other test of the binary adds
//! to the global counter, also under `cargo test`, which runs every test
//! of a binary in one process.

use std::process::Command;

use election_core::Epoch;
use election_testkit::recorder::TestRecorder;
use fencing::{Error, Fence, FileFence, ResourceName, Token};

/// Set in the child: run the check here.
const CHILD: &str = "FENCING_FILE_FENCE_METRICS_CHILD";
/// This test's path, as the test binary's filter takes it.
const THIS: &str = "file_fence_metrics::the_file_fence_counts_each_refusal_in_the_global_recorder";

fn t(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).unwrap())
}

#[test]
fn the_file_fence_counts_each_refusal_in_the_global_recorder() {
    if std::env::var_os(CHILD).is_some() {
        return counts_each_refusal();
    }
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([THIS, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the check failed in its own process:\n{text}"
    );
    // The child ran the one test (a filter that matched nothing passes).
    assert!(text.contains("1 passed"), "{text}");
}

fn counts_each_refusal() {
    let recorder = TestRecorder::new();
    metrics::set_global_recorder(recorder.clone()).expect("the only recorder of this process");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
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
    });
}
