//! Real PostgreSQL servers for tests and benchmarks: [`Server`] runs one
//! `postgres` process tree from Debian's `postgresql` package, initialised
//! into its own temp directory, listening on a free port on 127.0.0.1 and
//! on a unix socket in that directory, killed and removed on drop.
//! [`Proxy`] is a TCP proxy in front of it that can black-hole traffic.
//!
//! ```no_run
//! # fn main() -> Result<(), postgres_testkit::Error> {
//! let mut server = postgres_testkit::Server::start()?;
//! let url = server.url(); // postgres://postgres@127.0.0.1:<port>/postgres
//! server.sql("CREATE TABLE t (x int)")?;
//! server.kill()?; // SIGKILL to the whole process tree
//! server.restart()?; // same port, same data
//! # let _ = url; Ok(()) }
//! ```
//!
//! # Which server
//!
//! The binaries come from `$POSTGRES_BIN_DIR` if set, else from the newest
//! `/usr/lib/postgresql/<version>/bin` with `initdb`, `postgres` and `psql`
//! (Debian's layout). Missing binaries are an [`Error::Missing`] that names
//! the command to install them (`apt-get install -y postgresql`); tests
//! should `.expect()` it so that they fail rather than skip.
//!
//! PostgreSQL refuses to run as root. Run as root, the kit runs `initdb`
//! and `postgres` as the `postgres` user (Debian's package creates it) and
//! hands it the temp directory; otherwise as the current user.
//!
//! Each test process runs `initdb` once (into a template directory, with
//! `--no-sync`) and copies the template for every server it starts. The
//! servers themselves run with `fsync = on`: what a test commits is durable
//! as in production.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod binaries;
mod error;
mod ports;
mod proxy;
mod server;
mod template;

pub use binaries::{Binaries, POSTGRES_BIN_DIR_ENV, binaries};
pub use error::Error;
pub use proxy::Proxy;
pub use server::{DEFAULT_MAX_CONNECTIONS, Server};
