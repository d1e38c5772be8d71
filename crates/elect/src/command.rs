//! The command `elect run` runs, checked before the campaign: a command
//! that cannot run must not cost an epoch, nor keep others out while it
//! fails.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::exit::{self, Failure};

/// Whether `path` is a file this process may execute.
fn executable(path: &Path) -> bool {
    path.is_file() && nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// Where a shell would find `program`: itself if it has a `/`, else the
/// first executable file of that name in `$PATH` (an empty entry is the
/// current directory). `Err` with 127 when there is none, 126 when the
/// only ones found cannot be executed.
pub(crate) fn resolve(program: &str, path_var: Option<&OsStr>) -> Result<PathBuf, Failure> {
    if program.is_empty() {
        return Err(Failure::new(
            exit::NOT_FOUND,
            "cannot run \"\": an empty command name",
        ));
    }
    let not_executable = |p: &Path| {
        Failure::new(
            exit::CANNOT_EXECUTE,
            format!(
                "cannot run {program:?}: {} is not an executable file",
                p.display()
            ),
        )
        .hint("make it executable (chmod +x) or run it through its interpreter (sh FILE)")
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return match std::fs::metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::new(
                exit::NOT_FOUND,
                format!("cannot run {program:?}: no such file"),
            )),
            _ if executable(&p) => Ok(p),
            _ => Err(not_executable(&p)),
        };
    }
    let mut found_but_not_executable = None;
    for dir in path_var
        .unwrap_or_default()
        .as_bytes()
        .split(|b| *b == b':')
    {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = dir.join(program);
        if executable(&candidate) {
            return Ok(candidate);
        }
        if candidate.exists() && found_but_not_executable.is_none() {
            found_but_not_executable = Some(candidate);
        }
    }
    match found_but_not_executable {
        Some(p) => Err(not_executable(&p)),
        None => Err(Failure::new(
            exit::NOT_FOUND,
            format!("cannot run {program:?}: not found in $PATH"),
        )
        .hint("check the command's name, or give its full path")),
    }
}

/// Checks that `command`'s program exists and is executable, before the
/// campaign. The exec can still fail later (the file removed meanwhile):
/// that is reported then, after the term is resigned.
pub(crate) fn check(command: &[String]) -> Result<(), Failure> {
    let Some(program) = command.first() else {
        return Ok(());
    };
    resolve(program, std::env::var_os("PATH").as_deref()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn programs_are_found_as_a_shell_finds_them() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let path = std::ffi::OsString::from(format!("/nonexistent:{}", dir.path().display()));
        // Found but not executable: 126, by name and by path.
        assert_eq!(
            resolve("tool", Some(&path)).unwrap_err().code,
            exit::CANNOT_EXECUTE
        );
        let full = tool.display().to_string();
        assert_eq!(resolve(&full, None).unwrap_err().code, exit::CANNOT_EXECUTE);
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve("tool", Some(&path)).unwrap(), tool);
        assert_eq!(resolve(&full, None).unwrap(), tool);
        // Missing: 127.
        assert_eq!(
            resolve("no-such-tool", Some(&path)).unwrap_err().code,
            exit::NOT_FOUND
        );
        assert_eq!(
            resolve("/no/such/tool", None).unwrap_err().code,
            exit::NOT_FOUND
        );
        assert_eq!(resolve("", Some(&path)).unwrap_err().code, exit::NOT_FOUND);
        // A directory is not executable.
        let d = dir.path().display().to_string();
        assert_eq!(resolve(&d, None).unwrap_err().code, exit::CANNOT_EXECUTE);
    }
}
