//! One client per process for every election opened to the same servers
//! with the same credentials and connect options (issue 42, ADR 0106).
//!
//! A process-global registry maps what defines a connection ([`ClientKey`])
//! to a weak handle of the client made for it. [`shared`] hands out the
//! live one, or connects once (callers that arrive while the connection is
//! being made wait for it, and share it). The registry never keeps a
//! client alive: every [`Connection`](crate::store::connection::Connection)
//! opened over a shared client holds a [`SharedClient`], and when the last
//! of them is dropped the entry is dead and the next opening connects
//! afresh. One per runtime, too: the client's connection runs as a task of
//! the runtime it was made on and dies with it, so an election opened on
//! another runtime of the process gets a client of its own. A client the
//! user brings
//! ([`NatsElection::with_client`](crate::NatsElection::with_client)) is
//! never put in the registry.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::OnceCell;

/// What defines a connection: two openings with equal keys share a client.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey {
    /// The server addresses, trimmed, sorted and without repeats: the
    /// client connects to any of them and learns the rest of a cluster.
    pub(crate) servers: Vec<String>,
    /// `user`, `password`.
    pub(crate) user: Option<(String, String)>,
    pub(crate) token: Option<String>,
    /// A credentials file, by its path.
    pub(crate) creds: Option<PathBuf>,
    pub(crate) connection_timeout: Duration,
    pub(crate) ping_interval: Duration,
    /// The tokio runtime the opening runs on (`None` outside one).
    pub(crate) runtime: Option<tokio::runtime::Id>,
}

impl ClientKey {
    /// A key for `servers` (in any order, repeats allowed) without
    /// credentials.
    pub(crate) fn new(
        servers: impl IntoIterator<Item = String>,
        connection_timeout: Duration,
        ping_interval: Duration,
    ) -> Self {
        let mut servers: Vec<String> = servers
            .into_iter()
            .map(|s| {
                let s = s.trim();
                if s.contains("://") {
                    s.to_owned()
                } else {
                    format!("nats://{s}")
                }
            })
            .collect();
        servers.sort();
        servers.dedup();
        ClientKey {
            servers,
            user: None,
            token: None,
            creds: None,
            connection_timeout,
            ping_interval,
            runtime: tokio::runtime::Handle::try_current().ok().map(|h| h.id()),
        }
    }
}

/// Secrets stay out of logs: only the servers and whether credentials are set.
impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKey")
            .field("servers", &self.servers)
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("token", &self.token.is_some())
            .field("creds", &self.creds)
            .field("connection_timeout", &self.connection_timeout)
            .field("ping_interval", &self.ping_interval)
            .field("runtime", &self.runtime)
            .finish()
    }
}

/// A client of the registry, once connected. Holding it keeps the
/// registry's entry alive.
#[derive(Debug, Default)]
pub(crate) struct SharedClient {
    client: OnceCell<async_nats::Client>,
}

type Registry = Mutex<HashMap<ClientKey, Weak<SharedClient>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// The process's client for `key`: the live one, or a new one made by
/// `connect` (once, whoever else asks meanwhile). A failed `connect` is
/// returned to its caller and leaves nothing behind; the next caller
/// connects again.
///
/// Cancel safety: cancel safe (a cancelled connect leaves the slot empty).
pub(crate) async fn shared<E, F>(
    key: ClientKey,
    connect: impl FnOnce() -> F,
) -> Result<(Arc<SharedClient>, async_nats::Client), E>
where
    F: Future<Output = Result<async_nats::Client, E>>,
{
    let slot = {
        let mut map = registry().lock().unwrap_or_else(|p| p.into_inner());
        // Dead entries go whenever the map is touched: it stays as small
        // as the number of live connections.
        map.retain(|_, weak| weak.strong_count() > 0);
        match map.get(&key).and_then(Weak::upgrade) {
            Some(slot) => slot,
            None => {
                let slot = Arc::new(SharedClient::default());
                map.insert(key, Arc::downgrade(&slot));
                slot
            }
        }
    };
    let client = slot.client.get_or_try_init(connect).await?.clone();
    Ok((slot, client))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(servers: &[&str]) -> ClientKey {
        ClientKey::new(
            servers.iter().map(|s| (*s).to_owned()),
            Duration::from_secs(1),
            Duration::from_secs(5),
        )
    }

    #[test]
    fn keys_ignore_order_spaces_and_repeats_but_not_credentials() {
        assert_eq!(key(&["b:1", " a:1"]), key(&["a:1", "b:1", "a:1"]));
        assert_ne!(key(&["a:1"]), key(&["a:2"]));
        let mut with_token = key(&["a:1"]);
        with_token.token = Some("t".into());
        assert_ne!(with_token, key(&["a:1"]));
        let shown = format!("{with_token:?}");
        assert!(!shown.contains("\"t\""), "a secret in {shown}");
    }

    /// One connection per key while any holder lives; a new one after the
    /// last holder is gone; a failed connect leaves nothing behind.
    #[tokio::test]
    async fn one_client_per_key_while_held() {
        let server = nats_testkit::Server::start().expect("nats-server");
        let url = server.url();
        let k = key(&[url.as_str()]);
        let connect = || async { async_nats::connect(url.as_str()).await };
        let (a, client) = shared(k.clone(), connect).await.expect("connect");
        let (b, _) = shared(k.clone(), connect).await.expect("shared");
        assert!(Arc::ptr_eq(&a, &b));
        client.flush().await.expect("flush");
        assert_eq!(server.connections().expect("connz"), 1);
        drop((a, b));
        let (c, _) = shared(k.clone(), connect).await.expect("again");
        assert!(
            c.client.get().is_some(),
            "a new client after the last holder went"
        );
        let failed = shared(key(&["x:1"]), || async {
            async_nats::connect("nats://127.0.0.1:1").await
        })
        .await;
        assert!(failed.is_err());
        let map = registry().lock().unwrap();
        assert!(
            map.get(&key(&["x:1"]))
                .is_none_or(|w| w.strong_count() == 0),
            "a failed connect left a live entry"
        );
    }
}
