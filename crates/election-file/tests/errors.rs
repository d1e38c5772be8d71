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
    let repaired = election.repair_epoch("jobs", last).expect("repair");
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
    std::fs::write(
        &record,
        format!("election-file/1\nepoch={}\nidentity=\n", epoch.get() + 5),
    )
    .expect("damage the record, leaving its epoch readable");
    let too_low = Epoch::new(epoch.get() + 4).unwrap();
    match election.repair_epoch("jobs", too_low) {
        Err(Error::EpochTooLow {
            given,
            highest_seen,
            ..
        }) => {
            assert_eq!(given, too_low);
            assert_eq!(highest_seen.get(), epoch.get() + 5);
        }
        other => panic!("expected EpochTooLow, got {other:?}"),
    }
    assert!(
        candidate.try_campaign().await.is_err(),
        "still corrupt: nothing changed"
    );
    let repaired = election
        .repair_epoch("jobs", Epoch::new(epoch.get() + 5).unwrap())
        .expect("repair");
    assert_eq!(repaired.highest_seen.map(Epoch::get), Some(epoch.get() + 5));
    let term = candidate.try_campaign().await.expect("try").expect("wins");
    assert_eq!(term.epoch().get(), epoch.get() + 6);
}
