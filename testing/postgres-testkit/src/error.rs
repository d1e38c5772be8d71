//! The test kit's one error type.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong starting or driving a PostgreSQL server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The PostgreSQL binaries are not installed where the kit looks.
    #[error(
        "PostgreSQL binaries not found ({looked}); install Debian's package with \
         `apt-get install -y postgresql` or set POSTGRES_BIN_DIR to a directory \
         holding initdb, postgres and psql"
    )]
    Missing {
        /// Where the kit looked.
        looked: String,
    },

    /// A PostgreSQL tool ran but failed.
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        /// The command line.
        command: String,
        /// How it exited.
        status: String,
        /// What it printed (stderr, else stdout), trimmed.
        output: String,
    },

    /// The server did not become ready in time, or exited while starting.
    #[error(
        "PostgreSQL on port {port} did not start within {waited:?}; last lines of {log}:\n{log_tail}"
    )]
    Start {
        /// The port it was to listen on.
        port: u16,
        /// How long the kit waited.
        waited: Duration,
        /// Its log file.
        log: PathBuf,
        /// The last lines of that log.
        log_tail: String,
    },

    /// An I/O operation of the test kit itself failed.
    #[error("{context}")]
    Io {
        /// What the kit was doing.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// The server could not bind its port (taken after it was picked).
    pub(crate) fn is_port_clash(&self) -> bool {
        matches!(self, Self::Start { log_tail, .. } if log_tail.contains("could not bind")
            || log_tail.contains("Address already in use"))
    }
}
