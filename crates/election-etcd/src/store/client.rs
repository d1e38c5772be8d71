//! [`Client`]: one gRPC channel to an etcd cluster, every request bounded
//! by the options' request timeout, every answer's cluster ID checked
//! against the one seen first.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use http::uri::PathAndQuery;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::error::{Cause, Error};
use crate::store::proto::{
    AuthenticateRequest, AuthenticateResponse, KeyValue, LeaseGrantRequest, LeaseGrantResponse,
    LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseRevokeRequest, LeaseRevokeResponse,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, RangeRequest, RangeResponse, ResponseHeader,
    StatusRequest, StatusResponse, TxnRequest, TxnResponse, WatchCreateRequest, WatchRequest,
    WatchRequestUnion, WatchResponse,
};

/// A user name and password for etcd's authentication.
#[derive(Clone)]
pub(crate) struct Credentials {
    pub(crate) user: String,
    pub(crate) password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Whether a request writes: a write that fails in flight has an unknown
/// outcome; a read that fails changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Write,
}

/// One channel to a cluster (balanced over its members).
pub(crate) struct Client {
    channel: Channel,
    endpoints: String,
    timeout: Duration,
    credentials: Option<Credentials>,
    token: Mutex<Option<MetadataValue<Ascii>>>,
    cluster: OnceLock<u64>,
    /// The server version a member reported, once it passed the check.
    version: OnceLock<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.endpoints)
            .field("timeout", &self.timeout)
            .field("cluster", &self.cluster.get())
            .finish_non_exhaustive()
    }
}

/// The outcome of a keep-alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeptAlive {
    /// The lease lives on (etcd reset its TTL).
    Alive,
    /// etcd knows no such lease: it expired or was revoked.
    Gone,
}

/// What a watch delivered.
#[derive(Debug)]
pub(crate) enum Watched {
    /// Events (at least one).
    Events(Vec<crate::store::proto::Event>),
    /// etcd cancelled the watch (its start revision was compacted, or
    /// another reason): the caller reads again.
    Cancelled,
}

/// A watch stream on one key or range.
pub(crate) struct Watch {
    responses: tonic::Streaming<WatchResponse>,
    // Keeps the request side open: closing it ends the watch on the server.
    _keep: tokio::sync::oneshot::Sender<()>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

impl Watch {
    /// The next events, or `Cancelled`; an error when the stream broke.
    pub(crate) async fn next(&mut self) -> Result<Watched, Error> {
        loop {
            match self.responses.message().await {
                Ok(Some(r)) if r.canceled => return Ok(Watched::Cancelled),
                Ok(Some(r)) if r.compact_revision > 0 => return Ok(Watched::Cancelled),
                Ok(Some(r)) if !r.events.is_empty() => return Ok(Watched::Events(r.events)),
                Ok(Some(_)) => {} // created, or a progress notification
                Ok(None) => {
                    return Err(Error::Unavailable {
                        what: "watch (the stream ended)",
                        source: None,
                    });
                }
                Err(status) => return Err(Error::unavailable("watch", status)),
            }
        }
    }
}

fn path(p: &'static str) -> PathAndQuery {
    PathAndQuery::from_static(p)
}

impl Client {
    /// A channel to `endpoints` (`host:port`, comma-separated); checks that
    /// the cluster answers and authenticates if `credentials` are given.
    pub(crate) async fn connect(
        endpoints: &str,
        timeout: Duration,
        keepalive: Duration,
        credentials: Option<Credentials>,
    ) -> Result<Client, Error> {
        let bad = |reason: String| {
            Error::Config(election_core::ConfigError::BadSetting {
                setting: "url",
                reason,
            })
        };
        let mut list = Vec::new();
        for hp in endpoints.split(',').map(str::trim) {
            if hp.is_empty() || hp.contains('/') || !hp.contains(':') {
                return Err(bad(format!(
                    "{endpoints:?} is not a list of host:port addresses"
                )));
            }
            let endpoint = Endpoint::from_shared(format!("http://{hp}"))
                .map_err(|e| bad(format!("{hp:?} is not a host:port address: {e}")))?
                .connect_timeout(timeout.max(Duration::from_secs(1)))
                .tcp_nodelay(true)
                .http2_keep_alive_interval(keepalive)
                .keep_alive_timeout(timeout)
                .keep_alive_while_idle(true);
            list.push(endpoint);
        }
        let channel = if list.len() == 1 {
            list.remove(0).connect_lazy()
        } else {
            Channel::balance_list(list.into_iter())
        };
        let client = Client {
            channel,
            endpoints: endpoints.to_owned(),
            timeout,
            credentials,
            token: Mutex::new(None),
            cluster: OnceLock::new(),
            version: OnceLock::new(),
        };
        if client.credentials.is_some() {
            client.authenticate().await.map_err(|e| match e {
                Error::Unavailable {
                    source: Some(s), ..
                } => client.connect_error(s),
                e => e,
            })?;
        }
        Ok(client)
    }

