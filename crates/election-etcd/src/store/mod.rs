//! The store layer: the gRPC messages (`proto.rs`), the client over one
//! channel (`client.rs`), one per process and endpoints (`clients.rs`),
//! the keys and values (`record.rs`), the waiters' line (`queue.rs`), the
//! releases it works with (`version.rs`), and [`Store`], what every
//! election, claim and fence of one [`EtcdElection`](crate::EtcdElection)
//! share.

pub(crate) mod client;
pub(crate) mod clients;
pub(crate) mod proto;
pub(crate) mod queue;
pub(crate) mod record;
pub(crate) mod version;

use election_core::{ElectionName, Leader};

use crate::error::Error;
use crate::options::EtcdOptions;
use client::{Client, Kind};
use proto::{Compare, RequestOp, Target};

/// One client (the process's channel to these endpoints, shared) and the
/// options it serves.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) client: std::sync::Arc<Client>,
    pub(crate) options: EtcdOptions,
    /// Keeps the registry's entry of `client` alive (`clients.rs`).
    pub(crate) _shared: std::sync::Arc<clients::SharedClient>,
}

impl Store {
    /// A key under this store's prefix.
    pub(crate) fn election_key(&self, name: &ElectionName) -> Vec<u8> {
        record::election_key(self.options.key_prefix(), name)
    }

    /// The handover key of `name` (ADR 0112).
    pub(crate) fn handover_key(&self, name: &ElectionName) -> Vec<u8> {
        record::handover_key(self.options.key_prefix(), name)
    }

    /// The revocation key of `name` (ADR 0111).
    pub(crate) fn revocation_key(&self, name: &ElectionName) -> Vec<u8> {
        record::revocation_key(self.options.key_prefix(), name)
    }

    /// Who holds `name` now, read linearizably.
    pub(crate) async fn leader(&self, name: &ElectionName) -> Result<Option<Leader>, Error> {
        let (_, kv) = self
            .client
            .range(&self.election_key(name), Kind::Read)
            .await?;
        kv.map(|kv| record::leader_of(&kv)).transpose()
    }

    /// Who leads each of `names`, in order: one read-only transaction of
    /// a range step per election key for every [`LEADERS_PER_READ`] names,
    /// where [`leader`](Self::leader) takes a request each (a campaign of
    /// `elect run` reads all 64 slot names first).
    pub(crate) async fn leaders(
        &self,
        names: &[ElectionName],
    ) -> Result<Vec<Option<Leader>>, Error> {
        let mut seen = Vec::with_capacity(names.len());
        for chunk in names.chunks(LEADERS_PER_READ) {
            let r = self
                .client
                .txn(
                    "read the election keys",
                    Kind::Read,
                    proto::TxnRequest {
                        compare: Vec::new(),
                        success: chunk
                            .iter()
                            .map(|n| range_op(&self.election_key(n)))
                            .collect(),
                        failure: Vec::new(),
                    },
                )
                .await?;
            let read = r.responses.len();
            for response in r.responses {
                let Some(proto::Response::Range(range)) = response.response else {
                    return Err(unanswered(chunk.len(), read));
                };
                seen.push(range.kvs.first().map(record::leader_of).transpose()?);
            }
            if read != chunk.len() {
                return Err(unanswered(chunk.len(), read));
            }
        }
        Ok(seen)
    }
}

/// How many election keys one read of [`Store::leaders`] reads: half of
/// etcd's default `--max-txn-ops` (128).
pub(crate) const LEADERS_PER_READ: usize = 64;

/// A read of `asked` keys answered with `read` responses, or not all of
/// them ranges: not what etcd answers.
fn unanswered(asked: usize, read: usize) -> Error {
    Error::CorruptValue {
        key: "(a read of election keys)".into(),
        detail: format!("{asked} range steps answered by {read} responses, or not all ranges"),
    }
}

/// `key`'s create revision is `revision` (0: the key does not exist).
pub(crate) fn created_at(key: &[u8], revision: i64) -> Compare {
    Compare {
        result: proto::CMP_EQUAL,
        target: 1, // CREATE
        key: key.to_vec(),
        target_union: Some(Target::CreateRevision(revision)),
    }
}

/// `key`'s mod revision is `revision`.
pub(crate) fn modified_at(key: &[u8], revision: i64) -> Compare {
    Compare {
        result: proto::CMP_EQUAL,
        target: 2, // MOD
        key: key.to_vec(),
        target_union: Some(Target::ModRevision(revision)),
    }
}

/// `key` is attached to `lease`.
pub(crate) fn leased_by(key: &[u8], lease: i64) -> Compare {
    Compare {
        result: proto::CMP_EQUAL,
        target: 4, // LEASE
        key: key.to_vec(),
        target_union: Some(Target::Lease(lease)),
    }
}

/// A put as a transaction's step.
pub(crate) fn put_op(key: &[u8], value: Vec<u8>, lease: i64) -> RequestOp {
    RequestOp {
        request: Some(proto::Request::Put(proto::PutRequest {
            key: key.to_vec(),
            value,
            lease,
        })),
    }
}

/// A delete of one key as a transaction's step.
pub(crate) fn delete_op(key: &[u8]) -> RequestOp {
    RequestOp {
        request: Some(proto::Request::Delete(proto::DeleteRangeRequest {
            key: key.to_vec(),
            range_end: Vec::new(),
        })),
    }
}

/// A read of one key as a transaction's step.
pub(crate) fn range_op(key: &[u8]) -> RequestOp {
    RequestOp {
        request: Some(proto::Request::Range(proto::RangeRequest {
            key: key.to_vec(),
            ..Default::default()
        })),
    }
}

/// The key each range step of a transaction's responses read, in order
/// (`None` for a key absent, or a step that was no range).
pub(crate) fn reads(
    responses: Vec<proto::ResponseOp>,
) -> impl Iterator<Item = Option<proto::KeyValue>> {
    responses.into_iter().map(|r| match r.response {
        Some(proto::Response::Range(r)) => r.kvs.into_iter().next(),
        _ => None,
    })
}

/// The first key a transaction's responses read (its first range step
/// that found one).
pub(crate) fn first_read(responses: Vec<proto::ResponseOp>) -> Option<proto::KeyValue> {
    reads(responses).flatten().next()
}
