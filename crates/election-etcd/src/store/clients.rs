//! One gRPC channel per process for every election opened to the same
//! endpoints with the same credentials and timings (issue 44), as NATS
//! shares one client (ADR 0106) and PostgreSQL one connection (ADR 0105).
//! Per runtime, too: a channel's connection runs as a task of the runtime
//! it was made on, and dies with that runtime, so an election opened on
//! another runtime of the same process gets a channel of its own.
//!
//! A process-global registry maps what defines a channel ([`ClientKey`])
//! to a weak handle of the [`Client`] made for it. [`shared`] hands out the
//! live one, or connects once (callers that arrive while it is being made
//! wait for it, and share it). The registry never keeps a client alive:
//! every [`Store`](crate::store::Store) holds its [`SharedClient`], and
//! when the last is dropped the entry is dead and the next opening
//! connects afresh (its channel, its authentication, its cluster ID).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::store::client::{Client, Credentials};

/// What defines a channel: two openings with equal keys share a client.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey {
    /// The `host:port` addresses, trimmed, sorted and without repeats.
    endpoints: Vec<String>,
    /// `user`, `password`.
    credentials: Option<(String, String)>,
    /// The request timeout (every request's bound, the connect's).
    timeout: Duration,
    /// The HTTP/2 keep-alive interval.
    keepalive: Duration,
    /// The tokio runtime the opening runs on (`None` outside one).
    runtime: Option<tokio::runtime::Id>,
}

impl ClientKey {
    /// A key for `endpoints` (comma-separated, in any order, repeats
    /// allowed).
    pub(crate) fn new(
        endpoints: &str,
        credentials: Option<&Credentials>,
        timeout: Duration,
        keepalive: Duration,
    ) -> Self {
        let mut list: Vec<String> = endpoints.split(',').map(|e| e.trim().to_owned()).collect();
        list.sort();
        list.dedup();
        ClientKey {
            endpoints: list,
            credentials: credentials.map(|c| (c.user.clone(), c.password.clone())),
            timeout,
            keepalive,
            runtime: tokio::runtime::Handle::try_current().ok().map(|h| h.id()),
        }
    }
}

/// Secrets stay out of logs: only the endpoints and the user.
impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKey")
            .field("endpoints", &self.endpoints)
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .field("timeout", &self.timeout)
            .field("keepalive", &self.keepalive)
            .field("runtime", &self.runtime)
            .finish()
    }
}

/// A client of the registry, once connected. Holding it keeps the
/// registry's entry alive.
#[derive(Debug, Default)]
pub(crate) struct SharedClient {
    client: OnceCell<Arc<Client>>,
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
) -> Result<(Arc<SharedClient>, Arc<Client>), E>
where
    F: Future<Output = Result<Client, E>>,
{
    let slot = {
        let mut map = registry().lock().unwrap_or_else(|p| p.into_inner());
        // Dead entries go whenever the map is touched: it stays as small
        // as the number of live channels.
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
    let client = slot
        .client
        .get_or_try_init(|| async { connect().await.map(Arc::new) })
        .await?
        .clone();
    Ok((slot, client))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(endpoints: &str) -> ClientKey {
        ClientKey::new(
            endpoints,
            None,
            Duration::from_secs(1),
            Duration::from_secs(5),
        )
    }

    #[test]
    fn keys_ignore_order_spaces_and_repeats_but_not_credentials() {
        assert_eq!(key("b:1, a:1"), key("a:1,b:1,a:1"));
        assert_ne!(key("a:1"), key("a:2"));
        let secret = Credentials {
            user: "app".into(),
            password: "s3cret".into(),
        };
        let with = ClientKey::new(
            "a:1",
            Some(&secret),
            Duration::from_secs(1),
            Duration::from_secs(5),
        );
        assert_ne!(with, key("a:1"));
        let shown = format!("{with:?}");
        assert!(!shown.contains("s3cret"), "a secret in {shown}");
        assert!(shown.contains("app"), "{shown}");
    }

    /// A failed connect leaves no live entry, and the next caller connects
    /// again.
    #[tokio::test]
    async fn a_failed_connect_leaves_nothing_behind() {
        let k = key("failed.invalid:1");
        let failed = shared(k.clone(), || async { Err::<Client, _>("refused") }).await;
        assert_eq!(failed.err(), Some("refused"));
        let map = registry().lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            map.get(&k).is_none_or(|w| w.strong_count() == 0),
            "a failed connect left a live entry"
        );
    }
}
