//! [`EtcdFence`]: fencing high-water marks in etcd, advanced by a
//! transaction, checked inside the application's own transaction.

use std::sync::Arc;

use election_core::Epoch;
use fencing::{Advance, Fence, ResourceName, Token, WriteFn};

use crate::election::EtcdElection;
use crate::error::Error;
use crate::store::client::Kind;
use crate::store::proto::{self, Compare, Target, TxnRequest};
use crate::store::{Store, created_at, put_op, record};

/// How many transactions one advance may try before it gives up with
/// [`fencing::Error::Unavailable`]. Every failed one means another writer's
/// succeeded, so the writers as a whole make progress.
const MAX_ATTEMPTS: u32 = 64;

/// A [`Fence`] whose high-water marks live in etcd, one key per resource
/// under the election's prefix (`<prefix>/f/<resource>`, the token as
/// decimal text), so writers on many hosts share them.
///
/// - **Advance**: a linearizable read of the mark, [`Advance::decide`],
///   then, to raise it, a transaction that puts the token only if the
///   key's mod revision is still the one read (create revision 0 for no
///   mark yet); another writer's move starts the check over.
/// - **Checked in the write's own transaction**: once the mark is the
///   token, a write of the resource in etcd is fenced by one compare,
///   *the mark's value equals the token*, in the transaction that writes
///   ([`fenced_put`](EtcdFence::fenced_put) does it for one key;
///   [`mark_compare`](EtcdFence::mark_compare) gives the key and value for
///   an application's own etcd client). A newer term's advance changes the
///   value, so the deposed leader's transaction fails as a whole.
/// - Marks have no lease: they never expire. Deleting one removes the
///   mark (do it only when no writer of an older term can still run).
///
/// ```no_run
/// use election_core::Epoch;
/// use election_etcd::{EtcdElection, EtcdFence, EtcdOptions};
/// use fencing::{Fence, ResourceName, Token};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
/// let fence = EtcdFence::new(&election);
/// let orders = ResourceName::new("orders")?;
/// let token = Token::from_epoch(Epoch::new(7).ok_or("not an epoch")?);
/// fence.advance(&orders, token).await?;
/// // The write and the check in one transaction:
/// fence.fenced_put(&orders, token, b"orders/last", b"42").await?;
/// let old = Token::from_epoch(Epoch::new(6).ok_or("not an epoch")?);
/// assert!(fence.fenced_put(&orders, old, b"orders/last", b"41").await.is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct EtcdFence {
    store: Arc<Store>,
}

/// The data of one compare: "the value at `key` equals `value`", for an
/// application's own etcd transaction ([`EtcdFence::mark_compare`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MarkCompare {
    /// The mark's key.
    pub key: Vec<u8>,
    /// The value it must hold: the token as decimal text.
    pub value: Vec<u8>,
}

/// The mark as read: the token and the key's mod revision (0: no key).
struct Read {
    mark: Option<Token>,
    mod_revision: i64,
}

impl EtcdFence {
    /// A fence over `election`'s connection and prefix.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdFence, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let fence = EtcdFence::new(&election);
    /// # drop(fence);
    /// # Ok(()) }
    /// ```
    pub fn new(election: &EtcdElection) -> Self {
        EtcdFence {
            store: election.store().clone(),
        }
    }

    fn key(&self, resource: &ResourceName) -> Vec<u8> {
        record::fence_key(self.store.options.key_prefix(), resource.as_str())
    }

    fn location(&self, key: &[u8]) -> String {
        format!(
            "etcd {}: {}",
            self.store.client.endpoints(),
            String::from_utf8_lossy(key)
        )
    }

    fn unavailable(&self, key: &[u8], e: Error) -> fencing::Error {
        fencing::Error::unavailable(self.location(key), e)
    }

    async fn read(&self, key: &[u8]) -> Result<Read, fencing::Error> {
        let (_, kv) = self
            .store
            .client
            .range(key, Kind::Read)
            .await
            .map_err(|e| self.unavailable(key, e))?;
        let Some(kv) = kv else {
            return Ok(Read {
                mark: None,
                mod_revision: 0,
            });
        };
        let mark = std::str::from_utf8(&kv.value)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .and_then(Epoch::new)
            .map(Token::from_epoch)
            .ok_or_else(|| {
                fencing::Error::corrupt(
                    self.location(key),
                    format!("{:?} is not a token", String::from_utf8_lossy(&kv.value)),
                )
            })?;
        Ok(Read {
            mark: Some(mark),
            mod_revision: kv.mod_revision,
        })
    }

