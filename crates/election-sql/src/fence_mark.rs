//! A fence's high-water mark as both SQL backends store it (a signed
//! 64-bit integer per resource), and the check both make after committing
//! a mark and before running a fenced write.

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
