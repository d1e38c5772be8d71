//! The error type of this crate.

use std::io;
use std::path::PathBuf;

/// What went wrong starting or driving etcd.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `ETCD_BIN` names no working etcd.
    #[error(
        "ETCD_BIN={} is not a working etcd: {reason}\n\
         point ETCD_BIN at an etcd binary, or unset it to use the pinned etcd {version} \
         (installed automatically under the target directory)",
        path.display(),
        version = crate::ETCD_VERSION
    )]
    BadOverride {
        /// The path given.
        path: PathBuf,
        /// Why it does not work.
        reason: String,
    },

    /// The pinned etcd could not be installed.
    #[error(
        "installing etcd {version} into {d} failed at `{step}`: {detail}\n\
         to install it by hand, run:\n    \
         cargo fetch --manifest-path {d}.tmp/Cargo.toml (a crate depending on \
         etcd-bin-vendored-linux-amd64 = \"={version}\"), then tar xzf the .crate from \
         ~/.cargo/registry/cache and copy its bin/etcd to {d}/etcd\n\
         or install Debian's etcd-server (apt-get install etcd-server) and set \
         ETCD_BIN=/usr/bin/etcd",
        d = dir.display(),
        version = crate::ETCD_VERSION
    )]
    Install {
        /// Where it was to go.
        dir: PathBuf,
        /// The step that failed.
        step: String,
        /// What it said.
        detail: String,
    },

    /// A member did not start (or did not become ready).
    #[error(
        "etcd {name} did not start: {reason}\n--- last lines of {} ---\n{log_tail}",
        log.display()
    )]
    Start {
        /// The member.
        name: String,
        /// Why.
        reason: String,
        /// Its log.
        log: PathBuf,
        /// The log's last lines.
        log_tail: String,
    },

    /// An I/O step failed.
    #[error("{what}: {source}")]
    Io {
        /// The step.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },

    /// A proxy's rewrite would change a frame's length.
    #[error("a proxy's rewrite keeps lengths: {from:?} and {to:?} differ (or are empty)")]
    Rewrite {
        /// What was to be replaced.
        from: String,
        /// By what.
        to: String,
    },

    /// etcd's gateway answered with something other than success.
    #[error("etcd at {endpoint} answered {path} with {answer}")]
    Gateway {
        /// The member.
        endpoint: String,
        /// The request's path.
        path: String,
        /// The answer's status line and body.
        answer: String,
    },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }

    pub(crate) fn is_port_clash(&self) -> bool {
        matches!(self, Error::Start { log_tail, .. } if log_tail.contains("address already in use"))
    }
}
