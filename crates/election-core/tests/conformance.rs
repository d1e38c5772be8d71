//! The conformance suite against the in-memory backend, plus a check of the
//! rules on what the backend recorded.

election_core::conformance_tests!(election_core::memory::MemoryBackend::new());
