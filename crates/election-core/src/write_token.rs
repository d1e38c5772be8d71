//! [`WriteToken`]: proof, in the type system, that a write runs inside a
//! guard; and [`unguarded`], the one explicit way around it.

use crate::{ConfigError, ElectionName, Epoch, Error, Identity};

/// Proof that the write holding it runs inside
/// [`LeaseSet::guard`](crate::LeaseSet::guard): the key was held in term
/// [`epoch`](WriteToken::epoch) at the commit point, right before the
/// write began.
///
/// What the types promise:
/// - **Only a guard makes one.** There is no public constructor, no
///   `Default`, no `Clone`: a token cannot be forged or copied. The one
///   other source is [`unguarded`], which needs a reason string and is
///   easy to grep for.
/// - **It cannot outlive the guarded call.** Its lifetime `'g` is chosen by
///   the guard for each call; the write closure receives it for any such
///   lifetime, so returning it, storing it in a longer-lived place or
///   sending it to a spawned task does not compile.
/// - **A store write that needs one cannot be called without it**: take
///   `&WriteToken<'_>` as a parameter.
///
/// The token says the key was held when the write *began*; a write that
/// runs long can outlive the lease. Storage that must refuse a deposed
/// holder's late write checks the [`epoch`](WriteToken::epoch) against its
/// high-water mark (the `fencing` crate turns a token into a fencing token).
///
/// ```
/// use election_core::{unguarded, WriteToken};
///
/// struct Store { rows: Vec<(String, u64)> }
///
/// impl Store {
///     /// Cannot be called without a token.
///     fn put(&mut self, token: &WriteToken<'_>, row: &str) {
///         self.rows.push((row.to_owned(), token.epoch().get()));
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let mut store = Store { rows: Vec::new() };
/// unguarded("shard-7", "single-node deployment: no coordinator", async |token| {
///     store.put(&token, "hello");
/// })
/// .await?;
/// assert_eq!(store.rows, [("hello".to_owned(), 1)]); // Epoch::UNGUARDED
/// # Ok(()) }
/// ```
///
/// # What the compiler refuses
///
/// Each promise above is a doc test that must fail to compile (with the
/// error code where rustc gives one). Their common setup compiles and runs
/// as it is: a guarded call that uses its token inside the call.
///
/// ```
/// use election_core::{Identity, LeaseSet, PerKeyClaims};
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let backend = MemoryBackend::new();
/// let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a").unwrap(), move |k| {
///     backend.claim(k.as_str(), "a")
/// }));
/// let epoch = set.guard("shard-1", async |token| token.epoch()).await.unwrap();
/// assert!(epoch.get() >= 1);
/// # }
/// ```
///
/// Returning the token from the guarded call:
///
/// ```compile_fail
/// # use election_core::{Identity, LeaseSet, PerKeyClaims};
/// # use election_testkit::memory::MemoryBackend;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # let backend = MemoryBackend::new();
/// # let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a").unwrap(), move |k| {
/// #     backend.claim(k.as_str(), "a")
/// # }));
/// let token = set.guard("shard-1", async |token| token).await.unwrap();
/// # }
/// ```
///
/// Keeping it in a place that outlives the call:
///
/// ```compile_fail
/// # use election_core::{Identity, LeaseSet, PerKeyClaims, WriteToken};
/// # use election_testkit::memory::MemoryBackend;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # let backend = MemoryBackend::new();
/// # let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a").unwrap(), move |k| {
/// #     backend.claim(k.as_str(), "a")
/// # }));
/// let mut kept: Vec<WriteToken<'_>> = Vec::new();
/// set.guard("shard-1", async |token| kept.push(token)).await.unwrap();
/// # }
/// ```
///
/// Sending it to a spawned task, which may outlive the call:
///
/// ```compile_fail,E0521
/// # use election_core::{Identity, LeaseSet, PerKeyClaims};
/// # use election_testkit::memory::MemoryBackend;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # let backend = MemoryBackend::new();
/// # let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a").unwrap(), move |k| {
/// #     backend.claim(k.as_str(), "a")
/// # }));
/// set.guard("shard-1", async |token| {
///     tokio::spawn(async move { println!("{}", token.epoch()) });
/// })
/// .await
/// .unwrap();
/// # }
/// ```
///
/// Forging one: no `Default`, no `Clone`, no struct literal (private
/// fields).
///
/// ```compile_fail,E0599
/// let _default = election_core::WriteToken::default();
/// ```
///
/// ```compile_fail,E0277
/// use election_core::WriteToken;
/// let _copy = |t: &WriteToken<'_>| WriteToken::clone(t);
/// ```
///
/// ```compile_fail
/// let _literal = election_core::WriteToken { epoch: election_core::Epoch::FIRST };
/// ```
///
/// Calling a write that takes a token without one:
///
/// ```compile_fail,E0061
/// use election_core::WriteToken;
///
/// struct Store { rows: Vec<u64> }
///
/// impl Store {
///     fn append(&mut self, token: &WriteToken<'_>, row: u64) {
///         let _ = token.epoch();
///         self.rows.push(row);
///     }
/// }
///
/// let mut store = Store { rows: Vec::new() };
/// store.append(42);
/// ```
#[derive(Debug)]
pub struct WriteToken<'g> {
    key: &'g ElectionName,
    identity: Option<&'g Identity>,
    epoch: Epoch,
    unguarded: Option<&'static str>,
}