    fn connect_error(&self, source: Cause) -> Error {
        Error::Connect {
            endpoints: self.endpoints.clone(),
            source,
        }
    }

    /// One read of `key` (a key the user may read): proves the cluster
    /// answers (a failure is `Error::Connect`) and fixes its ID.
    pub(crate) async fn probe(&self, key: &[u8]) -> Result<(), Error> {
        self.range(key, Kind::Read)
            .await
            .map(drop)
            .map_err(|e| self.unreached(e))
    }

    /// An opening's read that found no member answering: `Error::Connect`.
    fn unreached(&self, e: Error) -> Error {
        match e {
            Error::Unavailable { source, .. } => {
                self.connect_error(source.unwrap_or_else(|| "no answer".into()))
            }
            e => e,
        }
    }

    /// The server version of the member answering (`Maintenance.Status`),
    /// checked against the oldest release this crate works with
    /// (`version.rs`); asked once per channel. A failure to ask is
    /// `Error::Connect`, as the probe's.
    pub(crate) async fn checked_version(&self) -> Result<(), Error> {
        if self.version.get().is_some() {
            return Ok(());
        }
        let r: StatusResponse = self
            .unary(
                "/etcdserverpb.Maintenance/Status",
                "read the server's version",
                Kind::Read,
                StatusRequest {},
            )
            .await
            .map_err(|e| self.unreached(e))?;
        self.check(r.header.as_ref())?;
        crate::store::version::check(&r.version)?;
        self.version.get_or_init(|| r.version);
        Ok(())
    }

    /// The version [`Client::checked_version`] read, once it did.
    pub(crate) fn version(&self) -> Option<&str> {
        self.version.get().map(String::as_str)
    }

    /// The addresses given.
    pub(crate) fn endpoints(&self) -> &str {
        &self.endpoints
    }

    /// The cluster ID seen first (0 before any answer).
    pub(crate) fn cluster_id(&self) -> u64 {
        self.cluster.get().copied().unwrap_or(0)
    }

    fn check(&self, header: Option<&ResponseHeader>) -> Result<i64, Error> {
        let Some(h) = header else {
            return Ok(0);
        };
        let was = *self.cluster.get_or_init(|| h.cluster_id);
        if was != h.cluster_id {
            return Err(Error::ClusterChanged {
                was,
                now: h.cluster_id,
            });
        }
        Ok(h.revision)
    }

    async fn authenticate(&self) -> Result<(), Error> {
        let Some(c) = self.credentials.clone() else {
            return Ok(());
        };
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            grpc.unary(
                tonic::Request::new(AuthenticateRequest {
                    name: c.user.clone(),
                    password: c.password.clone(),
                }),
                path("/etcdserverpb.Auth/Authenticate"),
                tonic_prost::ProstCodec::<AuthenticateRequest, AuthenticateResponse>::default(),
            )
            .await
        };
        let response = match tokio::time::timeout(self.timeout, call).await {
            Err(_) => {
                return Err(Error::Unavailable {
                    what: "authenticate (no answer in time)",
                    source: None,
                });
            }
            Ok(Err(s)) if refused(&s) => {
                return Err(Error::Auth {
                    user: c.user,
                    source: Box::new(s),
                });
            }
            Ok(Err(s)) => return Err(Error::unavailable("authenticate", s)),
            Ok(Ok(r)) => r.into_inner(),
        };
        self.check(response.header.as_ref())?;
        let token = MetadataValue::try_from(response.token.as_str())
            .map_err(|e| Error::unavailable("authenticate (a token that is no header)", e))?;
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        Ok(())
    }