    /// The compare an application adds to its own etcd transaction to
    /// fence a write with `token`: the transaction fails if the mark is no
    /// longer `token`. Advance the mark to `token` first.
    ///
    /// ```
    /// # async fn f(fence: election_etcd::EtcdFence) -> Result<(), Box<dyn std::error::Error>> {
    /// use election_core::Epoch;
    /// use fencing::{ResourceName, Token};
    ///
    /// let token = Token::from_epoch(Epoch::new(7).ok_or("not an epoch")?);
    /// let compare = fence.mark_compare(&ResourceName::new("orders")?, token);
    /// assert_eq!(compare.value, b"7");
    /// // In etcd's terms: Compare { target: VALUE, result: EQUAL, key, value }.
    /// # Ok(()) }
    /// ```
    pub fn mark_compare(&self, resource: &ResourceName, token: Token) -> MarkCompare {
        MarkCompare {
            key: self.key(resource),
            value: token.epoch().get().to_string().into_bytes(),
        }
    }

    /// Puts `value` at `key` if `token` may write `resource`: the mark is
    /// advanced to `token`, then one transaction compares the mark and
    /// puts. [`fencing::Error::Stale`] if a newer term's token is the mark.
    ///
    /// ```no_run
    /// # async fn f(fence: election_etcd::EtcdFence, token: fencing::Token) -> Result<(), Box<dyn std::error::Error>> {
    /// use fencing::ResourceName;
    ///
    /// fence.fenced_put(&ResourceName::new("orders")?, token, b"orders/last", b"42").await?;
    /// # Ok(()) }
    /// ```
    pub async fn fenced_put(
        &self,
        resource: &ResourceName,
        token: Token,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), fencing::Error> {
        self.advance(resource, token).await?;
        let compare = self.mark_compare(resource, token);
        let r = self
            .store
            .client
            .txn(
                "a fenced put",
                Kind::Write,
                TxnRequest {
                    compare: vec![Compare {
                        result: proto::CMP_EQUAL,
                        target: 3, // VALUE
                        key: compare.key.clone(),
                        target_union: Some(Target::Value(compare.value)),
                    }],
                    success: vec![put_op(key, value.to_vec(), 0)],
                    failure: vec![],
                },
            )
            .await
            .map_err(|e| self.unavailable(&compare.key, e))?;
        if r.succeeded {
            return Ok(());
        }
        // Moved on since the advance: say by whom.
        let read = self.read(&compare.key).await?;
        Advance::decide(resource, read.mark, token)?;
        Err(fencing::Error::unavailable(
            self.location(&compare.key),
            "the mark changed during the fenced put; nothing was written",
        ))
    }
}

impl Fence for EtcdFence {
    async fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        let key = self.key(resource);
        for _ in 0..MAX_ATTEMPTS {
            let read = self.read(&key).await?;
            let advance = Advance::decide(resource, read.mark, token)?;
            if !advance.raised() {
                return Ok(advance); // a linearizable read showed the token
            }
            let compare = if read.mod_revision == 0 {
                created_at(&key, 0)
            } else {
                Compare {
                    result: proto::CMP_EQUAL,
                    target: 2, // MOD
                    key: key.clone(),
                    target_union: Some(Target::ModRevision(read.mod_revision)),
                }
            };
            let value = token.epoch().get().to_string().into_bytes();
            let r = self
                .store
                .client
                .txn(
                    "raise a fence mark",
                    Kind::Write,
                    TxnRequest {
                        compare: vec![compare],
                        success: vec![put_op(&key, value, 0)],
                        failure: vec![],
                    },
                )
                .await
                .map_err(|e| self.unavailable(&key, e))?;
            if r.succeeded {
                return Ok(advance);
            }
        }
        Err(fencing::Error::unavailable(
            self.location(&key),
            "the mark kept moving under this check",
        ))
    }

    async fn fenced<W>(
        &self,
        resource: &ResourceName,
        token: Token,
        write: W,
    ) -> Result<W::Outcome, fencing::Error>
    where
        W: WriteFn + FnOnce() -> <W as WriteFn>::Future,
    {
        self.advance(resource, token).await?;
        let outcome = write().await;
        // A newer term that raised the mark meanwhile is told to the
        // caller (the write has run: fence writes in etcd with
        // `fenced_put` or `mark_compare` to keep them out).
        let key = self.key(resource);
        let read = self.read(&key).await?;
        Advance::decide(resource, read.mark, token)?;
        if read.mark.is_none() {
            return Err(fencing::Error::corrupt(
                self.location(&key),
                format!(
                    "the mark {token} was removed while a fenced write ran; writes of older \
                     terms may have been accepted meanwhile"
                ),
            ));
        }
        Ok(outcome)
    }

    async fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> Result<Option<Token>, fencing::Error> {
        Ok(self.read(&self.key(resource)).await?.mark)
    }
}
