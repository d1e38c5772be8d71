//! The default directory: where the file backend keeps its elections
//! without `--backend`, on a disk so that epochs outlive a reboot:
//! `$XDG_STATE_HOME/elect`, else `/var/lib/elect` for root, else
//! `$HOME/.local/state/elect` (mode 0700; see [`default_dir`]).

use std::path::PathBuf;

use crate::exit::Failure;

/// An absolute, non-empty path in environment variable `var`.
fn absolute_env(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Where the default directory is (see [`default_dir`]), given the
/// environment's `XDG_STATE_HOME` and `HOME` (each only if absolute) and
/// whether the user is root. `None`: a user other than root without
/// either.
fn default_dir_for(
    state_home: Option<PathBuf>,
    home: Option<PathBuf>,
    root: bool,
) -> Option<PathBuf> {
    match (state_home, home) {
        (Some(state), _) => Some(state.join("elect")),
        _ if root => Some(PathBuf::from("/var/lib/elect")),
        (None, Some(home)) => Some(home.join(".local/state/elect")),
        (None, None) => None,
    }
}

/// Where the default directory is (see [`default_dir`]); a user other than
/// root with neither `XDG_STATE_HOME` nor `HOME` has none.
pub(crate) fn default_dir_path() -> Result<PathBuf, Failure> {
    let root = nix::unistd::getuid().is_root();
    default_dir_for(absolute_env("XDG_STATE_HOME"), absolute_env("HOME"), root).ok_or_else(|| {
        Failure::config(
            "no default directory for the file backend: neither XDG_STATE_HOME nor HOME is set \
             (to an absolute path)",
        )
        .hint(
            "pass --backend file:///some/dir on a disk you can write to, or set XDG_STATE_HOME \
             or HOME",
        )
    })
}

/// The default directory, where the file backend keeps its elections
/// without `--backend`: `$XDG_STATE_HOME/elect` if `XDG_STATE_HOME` is an
/// absolute path; else `/var/lib/elect` for root; else
/// `$HOME/.local/state/elect`. On a disk, not in a runtime directory: the
/// epoch records must outlive a reboot (a tmpfs there is refused by the
/// file backend, ADR 0097). Created with its parents (mode 0700) if
/// missing, and refused if another user owns it.
pub(crate) fn default_dir() -> Result<PathBuf, Failure> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::getuid();
    let dir = default_dir_path()?;
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
    {
        return Err(Failure::config(format!(
            "cannot create the default directory {}: {e}",
            dir.display()
        ))
        .hint("pass --backend file:///some/dir you can write to"));
    }
    let meta =
        std::fs::metadata(&dir).map_err(|e| Failure::config(format!("{}: {e}", dir.display())))?;
    if meta.uid() != uid.as_raw() {
        return Err(Failure::config(format!(
            "the default directory {} belongs to another user",
            dir.display()
        ))
        .hint("pass --backend file:///some/dir of your own"));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_directory_is_on_a_disk_and_root_has_its_own() {
        let p = |s: &str| Some(PathBuf::from(s));
        // XDG_STATE_HOME wins, for root too (set explicitly).
        assert_eq!(
            default_dir_for(p("/st"), p("/home/u"), false),
            p("/st/elect")
        );
        assert_eq!(default_dir_for(p("/st"), p("/root"), true), p("/st/elect"));
        // Else root's is /var/lib/elect, whatever HOME is.
        assert_eq!(default_dir_for(None, p("/root"), true), p("/var/lib/elect"));
        assert_eq!(default_dir_for(None, None, true), p("/var/lib/elect"));
        // Else $HOME/.local/state/elect; without HOME, none.
        assert_eq!(
            default_dir_for(None, p("/home/u"), false),
            p("/home/u/.local/state/elect")
        );
        assert_eq!(default_dir_for(None, None, false), None);
    }
}
