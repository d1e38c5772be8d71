//! Bare etcd requests, the floors of the etcd group's rows: a lease grant,
//! a put-if-absent transaction and a delete-if-unchanged transaction, sent
//! on the client stack `election-etcd` itself uses (a tonic channel with
//! `TCP_NODELAY`, prost's encoding), with no election around them.
//!
//! The messages are the few fields of etcd's v3 API (`etcdserverpb`) these
//! requests need, with the field numbers of etcd's API reference. A
//! `oneof` member is an optional field here: on the wire a `oneof` is only
//! the member that is set.

use http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

use crate::Result;

/// `etcdserverpb.Compare.CompareResult.EQUAL`.
const EQUAL: i32 = 0;
/// `etcdserverpb.Compare.CompareTarget.CREATE`.
const CREATE: i32 = 1;

/// `etcdserverpb.ResponseHeader`: only the revision.
#[derive(Clone, PartialEq, prost::Message)]
struct Header {
    /// The store's revision after the request.
    #[prost(int64, tag = "3")]
    revision: i64,
}

/// `etcdserverpb.LeaseGrantRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct GrantRequest {
    /// The lease's TTL, in seconds.
    #[prost(int64, tag = "1")]
    ttl: i64,
}

/// `etcdserverpb.LeaseGrantResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct GrantResponse {
    /// The lease granted.
    #[prost(int64, tag = "2")]
    id: i64,
    /// Why nothing was granted.
    #[prost(string, tag = "4")]
    error: String,
}

/// `etcdserverpb.LeaseRevokeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct RevokeRequest {
    /// The lease to revoke.
    #[prost(int64, tag = "1")]
    id: i64,
}

/// `etcdserverpb.LeaseRevokeResponse`, read for nothing but its arrival.
#[derive(Clone, PartialEq, prost::Message)]
struct RevokeResponse {}

/// `etcdserverpb.Compare` of a key's create revision.
#[derive(Clone, PartialEq, prost::Message)]
struct Compare {
    /// [`EQUAL`].
    #[prost(int32, tag = "1")]
    result: i32,
    /// [`CREATE`].
    #[prost(int32, tag = "2")]
    target: i32,
    /// The key compared.
    #[prost(bytes = "vec", tag = "3")]
    key: Vec<u8>,
    /// The `create_revision` member of `target_union` (0: no such key).
    #[prost(int64, optional, tag = "5")]
    create_revision: Option<i64>,
}

/// `etcdserverpb.PutRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct Put {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    /// Its value.
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
    /// The lease it is attached to.
    #[prost(int64, tag = "3")]
    lease: i64,
}

/// `etcdserverpb.DeleteRangeRequest` of one key.
#[derive(Clone, PartialEq, prost::Message)]
struct Delete {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
}

/// `etcdserverpb.RequestOp`: one of its members set.
#[derive(Clone, PartialEq, prost::Message)]
struct Op {
    /// `request_put`.
    #[prost(message, optional, tag = "2")]
    put: Option<Put>,
    /// `request_delete_range`.
    #[prost(message, optional, tag = "3")]
    delete: Option<Delete>,
}

/// `etcdserverpb.TxnRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct TxnRequest {
    /// Every comparison must hold for `success` to run.
    #[prost(message, repeated, tag = "1")]
    compare: Vec<Compare>,
    /// The steps if they hold.
    #[prost(message, repeated, tag = "2")]
    success: Vec<Op>,
}

/// `etcdserverpb.TxnResponse`: its header and outcome.
#[derive(Clone, PartialEq, prost::Message)]
struct TxnResponse {
    /// The header (the transaction's revision).
    #[prost(message, optional, tag = "1")]
    header: Option<Header>,
    /// Whether the comparisons held.
    #[prost(bool, tag = "2")]
    succeeded: bool,
}

/// One channel to one etcd member, for bare requests.
#[derive(Clone, Debug)]
pub(crate) struct Bare {
    channel: Channel,
}