    fn request<M>(&self, message: M) -> tonic::Request<M> {
        let mut request = tonic::Request::new(message);
        if let Some(token) = self.token.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            request.metadata_mut().insert("token", token);
        }
        request
    }

    /// One unary call, bounded by the request timeout; a token that expired
    /// is renewed once.
    async fn unary<Q, R>(
        &self,
        route: &'static str,
        what: &'static str,
        kind: Kind,
        message: Q,
    ) -> Result<R, Error>
    where
        Q: prost::Message + Clone + Send + Sync + 'static,
        R: prost::Message + Default + Send + Sync + 'static,
    {
        let mut retried = false;
        // One bound for the call, whatever the balancer's retries.
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut refused_connection = None;
        loop {
            let mut grpc = tonic::client::Grpc::new(self.channel.clone());
            let request = self.request(message.clone());
            let call = async {
                grpc.ready()
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?;
                grpc.unary(
                    request,
                    path(route),
                    tonic_prost::ProstCodec::<Q, R>::default(),
                )
                .await
            };
            let status = match tokio::time::timeout_at(deadline, call).await {
                Ok(Ok(r)) => return Ok(r.into_inner()),
                // Only refused connections: nothing was sent.
                Err(_) if refused_connection.is_some() => refused_connection.take(),
                Err(_) => None,
                Ok(Err(s)) if never_connected(&s) && tokio::time::Instant::now() < deadline => {
                    // A member that is down: nothing was sent; the balancer
                    // may pick another member.
                    refused_connection = Some(s);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                Ok(Err(s)) => Some(s),
            };
            match status {
                Some(s)
                    if s.code() == Code::Unauthenticated
                        && self.credentials.is_some()
                        && !retried =>
                {
                    retried = true;
                    self.authenticate().await?;
                }
                Some(s) if refused(&s) => {
                    let user = self
                        .credentials
                        .as_ref()
                        .map_or_else(|| "(none)".to_owned(), |c| c.user.clone());
                    return Err(Error::Auth {
                        user,
                        source: Box::new(s),
                    });
                }
                Some(s) if kind == Kind::Write && !surely_not_applied(&s) => {
                    return Err(Error::OutcomeUnknown {
                        what,
                        after: self.timeout,
                        source: Some(Box::new(s)),
                    });
                }
                Some(s) => return Err(Error::unavailable(what, s)),
                None if kind == Kind::Write => {
                    return Err(Error::OutcomeUnknown {
                        what,
                        after: self.timeout,
                        source: None,
                    });
                }
                None => {
                    return Err(Error::Unavailable {
                        what,
                        source: Some(format!("no answer within {:?}", self.timeout).into()),
                    });
                }
            }
        }
    }

    /// Reads one key (linearizable).
    pub(crate) async fn range(
        &self,
        key: &[u8],
        kind: Kind,
    ) -> Result<(i64, Option<KeyValue>), Error> {
        let r: RangeResponse = self
            .unary(
                "/etcdserverpb.KV/Range",
                "read a key",
                kind,
                RangeRequest {
                    key: key.to_vec(),
                    ..Default::default()
                },
            )
            .await?;
        let revision = self.check(r.header.as_ref())?;
        Ok((revision, r.kvs.into_iter().next()))
    }

    /// Reads with a full request (ranges, limits, sorting).
    pub(crate) async fn range_with(
        &self,
        request: RangeRequest,
    ) -> Result<(i64, Vec<KeyValue>), Error> {
        let r: RangeResponse = self
            .unary("/etcdserverpb.KV/Range", "read keys", Kind::Read, request)
            .await?;
        let revision = self.check(r.header.as_ref())?;
        Ok((revision, r.kvs))
    }

    /// A transaction; `what` names it in errors.
    pub(crate) async fn txn(
        &self,
        what: &'static str,
        kind: Kind,
        txn: TxnRequest,
    ) -> Result<TxnResponse, Error> {
        let r: TxnResponse = self.unary("/etcdserverpb.KV/Txn", what, kind, txn).await?;
        self.check(r.header.as_ref())?;
        Ok(r)
    }

    /// Grants a lease of `ttl` seconds; its ID.
    pub(crate) async fn grant(&self, ttl: i64) -> Result<i64, Error> {
        let r: LeaseGrantResponse = self
            .unary(
                "/etcdserverpb.Lease/LeaseGrant",
                "grant a lease",
                Kind::Write,
                LeaseGrantRequest { ttl, id: 0 },
            )
            .await?;
        self.check(r.header.as_ref())?;
        if !r.error.is_empty() || r.id == 0 {
            return Err(Error::Unavailable {
                what: "grant a lease",
                source: Some(format!("etcd said: {:?}", r.error).into()),
            });
        }
        Ok(r.id)
    }

    /// Revokes a lease (deleting every key attached to it); a lease that
    /// is gone already is fine.
    pub(crate) async fn revoke(&self, lease: i64) -> Result<(), Error> {
        let r: Result<LeaseRevokeResponse, Error> = self
            .unary(
                "/etcdserverpb.Lease/LeaseRevoke",
                "revoke a lease",
                Kind::Write,
                LeaseRevokeRequest { id: lease },
            )
            .await;
        match r {
            Ok(r) => self.check(r.header.as_ref()).map(|_| ()),
            Err(Error::Unavailable {
                source: Some(s), ..
            }) if s
                .downcast_ref::<Status>()
                .is_some_and(|s| s.code() == Code::NotFound) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The TTL `lease` was granted with, in whole seconds (as the server
    /// set it: etcd may raise a TTL below its minimum); `None` if etcd no
    /// longer knows the lease (it expired or was revoked).
    pub(crate) async fn granted_ttl(&self, lease: i64) -> Result<Option<i64>, Error> {
        let r: Result<LeaseTimeToLiveResponse, Error> = self
            .unary(
                "/etcdserverpb.Lease/LeaseTimeToLive",
                "read a lease's TTL",
                Kind::Read,
                LeaseTimeToLiveRequest {
                    id: lease,
                    keys: false,
                },
            )
            .await;
        match r {
            Ok(r) => {
                self.check(r.header.as_ref())?;
                Ok((r.ttl >= 0 && r.granted_ttl > 0).then_some(r.granted_ttl))
            }
            Err(Error::Unavailable {
                source: Some(s), ..
            }) if s
                .downcast_ref::<Status>()
                .is_some_and(|s| s.code() == Code::NotFound) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// One keep-alive of `lease` (a stream of one request and one answer).
    pub(crate) async fn keep_alive(&self, lease: i64) -> Result<KeptAlive, Error> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match self.keep_alive_once(lease, deadline).await {
                Err(Error::Unavailable {
                    source: Some(s), ..
                }) if s.downcast_ref::<Status>().is_some_and(never_connected)
                    && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => return other,
            }
        }
    }

    async fn keep_alive_once(
        &self,
        lease: i64,
        deadline: tokio::time::Instant,
    ) -> Result<KeptAlive, Error> {
        let (keep, kept) = tokio::sync::oneshot::channel::<()>();
        // The request side stays open until the answer came.
        let requests = futures::stream::once(async move { LeaseKeepAliveRequest { id: lease } })
            .chain(
                futures::stream::once(async move {
                    let _ = kept.await;
                })
                .filter_map(|()| async { None::<LeaseKeepAliveRequest> }),
            );
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let request = self.request(requests);
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            let mut responses = grpc
                .streaming(
                    request,
                    path("/etcdserverpb.Lease/LeaseKeepAlive"),
                    tonic_prost::ProstCodec::<LeaseKeepAliveRequest, LeaseKeepAliveResponse>::default(),
                )
                .await?
                .into_inner();
            responses.message().await
        };
        let answer = tokio::time::timeout_at(deadline, call).await;
        drop(keep);
        match answer {
            Err(_) => Err(Error::Unavailable {
                what: "keep the lease alive",
                source: Some(format!("no answer within {:?}", self.timeout).into()),
            }),
            Ok(Err(s)) if s.code() == Code::NotFound => Ok(KeptAlive::Gone),
            Ok(Err(s)) => Err(Error::unavailable("keep the lease alive", s)),
            Ok(Ok(None)) => Err(Error::Unavailable {
                what: "keep the lease alive (the stream ended)",
                source: None,
            }),
            Ok(Ok(Some(r))) => {
                self.check(r.header.as_ref())?;
                Ok(if r.ttl > 0 {
                    KeptAlive::Alive
                } else {
                    KeptAlive::Gone
                })
            }
        }
    }

    /// Watches `key` (and up to `range_end`, if not empty) from
    /// `start_revision`.
    pub(crate) async fn watch(
        &self,
        key: &[u8],
        range_end: &[u8],
        start_revision: i64,
    ) -> Result<Watch, Error> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match self
                .watch_once(key, range_end, start_revision, deadline)
                .await
            {
                Err(Error::Unavailable {
                    source: Some(s), ..
                }) if s.downcast_ref::<Status>().is_some_and(never_connected)
                    && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => return other,
            }
        }
    }

    async fn watch_once(
        &self,
        key: &[u8],
        range_end: &[u8],
        start_revision: i64,
        deadline: tokio::time::Instant,
    ) -> Result<Watch, Error> {
        let (keep, kept) = tokio::sync::oneshot::channel::<()>();
        let create = WatchRequest {
            request_union: Some(WatchRequestUnion::Create(WatchCreateRequest {
                key: key.to_vec(),
                range_end: range_end.to_vec(),
                start_revision,
            })),
        };
        // The request side stays open until the watch is dropped.
        let requests = futures::stream::once(async move { create }).chain(
            futures::stream::once(async move {
                let _ = kept.await;
            })
            .filter_map(|()| async { None::<WatchRequest> }),
        );
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let request = self.request(requests);
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            let mut responses = grpc
                .streaming(
                    request,
                    path("/etcdserverpb.Watch/Watch"),
                    tonic_prost::ProstCodec::<WatchRequest, WatchResponse>::default(),
                )
                .await?
                .into_inner();
            // The first answer says the watch was created.
            let first = responses.message().await?;
            Ok::<_, Status>((responses, first))
        };
        match tokio::time::timeout_at(deadline, call).await {
            Err(_) => Err(Error::Unavailable {
                what: "watch",
                source: Some(format!("no answer within {:?}", self.timeout).into()),
            }),
            Ok(Err(s)) => Err(Error::unavailable("watch", s)),
            Ok(Ok((_, None))) => Err(Error::Unavailable {
                what: "watch (the stream ended)",
                source: None,
            }),
            Ok(Ok((responses, Some(first)))) => {
                self.check(first.header.as_ref())?;
                Ok(Watch {
                    responses,
                    _keep: keep,
                })
            }
        }
    }
}

/// etcd refused the credentials (or needs some): no retry helps.
fn refused(s: &Status) -> bool {
    matches!(s.code(), Code::PermissionDenied)
        || (s.code() == Code::InvalidArgument
            && (s.message().contains("authentication failed")
                || s.message().contains("user name is empty")))
        || (s.code() == Code::FailedPrecondition && s.message().contains("authentication"))
}

/// A status of a connection that was never made: nothing was sent.
fn never_connected(s: &Status) -> bool {
    let mut source = std::error::Error::source(s);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        source = e.source();
    }
    false
}

/// A status that says the write was not applied.
fn surely_not_applied(s: &Status) -> bool {
    never_connected(s)
        || matches!(
            s.code(),
            Code::InvalidArgument
                | Code::FailedPrecondition
                | Code::NotFound
                | Code::OutOfRange
                | Code::ResourceExhausted
                | Code::PermissionDenied
                | Code::Unauthenticated
        )
}
