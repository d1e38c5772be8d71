//! Bad directories and damaged state get typed errors, never a panic and
//! never a reused epoch.

use election_core::Error as CoreError;
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