impl Bare {
    /// A channel to `endpoint` (`host:port`), connected.
    pub(crate) async fn connect(endpoint: &str) -> Result<Bare> {
        let channel = Endpoint::from_shared(format!("http://{endpoint}"))?
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|e| format!("connect to etcd at {endpoint}: {e}"))?;
        Ok(Bare { channel })
    }

    /// One unary call of `route`.
    async fn call<Q, R>(&self, route: &'static str, request: Q) -> Result<R>
    where
        Q: prost::Message + Send + Sync + 'static,
        R: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| format!("{route}: channel not ready: {e}"))?;
        let response = grpc
            .unary(
                tonic::Request::new(request),
                PathAndQuery::from_static(route),
                tonic_prost::ProstCodec::<Q, R>::default(),
            )
            .await
            .map_err(|s| format!("{route}: {s}"))?;
        Ok(response.into_inner())
    }

    /// Grants a lease of `ttl_s` seconds: its ID.
    pub(crate) async fn grant(&self, ttl_s: i64) -> Result<i64> {
        let r: GrantResponse = self
            .call(
                "/etcdserverpb.Lease/LeaseGrant",
                GrantRequest { ttl: ttl_s },
            )
            .await?;
        if r.id == 0 || !r.error.is_empty() {
            return Err(format!("no lease granted: {:?}", r.error).into());
        }
        Ok(r.id)
    }

    /// Revokes `lease` (and so deletes its keys).
    pub(crate) async fn revoke(&self, lease: i64) -> Result<()> {
        let _: RevokeResponse = self
            .call(
                "/etcdserverpb.Lease/LeaseRevoke",
                RevokeRequest { id: lease },
            )
            .await?;
        Ok(())
    }

    /// One transaction: if `key` does not exist, put `value` on it with
    /// `lease`. The transaction's revision (the key's create revision);
    /// an error if the key existed.
    pub(crate) async fn put_if_absent(&self, key: &[u8], value: &[u8], lease: i64) -> Result<i64> {
        let r = self
            .txn(
                key,
                0,
                Op {
                    put: Some(Put {
                        key: key.to_vec(),
                        value: value.to_vec(),
                        lease,
                    }),
                    delete: None,
                },
            )
            .await?;
        Ok(r.header.map_or(0, |h| h.revision))
    }

    /// One transaction: if `key`'s create revision is `revision`, delete
    /// it. An error if it was not.
    pub(crate) async fn delete_if_created_at(&self, key: &[u8], revision: i64) -> Result<()> {
        self.txn(
            key,
            revision,
            Op {
                put: None,
                delete: Some(Delete { key: key.to_vec() }),
            },
        )
        .await
        .map(drop)
    }

    /// `op` if `key`'s create revision is `created`; an error if not.
    async fn txn(&self, key: &[u8], created: i64, op: Op) -> Result<TxnResponse> {
        let request = txn_request(key, created, op);
        let r: TxnResponse = self.call("/etcdserverpb.KV/Txn", request).await?;
        if !r.succeeded {
            return Err(format!(
                "transaction on {:?}: its create revision is not {created}",
                String::from_utf8_lossy(key)
            )
            .into());
        }
        Ok(r)
    }
}

/// The transaction: `op` if `key`'s create revision is `created`.
fn txn_request(key: &[u8], created: i64, op: Op) -> TxnRequest {
    TxnRequest {
        compare: vec![Compare {
            result: EQUAL,
            target: CREATE,
            key: key.to_vec(),
            create_revision: Some(created),
        }],
        success: vec![op],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    /// The put-if-absent's comparison carries its `create_revision`
    /// member even at 0, as etcd's own clients send it (prost leaves a
    /// plain field at its default out of the message).
    #[test]
    fn a_comparison_with_zero_is_on_the_wire() {
        let bytes = txn_request(
            b"k",
            0,
            Op {
                put: None,
                delete: Some(Delete { key: b"k".to_vec() }),
            },
        )
        .encode_to_vec();
        // Field 1 (compare): its field 5 (create_revision) with value 0.
        let compare = Compare::decode(&bytes[2..2 + usize::from(bytes[1])]).unwrap();
        assert_eq!(compare.create_revision, Some(0));
        assert!(
            bytes.windows(2).any(|w| w == [0x28, 0x00]),
            "{bytes:02x?} lacks field 5 = 0"
        );
    }
}
