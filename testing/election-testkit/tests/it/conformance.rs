//! The memory backend against both conformance suites.

election_testkit::conformance_tests!(election_testkit::memory::MemoryBackend::new());

mod keyed {
    election_testkit::keyed_conformance_tests!(election_testkit::memory::MemoryBackend::new());
}

/// Keyed, with holds that expire: the core renews them on its machine.
mod keyed_leases {
    election_testkit::keyed_conformance_tests!({
        let b = election_testkit::memory::MemoryBackend::new();
        b.set_lease(Some(std::time::Duration::from_millis(300)));
        b
    });
}

/// The core keeps rules 3 and 4 per key, as the memory backend records
/// them: keys won, lost (revoked, also while a renewal is due) and held at
/// close; no release after a loss, every hold closed once, last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_rules_three_and_four_hold_per_key() {
    use election_core::LeaseSet;
    use election_testkit::memory::MemoryBackend;
    for lease in [None, Some(std::time::Duration::from_millis(200))] {
        let backend = MemoryBackend::new();
        backend.set_lease(lease);
        let a = LeaseSet::new(backend.keys("a").unwrap());
        for round in 0..5 {
            for k in ["k0", "k1", "k2"] {
                assert!(a.ask(k).await.unwrap() || round > 0);
            }
            backend.revoke("k1");
            backend.revoke("k2");
            tokio::task::yield_now().await;
        }
        a.close().await;
        backend.check_rules(true).expect("the rules hold");
        assert!(
            ["k0", "k1", "k2"]
                .iter()
                .all(|k| backend.holder(k).is_none())
        );
    }
}

/// Balanced sets keeping membership records over the memory backend.
mod membership {
    election_testkit::keyed_membership_tests!(election_testkit::memory::MemoryBackend::new());
}
