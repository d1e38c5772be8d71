//! Issue 11, item 4: no token is issued from a term that has ended by
//! resign or drop (also while its release is in flight, and after the next
//! term began).

use election_core::{Candidate, Lease, LossReason};
use election_testkit::conformance::cancel_after;
use election_testkit::memory::MemoryBackend;
use fencing::{Error, Token};

fn refused_with(result: Result<Token, Error>) -> LossReason {
    match result {
        Err(Error::Lost(lost)) => lost.reason,
        other => panic!("a token was issued from an ended term: {other:?}"),
    }
}

#[tokio::test]
async fn no_token_from_a_resigned_term_even_after_the_next_term_began() {
    let backend = MemoryBackend::new();
    let term = Candidate::new(backend.claim("jobs", "a").unwrap())
        .campaign()
        .await
        .unwrap();
    let lease = term.lease();
    assert_eq!(Token::issue(&lease).unwrap().epoch(), term.epoch());
    term.resign().await.unwrap();
    let next = Candidate::new(backend.claim("jobs", "b").unwrap())
        .campaign()
        .await
        .unwrap();
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
    let term = Candidate::new(backend.claim("jobs", "a").unwrap())
        .campaign()
        .await
        .unwrap();
    let lease = term.lease();
    drop(term);
    assert!(matches!(
        refused_with(Token::issue(&lease)),
        LossReason::Dropped
    ));

    let term = Candidate::new(backend.claim("jobs", "a").unwrap())
        .campaign()
        .await
        .unwrap();
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
