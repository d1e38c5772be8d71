//! Issue 11, item 4: no token is issued from a term that has ended by
//! resign or drop (also while its release is in flight, and after the next
//! term began).

use election_core::{Candidate, Lease, LossReason, Term};
use election_testkit::conformance::cancel_after;
use election_testkit::memory::{MemoryBackend, MemoryClaim};
use fencing::{Error, Token};

/// The term `identity` wins in election `jobs`.
async fn elected(backend: &MemoryBackend, identity: &str) -> Term<MemoryClaim> {
    let claim = backend.claim("jobs", identity).unwrap();
    Candidate::new(claim).campaign().await.unwrap()
}

fn refused_with(result: Result<Token, Error>) -> LossReason {
    match result {
        Err(Error::Lost(lost)) => lost.reason,
        other => panic!("a token was issued from an ended term: {other:?}"),
    }
}

#[tokio::test]
async fn no_token_from_a_resigned_term_even_after_the_next_term_began() {
    let backend = MemoryBackend::new();
    let term = elected(&backend, "a").await;
    let lease = term.lease();
    assert_eq!(Token::issue(&lease).unwrap().epoch(), term.epoch());
    term.resign().await.unwrap();
    let next = elected(&backend, "b").await;
    assert!(matches!(
        refused_with(Token::issue(&lease)),
        LossReason::Resigned
    ));
    assert!(matches!(
        refused_with(Token::issue(&term)),
        LossReason::Resigned
    ));
    assert!(Token::issue(&next).unwrap() > Token::from_epoch(term.epoch()));
    next.resign().await.unwrap();
}

#[tokio::test]
async fn no_token_from_a_dropped_term_or_while_a_release_is_in_flight() {
    let backend = MemoryBackend::new();
    let term = elected(&backend, "a").await;
    let lease = term.lease();
    drop(term);
    assert!(matches!(
        refused_with(Token::issue(&lease)),
        LossReason::Dropped
    ));

    let term = elected(&backend, "a").await;
    // The memory backend's release yields once before it frees the claim:
    // the resign is dropped right there, with the release in flight.
    assert!(cancel_after(term.resign(), 1).await.is_none());
    assert!(backend.holder("jobs").is_some(), "the release had not run");
    assert!(term.lease().is_lost());
    assert!(matches!(
        refused_with(Token::issue(&term)),
        LossReason::Resigned
    ));
}
