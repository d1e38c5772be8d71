//! The directory's filesystem: one that a reboot empties (tmpfs, ramfs)
//! is refused unless asked for by name, as epochs must outlive a reboot.

use election_file::{Error, FileElection, FileOptions};

/// A fresh directory on `/dev/shm`, a tmpfs on Linux.
fn on_tmpfs() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").expect("a temp dir in /dev/shm (a tmpfs)")
}

#[test]
fn a_directory_on_tmpfs_is_refused_with_a_typed_error() {
    let tmp = on_tmpfs();
    let dir = tmp.path().join("elections");
    match FileElection::new(&dir) {
        Err(e @ Error::VolatileFilesystem { .. }) => {
            if let Error::VolatileFilesystem {
                path,
                fs_name,
                fs_type,
            } = &e
            {
                assert_eq!(path, &dir);
                assert_eq!((*fs_name, *fs_type), ("tmpfs", 0x0102_1994));
            }
            let shown = e.to_string();
            assert!(shown.contains("reboot"), "{shown}");
            assert!(shown.contains("allow_volatile"), "{shown}");
            let core = e.into_core(&election_core::ElectionName::new("jobs").unwrap());
            assert!(core.is_permanent(), "{core:?}");
        }
        other => panic!("expected VolatileFilesystem, got {other:?}"),
    }
}

#[tokio::test]
async fn a_directory_on_tmpfs_is_accepted_when_asked_for_by_name() {
    let tmp = on_tmpfs();
    let options = FileOptions::default().allow_volatile(true);
    let election = FileElection::with_options(tmp.path(), options).expect("accepted");
    let term = election
        .candidate("jobs", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("a term");
    assert_eq!(term.epoch().get(), 2);
    term.resign().await.expect("resign");
}

#[test]
fn allowing_an_unknown_filesystem_does_not_allow_tmpfs() {
    // tmpfs is known: volatile. Only `allow_volatile` accepts it.
    let tmp = on_tmpfs();
    let options = FileOptions::default().allow_unknown_filesystem(true);
    assert!(matches!(
        FileElection::with_options(tmp.path(), options),
        Err(Error::VolatileFilesystem { .. })
    ));
}

#[test]
fn a_local_disk_is_accepted() {
    // The build's own directory is on a disk (ext4 here, and on CI).
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("dir");
    FileElection::new(tmp.path()).expect("a local disk is accepted");
}
