//! Issue 26 item 7: every error kind of `fencing` says what happened and
//! why in its `Display`; a chain printer shows each message once.

use election_core::{ConfigError, ElectionName, Epoch, Identity, LeaseLost, LossReason};
use election_testkit::display::assert_chains;
use fencing::{Error, ResourceName, Token};

#[test]
fn every_error_kind_says_what_and_why() {
    let t = |n| Token::from_epoch(Epoch::new(n).unwrap());
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::Stale {
                resource: ResourceName::new("ledger").unwrap(),
                presented: t(4),
                high_water_mark: t(9),
            },
            "resource ledger: token 4 is older than the high-water mark 9",
        ),
        (
            Error::Lost(LeaseLost {
                name: ElectionName::new("jobs").unwrap(),
                identity: Identity::new("host-a/1").unwrap(),
                epoch: Epoch::new(11).unwrap(),
                reason: LossReason::Expired,
            }),
            "no token was issued: term 11 of election jobs (held by host-a/1) was lost: the \
             lease expired before it could be renewed",
        ),
        (
            Error::unavailable(
                "/srv/fences/ledger.fence",
                std::io::Error::from_raw_os_error(5),
            ),
            "the fence store failed at /srv/fences/ledger.fence: Input/output error (os error 5)",
        ),
        (
            Error::corrupt("/srv/fences/ledger.fence", "mark x7 is not a token"),
            "the fence store is corrupt at /srv/fences/ledger.fence: mark x7 is not a token",
        ),
        (
            Error::Config(ConfigError::Location {
                reason: "/srv/fences is not a directory".into(),
                source: None,
            }),
            "bad fencing configuration: unusable location: /srv/fences is not a directory",
        ),
    ];
    assert_chains(cases);
}
