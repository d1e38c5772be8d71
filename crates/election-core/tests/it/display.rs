//! Issue 26 item 7: every error kind of the core says what happened and
//! why in its `Display` (what a user logs with `{e}`), and a chain printer
//! shows each message once (ADR 0063).

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use election_core::{
    ConfigError, ElectionName, Epoch, Error, Identity, Leader, LeaseLost, LossReason,
};
use election_testkit::display::chain;

/// An OS error below a backend error, as the backends have them.
#[derive(Debug, thiserror::Error)]
#[error("the database is busy (locked by another connection past the busy timeout)")]
struct Busy(#[source] std::io::Error);

fn busy() -> Busy {
    Busy(std::io::Error::other("database is locked"))
}

fn name() -> ElectionName {
    ElectionName::new("jobs").unwrap()
}

fn lost(reason: LossReason) -> LeaseLost {
    LeaseLost {
        name: name(),
        identity: Identity::new("host-a/4711").unwrap(),
        epoch: Epoch::new(11).unwrap(),
        reason,
    }
}

#[test]
fn every_error_kind_of_the_core_says_what_and_why() {
    let cases: Vec<(Box<dyn std::error::Error>, &str)> = vec![
        (
            Box::new(Error::from(ConfigError::BadSetting {
                setting: "ttl",
                reason: "0ns is below 1ms".into(),
            })),
            "bad setting ttl: 0ns is below 1ms",
        ),
        (
            Box::new(Error::from(lost(LossReason::Expired))),
            "term 11 of election jobs (held by host-a/4711) was lost: the lease expired before it could be renewed",
        ),
        (
            Box::new(Error::NotHeld { name: name() }),
            "election jobs: the claim is not held (this process never won it, or its term ended)",
        ),
        (
            Box::new(Error::HeldElsewhere {
                name: name(),
                holder: Some(Leader {
                    identity: Identity::new("host-b/1").unwrap(),
                    epoch: Epoch::new(12).unwrap(),
                    since: None,
                    renewed: None,
                    ttl: None,
                    value: None,
                }),
            }),
            "election jobs: held by host-b/1 in term 12",
        ),
        (
            Box::new(Error::HeldElsewhere {
                name: name(),
                holder: None,
            }),
            "election jobs: held by another candidate",
        ),
        (
            Box::new(Error::unavailable(&name(), busy())),
            "election jobs: the backend is unavailable (nothing was won): the database is busy (locked by another connection past the busy timeout)",
        ),
        (
            Box::new(Error::outcome_unknown(
                &name(),
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 2s"),
            )),
            "election jobs: the outcome of a step is unknown (the claim counts as not held): no answer within 2s",
        ),
        (
            Box::new(Error::corrupt(
                &name(),
                std::io::Error::other("epoch=banana"),
            )),
            "election jobs: stored state is corrupt (no term is handed out until it is repaired): epoch=banana",
        ),
        (
            Box::new(Error::DrainTimedOut {
                name: name(),
                drain_timeout: Duration::from_secs(5),
            }),
            "election jobs: the leader's work did not drain within 5s and was cancelled before the claim was released",
        ),
        (
            Box::new(ConfigError::BadName {
                what: "election name",
                value: "a/b".into(),
                reason: "contains '/'",
            }),
            "bad election name \"a/b\": contains '/'",
        ),
        (
            Box::new(ConfigError::Location {
                reason: "/srv/elections is not a directory".into(),
                source: None,
            }),
            "unusable location: /srv/elections is not a directory",
        ),
        (
            Box::new(ConfigError::EpochExhausted),
            "the epoch counter is exhausted: every epoch up to 9223372036854775807 was handed out, so no new term can begin",
        ),
        (
            Box::new("banana".parse::<Epoch>().unwrap_err()),
            "not an epoch (a decimal number from 1 to 9223372036854775807): \"banana\"",
        ),
    ];
    for (e, want) in &cases {
        assert_eq!(e.to_string(), *want);
    }
    let reasons = [
        (
            LossReason::Expired,
            "the lease expired before it could be renewed",
        ),
        (
            LossReason::Revoked {
                detail: "held by host-b/1 in term 12".into(),
            },
            "the backend no longer shows this claim as held: held by host-b/1 in term 12",
        ),
        (
            LossReason::Failed(Arc::new(busy())),
            "the backend failed and the claim is in doubt: the database is busy (locked by another connection past the busy timeout)",
        ),
        (LossReason::Resigned, "the term ended: its holder resigned"),
        (LossReason::Dropped, "the term ended: its holder dropped it"),
    ];
    for (reason, want) in reasons {
        assert_eq!(reason.to_string(), want);
        let whole = lost(reason).to_string();
        assert_eq!(
            whole,
            format!("term 11 of election jobs (held by host-a/4711) was lost: {want}")
        );
    }
}

/// The wrapped backend error is named once: in the message, not again as
/// a source; what is below it (the OS error) follows; the backend error
/// itself is reachable for downcasting.
#[test]
fn chains_show_each_message_once() {
    let e = Error::unavailable(&name(), busy());
    assert_eq!(
        chain(&e),
        "election jobs: the backend is unavailable (nothing was won): the database is busy \
         (locked by another connection past the busy timeout): database is locked"
    );
    assert!(
        e.backend_error()
            .and_then(|c| c.downcast_ref::<Busy>())
            .is_some()
    );

    let e = Error::from(lost(LossReason::Failed(Arc::new(busy()))));
    assert_eq!(
        chain(&e),
        "term 11 of election jobs (held by host-a/4711) was lost: the backend failed and the \
         claim is in doubt: the database is busy (locked by another connection past the busy \
         timeout): database is locked"
    );
    assert!(
        e.backend_error()
            .and_then(|c| c.downcast_ref::<Busy>())
            .is_some()
    );
    let e = Error::from(lost(LossReason::Expired));
    assert!(e.source().is_none() && e.backend_error().is_none());
}
