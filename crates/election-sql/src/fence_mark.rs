//! A fence's high-water mark as both SQL backends store it (a signed
//! 64-bit integer per resource), and the check both make after committing
//! a mark and before running a fenced write.

use std::fmt::Display;
use std::future::Future;

use fencing::{Advance, ResourceName, Token};

/// The stored mark of `token`. Every token is at most
/// [`Epoch::MAX`](election_core::Epoch::MAX) = `i64::MAX`, so it fits.
///
/// ```
/// use election_core::Epoch;
/// use fencing::Token;
///
/// assert_eq!(election_sql::mark_of(Token::from_epoch(Epoch::MAX)), i64::MAX);
/// ```
pub fn mark_of(token: Token) -> i64 {
    token.get_i64()
}

/// The token a stored mark `value` of `resource` stands for, or
/// [`fencing::Error::Corrupt`] for a value no token has (zero, negative).
///
/// ```
/// use fencing::ResourceName;
///
/// let orders = ResourceName::new("orders")?;
/// assert_eq!(election_sql::token_from_mark(&orders, 7)?.epoch().get(), 7);
/// assert!(matches!(
///     election_sql::token_from_mark(&orders, -1),
///     Err(fencing::Error::Corrupt { .. })
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn token_from_mark(resource: &ResourceName, value: i64) -> Result<Token, fencing::Error> {
    election_core::Epoch::from_i64(value)
        .map(Token::from_epoch)
        .ok_or_else(|| fencing::Error::corrupt(resource.as_str(), format!("stored mark {value}")))
}

/// The token a read of `resource`'s stored mark stands for: `None` where
/// no mark is stored, [`fencing::Error::Corrupt`] for a value no token
/// has ([`token_from_mark`]).
///
/// ```
/// use fencing::ResourceName;
///
/// let orders = ResourceName::new("orders")?;
/// assert_eq!(election_sql::stored_token(&orders, None)?, None);
/// assert_eq!(election_sql::stored_token(&orders, Some(7))?.map(|t| t.epoch().get()), Some(7));
/// assert!(election_sql::stored_token(&orders, Some(0)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn stored_token(
    resource: &ResourceName,
    mark: Option<i64>,
) -> Result<Option<Token>, fencing::Error> {
    mark.map(|m| token_from_mark(resource, m)).transpose()
}

/// The last step of a SQL fence's `fenced`: runs `write` (whose mark is
/// committed and checked) while the backend's lock on the mark is held,
/// then `unlock`s it by rolling back the transaction that holds it, which
/// wrote nothing that matters. An unlock that fails is only logged: the
/// connection is then dropped, which releases the lock too. Returns what
/// `write` returned.
///
/// Cancel safety: dropped while `write` runs, the write's future is
/// dropped at its await point and `unlock` never runs; the transaction
/// is dropped with the caller, which releases the lock.
///
/// ```
/// use fencing::ResourceName;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let orders = ResourceName::new("orders")?;
/// let unlocked = std::cell::Cell::new(false);
/// let rollback = || async {
///     unlocked.set(true);
///     Ok::<(), std::io::Error>(())
/// };
/// let rows = election_sql::write_locked(&orders, async { 3 }, rollback).await;
/// assert_eq!(rows, 3);
/// assert!(unlocked.get());
/// # Ok(()) }
/// ```
pub async fn write_locked<T, E: Display, F: Future<Output = Result<(), E>>>(
    resource: &ResourceName,
    write: impl Future<Output = T>,
    unlock: impl FnOnce() -> F,
) -> T {
    let outcome = write.await;
    if let Err(e) = unlock().await {
        tracing::debug!(resource = %resource, error = %e, "releasing the fence's lock failed; the connection is dropped");
    }
    outcome
}

/// The check of a fenced write once `token`'s mark is committed: the mark
/// read again under the backend's lock must be `token`. A higher mark (a
/// higher token got in between) is [`fencing::Error::Stale`]; a lower or
/// missing one means the marks `table` was edited by hand,
/// [`fencing::Error::Corrupt`]. Either way the write must not run.
///
/// ```
/// use election_core::Epoch;
/// use fencing::{ResourceName, Token};
///
/// let orders = ResourceName::new("orders")?;
/// let token = |e| Token::from_epoch(Epoch::new(e).unwrap());
/// assert!(election_sql::check_committed_mark(&orders, Some(token(7)), token(7), "fences").is_ok());
/// assert!(matches!(
///     election_sql::check_committed_mark(&orders, Some(token(9)), token(7), "fences"),
///     Err(fencing::Error::Stale { .. })
/// ));
/// assert!(matches!(
///     election_sql::check_committed_mark(&orders, None, token(7), "fences"),
///     Err(fencing::Error::Corrupt { .. })
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_committed_mark(
    resource: &ResourceName,
    mark: Option<Token>,
    token: Token,
    table: &str,
) -> Result<(), fencing::Error> {
    if mark == Some(token) {
        return Ok(());
    }
    Err(match Advance::decide(resource, mark, token) {
        Err(stale) => stale,
        Ok(_) => fencing::Error::corrupt(
            resource.as_str(),
            format!(
                "the mark is {} right after token {token} was committed: {table} was edited",
                mark.map_or_else(|| "gone".to_owned(), |m| m.to_string())
            ),
        ),
    })
}
