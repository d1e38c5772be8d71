//! Issue 26 item 7: every error kind of the file backend says what
//! happened and why in its `Display`; a chain printer shows each message
//! once (the OS error quoted by `Io` and `Unusable` is not repeated).

use std::io;
use std::path::PathBuf;

use election_core::{ConfigError, Epoch};
use election_file::Error;
use election_testkit::display::assert_chains;

#[test]
fn every_error_kind_says_what_and_why() {
    let p = || PathBuf::from("/srv/elections/jobs.epoch");
    let os = |code| io::Error::from_raw_os_error(code);
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::NetworkFilesystem {
                path: PathBuf::from("/mnt/nfs"),
                fs_name: "NFS",
                fs_type: 0x6969,
            },
            "/mnt/nfs is on a network filesystem (NFS, type 0x6969); use a local directory",
        ),
        (
            Error::NotADirectory {
                path: PathBuf::from("/srv/file"),
            },
            "/srv/file is not a directory",
        ),
        (
            Error::PermissionDenied {
                path: p(),
                source: os(13),
            },
            "permission denied: /srv/elections/jobs.epoch; give this process read and write \
             access: Permission denied (os error 13)",
        ),
        (
            Error::CorruptEpoch {
                path: p(),
                detail: "epoch=banana".into(),
            },
            "corrupt epoch record /srv/elections/jobs.epoch: epoch=banana; do not delete it: set \
             it with `elect repair-epoch` (FileElection::repair_epoch) to an epoch at least as \
             high as any token your resources hold",
        ),
        (
            Error::ClaimHeld { path: p() },
            "/srv/elections/jobs.epoch is locked by a running candidate; stop it before \
             repairing the epoch record",
        ),
        (
            Error::EpochTooLow {
                path: p(),
                given: Epoch::new(3).unwrap(),
                highest_seen: Epoch::new(9).unwrap(),
            },
            "refusing to repair with epoch 3: /srv/elections/jobs.epoch shows that epochs up to \
             9 may have been handed out; give at least that",
        ),
        (
            Error::NoSpace {
                op: "write",
                path: p(),
                source: os(28),
            },
            "write /srv/elections/jobs.epoch failed: no space left (the filesystem or the quota \
             is full): No space left on device (os error 28)",
        ),
        (
            Error::Unusable {
                op: "open",
                path: p(),
                source: os(21),
            },
            "open /srv/elections/jobs.epoch failed: Is a directory (os error 21); retrying will \
             not help",
        ),
        (
            Error::Io {
                op: "fsync",
                path: p(),
                source: os(5),
            },
            "fsync /srv/elections/jobs.epoch failed: Input/output error (os error 5)",
        ),
        (
            Error::Config(ConfigError::BadSetting {
                setting: "poll_interval",
                reason: "0ns is not between 1ms and 1h".into(),
            }),
            "bad setting poll_interval: 0ns is not between 1ms and 1h",
        ),
    ];
    assert_chains(cases);
}
