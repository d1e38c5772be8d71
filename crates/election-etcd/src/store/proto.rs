//! The messages of etcd's v3 gRPC API that this crate sends and reads,
//! written from etcd's API reference (`etcdserverpb`, `mvccpb`): only the
//! fields used here, with etcd's field numbers. prost's derive encodes
//! them; no build script and no `protoc` (ADR 0109). A field etcd adds
//! later is skipped by the decoder, as protobuf promises.

#![allow(
    missing_docs,
    unreachable_pub,
    reason = "wire messages: each field is named as etcd's API reference names it"
)]

/// `etcdserverpb.ResponseHeader`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResponseHeader {
    #[prost(uint64, tag = "1")]
    pub(crate) cluster_id: u64,
    #[prost(uint64, tag = "2")]
    pub(crate) member_id: u64,
    #[prost(int64, tag = "3")]
    pub(crate) revision: i64,
    #[prost(uint64, tag = "4")]
    pub(crate) raft_term: u64,
}

/// `mvccpb.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValue {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(int64, tag = "2")]
    pub(crate) create_revision: i64,
    #[prost(int64, tag = "3")]
    pub(crate) mod_revision: i64,
    #[prost(int64, tag = "4")]
    pub(crate) version: i64,
    #[prost(bytes = "vec", tag = "5")]
    pub(crate) value: Vec<u8>,
    #[prost(int64, tag = "6")]
    pub(crate) lease: i64,
}

/// `mvccpb.Event`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Event {
    /// `PUT` = 0, `DELETE` = 1.
    #[prost(int32, tag = "1")]
    pub(crate) r#type: i32,
    #[prost(message, optional, tag = "2")]
    pub(crate) kv: Option<KeyValue>,
}

/// `mvccpb.Event.EventType.DELETE`.
pub(crate) const EVENT_DELETE: i32 = 1;

/// `RangeRequest.SortOrder.ASCEND`.
pub(crate) const SORT_ASCEND: i32 = 1;
/// `RangeRequest.SortOrder.DESCEND`.
pub(crate) const SORT_DESCEND: i32 = 2;
/// `RangeRequest.SortTarget.CREATE`.
pub(crate) const SORT_BY_CREATE: i32 = 2;

/// `etcdserverpb.RangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RangeRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub(crate) limit: i64,
    #[prost(int32, tag = "5")]
    pub(crate) sort_order: i32,
    #[prost(int32, tag = "6")]
    pub(crate) sort_target: i32,
    #[prost(int64, tag = "13")]
    pub(crate) max_create_revision: i64,
}

/// `etcdserverpb.RangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RangeResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) kvs: Vec<KeyValue>,
}

/// `etcdserverpb.PutRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PutRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) value: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub(crate) lease: i64,
}

/// `etcdserverpb.PutResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PutResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
}

/// `etcdserverpb.DeleteRangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DeleteRangeRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
}

/// `etcdserverpb.DeleteRangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DeleteRangeResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) deleted: i64,
}

/// `etcdserverpb.RequestOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RequestOp {
    #[prost(oneof = "Request", tags = "1, 2, 3")]
    pub(crate) request: Option<Request>,
}

/// `etcdserverpb.RequestOp.request`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Request {
    #[prost(message, tag = "1")]
    Range(RangeRequest),
    #[prost(message, tag = "2")]
    Put(PutRequest),
    #[prost(message, tag = "3")]
    Delete(DeleteRangeRequest),
}

/// `etcdserverpb.ResponseOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResponseOp {
    #[prost(oneof = "Response", tags = "1, 2, 3")]
    pub(crate) response: Option<Response>,
}

/// `etcdserverpb.ResponseOp.response`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Response {
    #[prost(message, tag = "1")]
    Range(RangeResponse),
    #[prost(message, tag = "2")]
    Put(PutResponse),
    #[prost(message, tag = "3")]
    Delete(DeleteRangeResponse),
}

/// `Compare.CompareResult`.
pub(crate) const CMP_EQUAL: i32 = 0;

/// `etcdserverpb.Compare`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Compare {
    #[prost(int32, tag = "1")]
    pub(crate) result: i32,
    /// `VERSION` = 0, `CREATE` = 1, `MOD` = 2, `VALUE` = 3, `LEASE` = 4;
    /// the same as the tag of `target` minus 4.
    #[prost(int32, tag = "2")]
    pub(crate) target: i32,
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) key: Vec<u8>,
    #[prost(oneof = "Target", tags = "5, 6, 7, 8")]
    pub(crate) target_union: Option<Target>,
}

