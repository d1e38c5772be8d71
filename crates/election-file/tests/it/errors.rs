//! Bad directories and damaged state get typed errors, never a panic and
//! never a reused epoch.

use election_core::{Epoch, Error as CoreError};
use election_file::{Error, FileElection};

#[test]
fn a_missing_directory_is_created() {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("a/b/c");
    FileElection::new(&dir).expect("created");
    assert!(dir.is_dir());
}

#[test]
fn a_file_is_not_a_directory() {
    let tmp = tempfile::tempdir().expect("dir");
    let file = tmp.path().join("f");
    std::fs::write(&file, b"x").expect("write");
    assert!(matches!(
        FileElection::new(&file),
        Err(Error::NotADirectory { .. })
    ));
    assert!(matches!(
        FileElection::new(file.join("below")),
        Err(Error::NotADirectory { .. })
    ));
}

#[test]
fn an_unwritable_directory_is_a_permission_error() {
    // sysfs refuses new directories even to root; as another user, a
    // read-only directory does too.
    let denied = if nix::unistd::geteuid().is_root() {
        std::path::PathBuf::from("/sys/election-file-test")
    } else {
        let tmp = tempfile::tempdir().expect("dir").keep();
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o500))
            .expect("chmod");
        tmp.join("sub")
    };
    match FileElection::new(&denied) {
        Err(Error::PermissionDenied { path, .. }) => assert_eq!(path, denied),
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
}