impl<'g> WriteToken<'g> {
    pub(crate) fn guarded(key: &'g ElectionName, identity: &'g Identity, epoch: Epoch) -> Self {
        WriteToken {
            key,
            identity: Some(identity),
            epoch,
            unguarded: None,
        }
    }

    /// The key the write is guarded for.
    ///
    /// ```
    /// use election_core::{LeaseSet, WriteToken};
    /// # use election_testkit::memory::MemoryBackend;
    ///
    /// fn put(token: &WriteToken<'_>, row: &str) -> String {
    ///     format!("{}: {row}", token.key()) // the shard the write was guarded for
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// let line = set.guard("shard-1", async |token| put(&token, "hello")).await?;
    /// assert_eq!(line, "shard-1: hello");
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &ElectionName {
        self.key
    }

    /// The epoch of the term that held the key at the commit point. For an
    /// [`unguarded`] token it is [`Epoch::UNGUARDED`], lower than every
    /// term's epoch on every backend: a fenced store that has ever seen a
    /// guarded write refuses it.
    ///
    /// ```
    /// use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// // Store the epoch with the write, so the store can refuse older writers.
    /// let stored_epoch = set.guard("shard-1", async |token| token.epoch().get()).await?;
    /// assert_eq!(Some(stored_epoch), set.epoch("shard-1").map(|e| e.get()));
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The identity of the holder (this process); `None` for an
    /// [`unguarded`] token.
    ///
    /// ```
    /// use election_core::{LeaseSet, unguarded};
    /// # use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// let writer = set
    ///     .guard("shard-1", async |token| token.identity().map(|i| i.to_string()))
    ///     .await?;
    /// assert_eq!(writer.as_deref(), Some("node-a"));
    /// let nobody = unguarded("shard-1", "migration tool", async |token| token.identity().is_none()).await?;
    /// assert!(nobody);
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn identity(&self) -> Option<&Identity> {
        self.identity
    }

    /// The reason given to [`unguarded`], if this token came from it.
    ///
    /// ```
    /// use election_core::{WriteToken, unguarded};
    ///
    /// fn audit(token: &WriteToken<'_>) {
    ///     if let Some(reason) = token.unguarded_reason() {
    ///         eprintln!("write to {} without a coordinator: {reason}", token.key());
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// unguarded("tenant-1", "single-node deployment", async |token| audit(&token)).await?;
    /// # Ok(()) }
    /// ```
    pub fn unguarded_reason(&self) -> Option<&'static str> {
        self.unguarded
    }
}

/// Runs `write` with a token for `key` that no coordinator backs: the
/// explicit escape hatch for paths with no lease set (a single-node
/// deployment, a test, a migration tool). `reason` says why, for the
/// reader and for [`WriteToken::unguarded_reason`]; grep for `unguarded(`
/// to find every such path.
///
/// The token's epoch is [`Epoch::UNGUARDED`], lower than the epoch of every
/// term (terms start at [`Epoch::FIRST`]), so a fenced store that has
/// already accepted a guarded write refuses an unguarded one instead of
/// letting it overwrite a real leader's data, also while that leader's first
/// term is live.
///
/// Cancel safety: as cancel safe as `write`. Failure model:
/// [`Error::Config`] for an invalid key or an empty reason; otherwise
/// `write`'s own result.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let epoch = election_core::unguarded("tenant-1", "unit test", async |token| token.epoch()).await?;
/// assert_eq!(epoch, election_core::Epoch::UNGUARDED);
/// assert!(epoch < election_core::Epoch::FIRST);
/// # Ok(()) }
/// ```
pub async fn unguarded<R>(
    key: &str,
    reason: &'static str,
    write: impl AsyncFnOnce(WriteToken<'_>) -> R,
) -> Result<R, Error> {
    let key = ElectionName::new(key)?;
    if reason.trim().is_empty() {
        return Err(ConfigError::BadSetting {
            setting: "reason",
            reason: "an unguarded write must say why it needs no coordinator".into(),
        }
        .into());
    }
    let token = WriteToken {
        key: &key,
        identity: None,
        epoch: Epoch::UNGUARDED,
        unguarded: Some(reason),
    };
    Ok(write(token).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unguarded_needs_a_reason_and_a_valid_key() {
        let r = unguarded("k", " ", async |_t| ()).await;
        assert!(matches!(r, Err(Error::Config(_))));
        let r = unguarded("", "test", async |_t| ()).await;
        assert!(matches!(r, Err(Error::Config(_))));
        let reason = unguarded("k", "test", async |t| t.unguarded_reason())
            .await
            .unwrap();
        assert_eq!(reason, Some("test"));
    }
}
