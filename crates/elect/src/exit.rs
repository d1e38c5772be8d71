//! Exit codes, and the failures that end `elect` with one.

use std::error::Error as StdError;

/// The command ran and exited with 0 (otherwise its own code is passed on;
/// a command killed by signal N gives 128 + N, as in a shell).
pub(crate) const OK: u8 = 0;
/// Bad usage (unknown flag, missing `--name`, ...).
pub(crate) const USAGE: u8 = 64;
/// Transient: the backend cannot be reached or failed in a way retrying
/// can fix (server down, database locked for too long, disk full, I/O
/// error): try again later.
pub(crate) const UNAVAILABLE: u8 = 69;
/// Something inside `elect` failed.
pub(crate) const INTERNAL: u8 = 70;
/// Not elected: `--no-wait` and another candidate leads, or `--timeout`
/// ran out (change with `--conflict-exit-code`).
pub(crate) const NOT_ELECTED: u8 = 75;
/// Permanent: bad configuration or unusable stored state (a bad backend
/// URL, an unusable directory or file, a file that is not an election
/// database, settings the backend refuses). Retrying will not help; the
/// hint names the fix.
pub(crate) const CONFIG: u8 = 78;
/// The term was lost while the command ran; the command was stopped
/// (change with `--lost-exit-code`).
pub(crate) const LOST: u8 = 79;
/// The command could not be executed (not executable).
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// A failure: what went wrong, what to do, and the exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            hint: None,
        }
    }

    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Failure::new(CONFIG, message)
    }
}

/// An error and its sources, joined: `a: b: c` (each once).
pub(crate) fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

impl From<election_core::Error> for Failure {
    /// Sorts every error into permanent (78, with a hint naming the fix)
    /// or transient (69): by the backend error in the source chain where
    /// there is one, else by the core's grouping (see ADR 0018).
    fn from(e: election_core::Error) -> Self {
        use election_core::Error as E;
        let message = chain(&e);
        match e {
            E::HeldElsewhere { .. } | E::NotHeld { .. } => {
                return Failure::new(NOT_ELECTED, message);
            }
            E::Lost(_) => return Failure::new(LOST, message),
            _ => {}
        }
        if let Some((code, hint)) = crate::backend::classify(&e) {
            return Failure::new(code, message).hint(hint);
        }
        match e {
            E::Config(_) => Failure::config(message).hint("fix the flags or the backend URL"),
            E::Unavailable { .. } | E::OutcomeUnknown { .. } => Failure::new(UNAVAILABLE, message)
                .hint("check that the backend is reachable (server running, disk not full), then try again"),
            E::Corrupt { .. } => Failure::new(CONFIG, message).hint(
                "the stored election state is damaged; never delete it (epochs would restart and \
                 tokens go back): on the file backend, stop the election's processes and run \
                 `elect repair-epoch --name NAME --epoch N` with N at least the highest token \
                 your resources hold",
            ),
            _ => Failure::new(INTERNAL, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_what_the_caller_should_do() {
        let name = election_core::ElectionName::new("jobs").unwrap();
        let io = std::io::Error::other("connection refused");
        let f = Failure::from(election_core::Error::unavailable(&name, io));
        assert_eq!(f.code, UNAVAILABLE);
        assert!(f.message.contains("connection refused"), "{}", f.message);
        let bad = election_core::Error::from(election_core::ConfigError::EpochExhausted);
        assert_eq!(Failure::from(bad).code, CONFIG);
    }
}