#[tokio::test]
async fn a_corrupt_epoch_file_is_a_typed_error_and_never_reuses_an_epoch() {
    let tmp = tempfile::tempdir().expect("dir");
    let election = FileElection::new(tmp.path()).expect("election");
    let candidate = election.candidate("jobs", "a").expect("candidate");
    let term = candidate.campaign().await.expect("first term");
    assert_eq!(term.epoch().get(), 2);
    term.resign().await.expect("resign");

    let record = tmp.path().join("jobs.epoch");
    std::fs::write(&record, b"election-file/1\nepoch=banana\nidentity=a\n").expect("damage");
    match candidate.try_campaign().await {
        Err(CoreError::Corrupt { source, .. }) => {
            let inner = source
                .downcast_ref::<Error>()
                .expect("file error as source");
            assert!(matches!(inner, Error::CorruptEpoch { .. }), "{inner:?}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Nothing was won, so the claim is free for the repaired state.
    assert_eq!(candidate.leader().await.expect("leader"), None);
    std::fs::write(&record, b"election-file/1\nepoch=41\nidentity=operator\n").expect("repair");
    let term = candidate.try_campaign().await.expect("try").expect("wins");
    assert_eq!(term.epoch().get(), 42);
}

#[tokio::test]
async fn an_empty_epoch_file_is_corrupt_not_absent() {
    let tmp = tempfile::tempdir().expect("dir");
    std::fs::write(tmp.path().join("jobs.epoch"), b"").expect("write");
    let candidate = FileElection::new(tmp.path())
        .expect("election")
        .candidate("jobs", "a")
        .expect("candidate");
    assert!(matches!(
        candidate.try_campaign().await,
        Err(CoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn a_deleted_epoch_record_is_refused_not_restarted_at_the_first_epoch() {
    let tmp = tempfile::tempdir().expect("dir");
    let election = FileElection::new(tmp.path()).expect("election");
    let candidate = election.candidate("jobs", "a").expect("candidate");
    let mut last = None;
    for _ in 0..3 {
        let term = candidate.campaign().await.expect("term");
        last = Some(term.epoch());
        term.resign().await.expect("resign");
    }
    let last = last.expect("three terms");
    std::fs::remove_file(tmp.path().join("jobs.epoch")).expect("delete the record");
    // Before the claim file recorded that terms happened, this won a term
    // with Epoch::FIRST again, below the tokens of the three earlier terms.
    match candidate.try_campaign().await {
        Err(CoreError::Corrupt { source, .. }) => {
            let inner = source.downcast_ref::<Error>().expect("file error");
            assert!(matches!(inner, Error::CorruptEpoch { .. }), "{inner:?}");
            let text = inner.to_string();
            assert!(
                text.contains("repair-epoch") && text.contains("do not delete"),
                "{text}"
            );
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Within this boot the record was the only account of the epochs
    // below the ceiling: a repair goes no lower than the ceiling (ADR 0048).
    let floor = match election.repair_epoch("jobs", last) {
        Err(Error::EpochTooLow {
            highest_seen, path, ..
        }) => {
            assert!(path.ends_with("jobs.epoch-ceiling"), "{}", path.display());
            highest_seen
        }
        other => panic!("expected EpochTooLow, got {other:?}"),
    };
    assert!(floor > last, "{floor}");
    let repaired = election.repair_epoch("jobs", floor).expect("repair");
    assert_eq!(repaired.highest_seen, None, "nothing was left to see");
    let term = candidate.try_campaign().await.expect("try").expect("wins");
    assert!(term.epoch() > last, "{} after {last}", term.epoch());
}

#[tokio::test]
async fn a_repair_refuses_a_lower_epoch_and_a_held_claim() {
    let tmp = tempfile::tempdir().expect("dir");
    let election = FileElection::new(tmp.path()).expect("election");
    let candidate = election.candidate("jobs", "a").expect("candidate");
    let term = candidate.campaign().await.expect("term");
    let epoch = term.epoch();
    assert!(matches!(
        election.repair_epoch("jobs", Epoch::new(1000).unwrap()),
        Err(Error::ClaimHeld { .. })
    ));
    term.resign().await.expect("resign");
    let record = tmp.path().join("jobs.epoch");
    // Damaged, showing an epoch above the ceiling (a damaged record's
    // floor is at least the ceiling, ADR 0048).
    let shown = epoch.get() + 5000;
    std::fs::write(
        &record,
        format!("election-file/1\nepoch={shown}\nidentity=\n"),
    )
    .expect("damage the record, leaving its epoch readable");
    let too_low = Epoch::new(shown - 1).unwrap();
    match election.repair_epoch("jobs", too_low) {
        Err(Error::EpochTooLow {
            given,
            highest_seen,
            ..
        }) => {
            assert_eq!(given, too_low);
            assert_eq!(highest_seen.get(), shown);
        }
        other => panic!("expected EpochTooLow, got {other:?}"),
    }
    assert!(
        candidate.try_campaign().await.is_err(),
        "still corrupt: nothing changed"
    );
    let repaired = election
        .repair_epoch("jobs", Epoch::new(shown).unwrap())
        .expect("repair");
    assert_eq!(repaired.highest_seen.map(Epoch::get), Some(shown));
    let term = candidate.try_campaign().await.expect("try").expect("wins");
    assert_eq!(term.epoch().get(), shown + 1);
}

/// The epoch ceiling as a kernel with another boot id wrote it: what an
/// election directory holds after an OS restart (ADR 0025).
fn ceiling_from_another_boot(dir: &std::path::Path, name: &str, ceiling: u64) {
    let other_boot = "0b0b0b0b-1111-4222-8333-444444444444";
    assert_ne!(
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .unwrap_or_default()
            .trim(),
        other_boot
    );
    std::fs::write(
        dir.join(format!("{name}.epoch-ceiling")),
        format!("election-file-ceiling/1\nceiling={ceiling}\nboot_id={other_boot}\n"),
    )
    .expect("write the old boot's ceiling");
}

/// Issue 23, item 3: epochs 2 to 11 were handed out, then the OS
/// restarted and the record on disk (written through the page cache) says
/// 5. A repair with 5 used to be accepted and stamp the ceiling with the
/// new boot id, so the stale record was then read as exact and the next
/// term got epoch 6 again. The repair must never let an epoch repeat.
#[tokio::test]
async fn a_repair_after_an_os_restart_never_lets_an_epoch_repeat() {
    let tmp = tempfile::tempdir().expect("dir");
    let election = FileElection::new(tmp.path()).expect("election");
    let candidate = election.candidate("jobs", "a").expect("candidate");
    let mut handed_out = Vec::new();
    for _ in 0..10 {
        let term = candidate.campaign().await.expect("term");
        handed_out.push(term.epoch().get());
        term.resign().await.expect("resign");
    }
    let highest = *handed_out.last().expect("terms");
    let ceiling = std::fs::read_to_string(tmp.path().join("jobs.epoch-ceiling")).expect("ceiling");
    let reserved: u64 = ceiling
        .lines()
        .find_map(|l| l.strip_prefix("ceiling="))
        .expect("ceiling=")
        .parse()
        .expect("a number");
    assert!(reserved >= highest, "{ceiling}");
    // The OS restarts: the ceiling is from the boot before, and the record
    // on disk is an older version of it.
    ceiling_from_another_boot(tmp.path(), "jobs", reserved);
    std::fs::write(
        tmp.path().join("jobs.epoch"),
        "election-file/1\nepoch=5\nidentity=a\n",
    )
    .expect("the record as the disk kept it");

    match election.repair_epoch("jobs", Epoch::new(5).unwrap()) {
        Err(Error::EpochTooLow {
            given,
            highest_seen,
            path,
        }) => {
            assert_eq!(given.get(), 5);
            assert_eq!(
                highest_seen.get(),
                reserved,
                "the old boot's ceiling is the floor"
            );
            assert!(path.ends_with("jobs.epoch-ceiling"), "{}", path.display());
        }
        Ok(repaired) => {
            // Accepted: then the next term must still be above every epoch
            // handed out.
            let term = candidate.try_campaign().await.expect("try").expect("wins");
            let next = term.epoch().get();
            assert!(
                !handed_out.contains(&next),
                "epoch {next} handed out again after a repair with {} (epochs {handed_out:?} \
                 were handed out before the restart)",
                repaired.epoch
            );
            panic!("the repair with 5 was accepted below the old boot's ceiling {reserved}");
        }
        Err(other) => panic!("expected EpochTooLow, got {other:?}"),
    }
    // Refused, nothing changed: the next term still goes past the ceiling.
    let repaired = election
        .repair_epoch("jobs", Epoch::new(reserved).unwrap())
        .expect("a repair at the ceiling");
    assert_eq!(repaired.highest_seen.map(Epoch::get), Some(5));
    let term = candidate.try_campaign().await.expect("try").expect("wins");
    assert_eq!(term.epoch().get(), reserved + 1);
}
