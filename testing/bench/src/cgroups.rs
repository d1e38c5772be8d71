//! A cgroup parent of the bench's own for every `elect run` it starts
//! (`ELECT_CGROUP_PARENT`), removed when the bench ends.
//!
//! `elect run` looks through every election directory under its parent
//! for nested groups of its own election before its command starts, so
//! its start grows with what other runs left there: on this project's
//! development machine, 711 election directories left by killed runs of
//! tests and benches (a killed leader's last term group stays until the
//! next winner of that name on the host) made a start take 23 ms instead
//! of 5.5 ms. With a parent of its own, every run of the bench starts
//! from an empty one, and leaves nothing behind.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The bench's own parent, if one could be made (`None`: `elect run`
/// uses its default, and warns if it has none).
pub(crate) fn parent() -> Option<&'static Path> {
    PARENT.get().and_then(Option::as_deref)
}

/// Owns the bench's parent: made by [`OwnParent::make`], its whole tree
/// removed when dropped (every process in it is gone by then).
pub(crate) struct OwnParent;

impl OwnParent {
    /// Makes `<the cgroup2 mount>/elect-bench-<pid>` and records it for
    /// [`parent`]; without a writable cgroup2 file system, records none.
    pub(crate) fn make() -> OwnParent {
        let dir = cgroup2_mount()
            .map(|m| m.join(format!("elect-bench-{}", std::process::id())))
            .filter(|d| std::fs::create_dir(d).is_ok());
        let _ = PARENT.set(dir);
        OwnParent
    }
}

impl Drop for OwnParent {
    fn drop(&mut self) {
        if let Some(dir) = parent() {
            remove_tree(dir);
        }
    }
}

/// Removes the cgroup `dir` and every cgroup below it, deepest first
/// (best effort: a group still in use stays).
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The mount point of the first cgroup2 file system in
/// `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mount_of_cgroup2(&info)
}

/// The mount point of the first cgroup2 line of a `mountinfo` text (its
/// fifth field; the file system type follows the ` - ` separator).
fn mount_of_cgroup2(info: &str) -> Option<PathBuf> {
    info.lines().find_map(|line| {
        let (fields, rest) = line.split_once(" - ")?;
        let fstype = rest.split_whitespace().next()?;
        if fstype != "cgroup2" {
            return None;
        }
        fields.split_whitespace().nth(4).map(PathBuf::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_among_others() {
        let info = "\
24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid shared:9 - cgroup cgroup rw,memory
35 25 0:31 / /sys/fs/cgroup/unified rw,nosuid shared:14 - cgroup2 cgroup2 rw,nsdelegate
";
        assert_eq!(
            mount_of_cgroup2(info),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            mount_of_cgroup2("24 1 8:1 / / rw - ext4 /dev/vda rw\n"),
            None
        );
    }
}
