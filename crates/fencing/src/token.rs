//! The fencing [`Token`]: the epoch of the writer's term.

use std::fmt;
use std::str::FromStr;

use election_core::{Epoch, ParseEpochError};

/// The proof a writer presents with every write: the epoch of its term.
///
/// Tokens are ordered like epochs, so a later term's token is higher than
/// any earlier term's. All writes of one term share its token, so a store
/// accepts a token *equal* to its high-water mark and refuses only one
/// *strictly lower* (see [`Fence`](crate::Fence)).
///
/// A token is written as the epoch's decimal text, and [`FromStr`] reads
/// exactly that text back:
///
/// ```
/// use election_core::Epoch;
/// use fencing::Token;
///
/// let token = Token::from_epoch(Epoch::new(42).unwrap());
/// assert_eq!(token.to_string(), "42");
/// assert_eq!("42".parse::<Token>().unwrap(), token);
/// assert!("0".parse::<Token>().is_err());
/// assert!(token < Token::from_epoch(Epoch::new(43).unwrap()));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(Epoch);

impl Token {
    /// The token of the term numbered `epoch`, for stores and tools that
    /// read epochs from elsewhere.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::Token;
    ///
    /// # fn main() -> Result<(), election_core::ParseEpochError> {
    /// // An epoch handed over by another process, e.g. elect's $ELECTION_EPOCH:
    /// let epoch: Epoch = "42".parse()?;
    /// let token = Token::from_epoch(epoch);
    /// assert_eq!(token.to_string(), "42");
    /// # Ok(()) }
    /// ```
    pub const fn from_epoch(epoch: Epoch) -> Token {
        Token(epoch)
    }

    /// The epoch of the term the token was issued for.
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    /// use fencing::Token;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let token = Token::issue(&term)?;
    /// assert_eq!(token.epoch(), term.epoch());
    /// # Ok(()) }
    /// ```
    pub const fn epoch(self) -> Epoch {
        self.0
    }

    /// The token as a signed 64-bit integer, for a SQL `BIGINT` column
    /// ([`Epoch::get_i64`]): never fails, every token fits.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::Token;
    ///
    /// let token = Token::from_epoch(Epoch::new(42).unwrap());
    /// assert_eq!(token.get_i64(), 42_i64);
    /// ```
    pub const fn get_i64(self) -> i64 {
        self.0.get_i64()
    }
}

impl From<Epoch> for Token {
    fn from(epoch: Epoch) -> Token {
        Token(epoch)
    }
}

/// The token of a write guarded by a lease set: the epoch of the term that
/// held the write token's key at the commit point.
///
/// Name the key's resource with [`ResourceName::for_key`](crate::ResourceName::for_key)
/// so each key has its own high-water mark. The [`Token`] is `Copy` and may
/// outlive the guard (the write token cannot): that is what a fence is for,
/// a late write carrying it is refused once a later term has written.
///
/// An [`unguarded`](election_core::unguarded) write token has epoch 1
/// ([`Epoch::UNGUARDED`](election_core::Epoch::UNGUARDED)), lower than the
/// epoch of every term on every backend (terms start at 2,
/// [`Epoch::FIRST`]): a fence that has accepted any guarded write refuses it
/// with [`Error::Stale`](crate::Error::Stale), also during the key's first term.
///
/// ```
/// use election_core::{unguarded, Identity, LeaseSet, PerKeyClaims};
/// use election_testkit::memory::MemoryBackend;
/// use fencing::{Error, Fence, MemoryFence, ResourceName, Token};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = MemoryBackend::new();
/// let set = LeaseSet::new(PerKeyClaims::new(Identity::new("node-a")?, move |key| {
///     backend.claim(key.as_str(), "node-a")
/// }));
/// let fence = MemoryFence::new();
/// let written = set
///     .guard("shard-1", async |token| {
///         let shard = ResourceName::for_key(token.key());
///         fence.fenced(&shard, Token::from(&token), || async { "row" }).await
///     })
///     .await??;
/// assert_eq!(written, "row");
///
/// // An unguarded write (epoch 1) is refused once any term has written,
/// // here the key's very first term.
/// let late = unguarded("shard-1", "migration tool", async |token| {
///     let shard = ResourceName::for_key(token.key());
///     fence.fenced(&shard, Token::from(&token), || async { "late" }).await
/// })
/// .await?;
/// assert!(matches!(late, Err(Error::Stale { .. })));
/// # set.close().await;
/// # Ok(()) }
/// ```
impl From<&election_core::WriteToken<'_>> for Token {
    fn from(token: &election_core::WriteToken<'_>) -> Token {
        Token(token.epoch())
    }
}

impl From<Token> for Epoch {
    fn from(token: Token) -> Epoch {
        token.0
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for Token {
    type Err = ParseEpochError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use election_core::{Candidate, Identity};
    use election_testkit::memory::MemoryBackend;
    use proptest::prelude::*;

    #[tokio::test]
    async fn a_write_token_gives_its_epoch() {
        let token = election_core::unguarded("k", "test", async |t| Token::from(&t))
            .await
            .unwrap();
        assert_eq!(token.epoch(), Epoch::UNGUARDED);
        let backend = MemoryBackend::new();
        let b = backend.clone();
        Candidate::new(backend.claim("k", "old").unwrap())
            .campaign()
            .await
            .unwrap()
            .resign()
            .await
            .unwrap();
        let set = election_core::LeaseSet::new(election_core::PerKeyClaims::new(
            Identity::new("a").unwrap(),
            move |key| b.claim(key.as_str(), "a"),
        ));
        let (token, epoch) = set
            .guard("k", async |t| (Token::from(&t), t.epoch()))
            .await
            .unwrap();
        assert_eq!(token.epoch(), epoch);
        assert_eq!(epoch.get(), 3, "the term after the resigned one");
        set.close().await;
    }

    #[test]
    fn parse_refuses_what_is_not_an_epoch() {
        for bad in [
            "",
            "0",
            "-1",
            "+1",
            " 1",
            "1\n",
            "x",
            "18446744073709551616",
        ] {
            assert!(bad.parse::<Token>().is_err(), "{bad:?} parsed");
        }
    }

    proptest! {
        #[test]
        fn text_round_trips_and_order_matches_epochs(a in 1u64..=i64::MAX as u64, b in 1u64..=i64::MAX as u64) {
            let ta = Token::from_epoch(Epoch::new(a).unwrap());
            let tb = Token::from(Epoch::new(b).unwrap());
            prop_assert_eq!(ta.to_string().parse::<Token>().unwrap(), ta);
            prop_assert_eq!(ta.cmp(&tb), a.cmp(&b));
            prop_assert_eq!(Epoch::from(ta).get(), a);
        }
    }
}