/// `etcdserverpb.Compare.target_union`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Target {
    #[prost(int64, tag = "5")]
    CreateRevision(i64),
    #[prost(int64, tag = "6")]
    ModRevision(i64),
    #[prost(bytes = "vec", tag = "7")]
    Value(Vec<u8>),
    #[prost(int64, tag = "8")]
    Lease(i64),
}

/// `etcdserverpb.TxnRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TxnRequest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) compare: Vec<Compare>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) success: Vec<RequestOp>,
    #[prost(message, repeated, tag = "3")]
    pub(crate) failure: Vec<RequestOp>,
}

/// `etcdserverpb.TxnResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TxnResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(bool, tag = "2")]
    pub(crate) succeeded: bool,
    #[prost(message, repeated, tag = "3")]
    pub(crate) responses: Vec<ResponseOp>,
}

/// `etcdserverpb.WatchRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WatchRequest {
    #[prost(oneof = "WatchRequestUnion", tags = "1, 2")]
    pub(crate) request_union: Option<WatchRequestUnion>,
}

/// `etcdserverpb.WatchRequest.request_union`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum WatchRequestUnion {
    #[prost(message, tag = "1")]
    Create(WatchCreateRequest),
    #[prost(message, tag = "2")]
    Cancel(WatchCancelRequest),
}

/// `etcdserverpb.WatchCreateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WatchCreateRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub(crate) start_revision: i64,
}

/// `etcdserverpb.WatchCancelRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WatchCancelRequest {
    #[prost(int64, tag = "1")]
    pub(crate) watch_id: i64,
}

/// `etcdserverpb.WatchResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WatchResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) watch_id: i64,
    #[prost(bool, tag = "3")]
    pub(crate) created: bool,
    #[prost(bool, tag = "4")]
    pub(crate) canceled: bool,
    #[prost(int64, tag = "5")]
    pub(crate) compact_revision: i64,
    #[prost(string, tag = "6")]
    pub(crate) cancel_reason: String,
    #[prost(message, repeated, tag = "11")]
    pub(crate) events: Vec<Event>,
}

/// `etcdserverpb.LeaseGrantRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseGrantRequest {
    #[prost(int64, tag = "1")]
    pub(crate) ttl: i64,
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
}

/// `etcdserverpb.LeaseGrantResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseGrantResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
    #[prost(int64, tag = "3")]
    pub(crate) ttl: i64,
    #[prost(string, tag = "4")]
    pub(crate) error: String,
}

/// `etcdserverpb.LeaseRevokeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseRevokeRequest {
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
}

/// `etcdserverpb.LeaseRevokeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseRevokeResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
}

/// `etcdserverpb.LeaseKeepAliveRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseKeepAliveRequest {
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
}

/// `etcdserverpb.LeaseKeepAliveResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseKeepAliveResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
    /// The lease's remaining TTL in seconds; 0 or less: no such lease
    /// (expired or revoked).
    #[prost(int64, tag = "3")]
    pub(crate) ttl: i64,
}

/// `etcdserverpb.LeaseTimeToLiveRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseTimeToLiveRequest {
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
    #[prost(bool, tag = "2")]
    pub(crate) keys: bool,
}

/// `etcdserverpb.LeaseTimeToLiveResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LeaseTimeToLiveResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
    /// The lease's remaining TTL in seconds; -1: no such lease (expired
    /// or revoked).
    #[prost(int64, tag = "3")]
    pub(crate) ttl: i64,
    /// The TTL the lease was granted with (as the server set it), in
    /// seconds.
    #[prost(int64, tag = "4")]
    pub(crate) granted_ttl: i64,
}

/// `etcdserverpb.AuthenticateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AuthenticateRequest {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "2")]
    pub(crate) password: String,
}

/// `etcdserverpb.AuthenticateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AuthenticateResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(string, tag = "2")]
    pub(crate) token: String,
}

/// `etcdserverpb.StatusRequest` (no fields).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StatusRequest {}

/// `etcdserverpb.StatusResponse`: only the member's version is read.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StatusResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    /// The answering member's server version, as `etcd --version` says it
    /// (`3.4.23`).
    #[prost(string, tag = "2")]
    pub(crate) version: String,
}
