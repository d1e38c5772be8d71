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

/// The hint for damaged election state, where the backend names no repair
/// of its own.
const REPAIR_HINT: &str = "the stored election state is damaged; never delete it (epochs would \
    restart and tokens go back): on the file backend, stop the election's processes and run \
    `elect repair-epoch --name NAME --epoch N` with N at least the highest token your resources hold";

/// The failure for `error`, of any backend: the one place a class
/// ([`election_core::Disposition`], found by [`election_url::classify`]
/// in the error's chain) becomes an exit code. Permanent and damaged
/// state exit 78 with a hint naming the fix, transient failures 69 (ADR
/// 0018), a conflict 75 and a lost term 79 (without a hint); an error
/// that does not classify itself 70. A class without a hint of its own
/// gets the disposition's.
pub(crate) fn failure(error: &(dyn StdError + 'static)) -> Failure {
    use election_core::Disposition as D;
    let message = chain(error);
    let Some(class) = election_url::classify(error) else {
        return Failure::new(INTERNAL, message);
    };
    let (code, default) = match class.disposition {
        D::Conflict => return Failure::new(NOT_ELECTED, message),
        D::Lost => return Failure::new(LOST, message),
        D::Transient | D::OutcomeUnknown => (
            UNAVAILABLE,
            Some(
                "check that the backend is reachable (server running, disk not full), then try \
                 again",
            ),
        ),
        D::Permanent => (CONFIG, Some("fix the flags or the backend URL")),
        D::Corrupt => (CONFIG, Some(REPAIR_HINT)),
        _ => (INTERNAL, None),
    };
    let failure = Failure::new(code, message);
    match class.hint.as_deref().or(default) {
        Some(hint) => failure.hint(hint),
        None => failure,
    }
}

/// A campaign's error as `elect` reports it: a name used in another
/// shape (78) names the fix.
pub(crate) fn campaign_failure(e: election_core::Error) -> Failure {
    let mismatch = matches!(
        &e,
        election_core::Error::Config(election_core::ConfigError::SlotsMismatch { .. })
    );
    let failure = Failure::from(e);
    if mismatch {
        return failure.hint(
            "give every candidate of a name the same --slots (or none); `elect leader --slots N` shows the slots' holders",
        );
    }
    failure
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
