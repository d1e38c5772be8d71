//! The lease row of the SQL backends (`election-sqlite`,
//! `election-postgres`) as pure data, the contender's one decision over
//! it (when it may take a row over), and the lease-time option checks both
//! backends share ([`check_times`], [`margin`], [`validity`]). No I/O: each backend reads and
//! writes its rows its own way and maps what it read into these types.
//!
//! Both backends keep one lease row per name (holder, epoch, renewal
//! version, TTL) and one epoch record per name (the highest epoch ever
//! handed out and the TTL of the term that got it). How this module serves
//! the [`Claim`](election_core::Claim) trait's rules:
//!
//! - **Rule 1** (the epoch is yielded in the same atomic step that wins the
//!   claim; epochs only grow, across crashes and restarts): each backend
//!   picks the next epoch above both the lease row's and the epoch
//!   record's in the transaction that wins; this module only decodes a
//!   stored epoch ([`decode_epoch`], [`Row::leader`]): a stored value
//!   outside [`Epoch`]'s range shows no holder and is never turned into
//!   an epoch.
//! - **Rule 2** (the watch reports a loss before the backend could grant
//!   the claim to another candidate): the holder counts its TTL on its
//!   monotonic clock from before each renewal it sends, and reports the
//!   loss once that TTL has passed without a renewal landing. A contender
//!   ([`may_claim`]) takes a held row over only after it has seen the same
//!   holder, term and renewal version, unchanged, for a full TTL (the
//!   longer of its own and the holder's) on its own monotonic clock,
//!   counted from the first time it saw them; any change it sees (a
//!   renewal, another term, another holder, the row gone or back) starts
//!   the wait again. Every renewal the holder did not report lost landed
//!   after the contender's first sight of the version it replaced, so the
//!   holder's TTL has run out by then. A row that vanished (deleted by hand
//!   while an epoch is recorded, or gone after this contender saw a
//!   holder) counts as held by an unknown holder the same way. A released
//!   row (no holder) or a name never held is taken at once.

use std::time::{Duration, UNIX_EPOCH};

use tokio::time::Instant;

use election_core::{
    ConfigError, Epoch, Handover, Identity, Leader, LeaderValue, Revocation, TransferRequest,
};

/// The safety margin of a lease of `ttl`: a tenth of it. A holder counts
/// its lease valid for `ttl - margin` ([`validity`]) from before each
/// claim or renewal it sends.
///
/// ```
/// use std::time::Duration;
/// use election_sql::lease_row::margin;
///
/// assert_eq!(margin(Duration::from_secs(10)), Duration::from_secs(1));
/// ```
pub fn margin(ttl: Duration) -> Duration {
    ttl / 10
}

/// How long after the instant before a successful claim or renewal was
/// sent the holder counts a lease of `ttl` as valid: `ttl - margin`.
///
/// ```
/// use std::time::Duration;
/// use election_sql::lease_row::validity;
/// use tokio::time::Instant;
///
/// let ttl = Duration::from_secs(10);
/// let sent = Instant::now(); // right before the claim or renewal was sent
/// let valid_until = sent + validity(ttl); // 9 s later
/// # let _ = valid_until;
/// ```
pub fn validity(ttl: Duration) -> Duration {
    ttl - margin(ttl)
}

/// `ttl` in milliseconds as stored, saturating at `i64::MAX`.
///
/// ```
/// use std::time::Duration;
/// use election_sql::lease_row::ttl_ms;
///
/// assert_eq!(ttl_ms(Duration::from_secs(10)), 10_000); // the lease row's ttl_ms column
/// assert_eq!(ttl_ms(Duration::MAX), i64::MAX);
/// ```
pub fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

/// The option checks the SQL backends share, in this order: `ttl`,
/// `renew_interval` and the backend's request bound `timeout` (named
/// `timeout_setting`, e.g. `"busy_timeout"`) each at least 1 ms; `ttl`
/// at most `i64::MAX` milliseconds (stored as such); twice
/// `renew_interval` within the [`validity`]; `timeout` at most
/// `renew_interval` (a renewal that timed out can be retried before the
/// validity ends).
///
/// # Errors
///
/// [`ConfigError::BadSetting`] naming the first setting that fails.
///
/// ```
/// use std::time::Duration;
/// use election_sql::lease_row::check_times;
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let (ttl, renew, busy) = (Duration::from_secs(10), Duration::from_secs(3), Duration::from_secs(1));
/// check_times(ttl, renew, "busy_timeout", busy)?;
/// // Twice the renew interval must fit in the validity (9 s here):
/// assert!(check_times(ttl, Duration::from_secs(5), "busy_timeout", busy).is_err());
/// # Ok(()) }
/// ```
pub fn check_times(
    ttl: Duration,
    renew_interval: Duration,
    timeout_setting: &'static str,
    timeout: Duration,
) -> Result<(), ConfigError> {
    let bad = |setting: &'static str, reason: String| ConfigError::BadSetting { setting, reason };
    let ms = Duration::from_millis(1);
    if ttl < ms || renew_interval < ms || timeout < ms {
        return Err(bad(
            "ttl",
            format!(
                "ttl {ttl:?}, renew_interval {renew_interval:?} and {timeout_setting} {timeout:?} must each be at least 1ms"
            ),
        ));
    }
    if i64::try_from(ttl.as_millis()).is_err() {
        return Err(bad("ttl", format!("{ttl:?} is too long")));
    }
    if renew_interval * 2 > validity(ttl) {
        return Err(bad(
            "ttl",
            format!(
                "ttl {ttl:?} must exceed twice the renew_interval {renew_interval:?} plus a margin of a tenth of the ttl"
            ),
        ));
    }
    if timeout > renew_interval {
        return Err(bad(
            timeout_setting,
            format!(
                "{timeout_setting} {timeout:?} must not exceed renew_interval {renew_interval:?}"
            ),
        ));
    }
    Ok(())
}

/// The columns a read of one name's lease row and epoch record returns,
/// as both SQL backends select them: a first column `K` (the name, or
/// whether a lease row exists), then the lease row's `holder`, `epoch`,
/// `version`, `ttl_ms`, `acquired_unix_ms`, then the epoch record's
/// `epoch` and `ttl_ms` (each NULL where the row or the record is absent).
///
/// ```
/// use election_sql::lease_row::LeaseColumns;
///
/// let never_held: LeaseColumns<bool> = (false, None, None, None, None, None, None, None);
/// assert_eq!(never_held.1, None); // no holder
/// ```
pub type LeaseColumns<K> = (
    K,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// A lease row as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The holder's identity; `None` once released.
    pub holder: Option<String>,
    /// The epoch (term) of the current or last holder, as stored.
    pub epoch: i64,
    /// The renewal version: bumped by every claim, renewal and release.
    pub version: i64,
    /// The TTL of the current or last term in milliseconds.
    pub ttl_ms: i64,
    /// The wall-clock time (Unix ms) of the claim that won the current
    /// term, as the winner's clock read it; display only.
    pub acquired_unix_ms: Option<i64>,
    /// The wall-clock time (Unix ms) of the holder's last renewal (or its
    /// win), as its clock read it; display only. `None` where a read did
    /// not fetch it (a contender's reads).
    pub renewed_unix_ms: Option<i64>,
    /// The value the current term published
    /// ([`Term::proclaim`](election_core::Term::proclaim)), as a read of
    /// the leader fetched it: only a value written in the row's current
    /// epoch (the backends store the epoch beside it and read it as
    /// `CASE WHEN value_epoch = epoch THEN value END`, ADR 0068); `None`
    /// where a read did not fetch it.
    pub value: Option<String>,
}

impl Row {
    /// The holder this row shows, decoded: `None` if it shows none (a
    /// released row, or an epoch outside the range [`decode_epoch`]
    /// accepts). `since` is `acquired_unix_ms`, the winner's wall clock in
    /// the transaction that won the term; `renewed` is `renewed_unix_ms`
    /// (the holder's wall clock at its last renewal) and `ttl` the row's
    /// `ttl_ms`, from which a reader judges a holder presumed dead for
    /// display ([`Leader::presumed_dead_at`]); `value` is the row's
    /// [`value`](Row::value) (a stored value that is not a
    /// [`LeaderValue`] — edited by hand — is not shown).
    ///
    /// # Errors
    ///
    /// An identity the backends would not write (see [`Identity::new`]).
    ///
    /// ```
    /// use election_sql::lease_row::Row;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let row = Row {
    ///     holder: Some("host-a/4711".into()),
    ///     epoch: 7,
    ///     version: 12,
    ///     ttl_ms: 10_000,
    ///     acquired_unix_ms: Some(1_700_000_000_000),
    ///     renewed_unix_ms: Some(1_700_000_003_000),
    ///     value: Some("10.0.3.17:8443".into()),
    /// };
    /// if let Some(leader) = row.leader()? {
    ///     println!("{} leads in term {}", leader.identity, leader.epoch);
    /// }
    /// let released = Row { holder: None, ..row };
    /// assert!(released.leader()?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn leader(&self) -> Result<Option<Leader>, ConfigError> {
        let (Some(holder), Some(epoch)) = (self.holder.as_deref(), decode_epoch(self.epoch)) else {
            return Ok(None);
        };
        if !is_term_holder(holder) {
            // A revocation (ADR 0111) or a handover (ADR 0112): nobody
            // leads.
            return Ok(None);
        }
        let wall = |ms: Option<i64>| {
            ms.and_then(|ms| u64::try_from(ms).ok())
                .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        };
        let renewed = wall(self.renewed_unix_ms);
        let ttl = u64::try_from(self.ttl_ms).ok().map(Duration::from_millis);
        Ok(Some(Leader {
            identity: Identity::new(holder)?,
            epoch,
            since: wall(self.acquired_unix_ms),
            ttl: renewed.and(ttl),
            renewed,
            value: self.value.as_deref().and_then(|v| LeaderValue::new(v).ok()),
        }))
    }

    /// The revocation this row shows (ADR 0111), decoded: `None` for a
    /// term's row, a released row, or a revocation whose identity or epoch
    /// does not decode. Its `at` is `acquired_unix_ms`, the revoker's wall
    /// clock in the transaction that revoked.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::lease_row::{Row, revoked_by};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let row = Row {
    ///     holder: Some(revoked_by(&Identity::new("ops")?)),
    ///     epoch: 8,
    ///     version: 13,
    ///     ttl_ms: 10_000,
    ///     acquired_unix_ms: Some(1_700_000_000_000),
    ///     renewed_unix_ms: None,
    ///     value: None,
    /// };
    /// assert_eq!(row.leader()?, None); // nobody leads a revoked name
    /// assert_eq!(row.revocation().map(|r| r.by.to_string()), Some("ops".into()));
    /// # Ok(()) }
    /// ```
    pub fn revocation(&self) -> Option<Revocation> {
        let by = self.holder.as_deref()?.strip_prefix(REVOKED_BY)?;
        let epoch = decode_epoch(self.epoch)?;
        let at = self
            .acquired_unix_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
        Some(Revocation::new(Identity::new(by).ok()?, epoch, at))
    }

    /// The handover this row shows (ADR 0112), decoded: `None` for a
    /// term's row, a released or revoked row, or a handover whose
    /// identities or epoch do not decode. Its epoch is the ended term's
    /// (a handover draws none), its window the row's `ttl_ms`.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::lease_row::{Row, handed_to};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let row = Row {
    ///     holder: Some(handed_to(&Identity::new("web-1")?, &Identity::new("web-2")?)),
    ///     epoch: 7,
    ///     version: 13,
    ///     ttl_ms: 15_000,
    ///     acquired_unix_ms: Some(1_700_000_000_000),
    ///     renewed_unix_ms: None,
    ///     value: None,
    /// };
    /// assert_eq!(row.leader()?, None); // nobody leads a reserved name
    /// assert_eq!(row.revocation(), None);
    /// let h = row.handover().ok_or("a handover")?;
    /// assert_eq!((h.from.as_str(), h.to.as_str(), h.epoch.get()), ("web-1", "web-2", 7));
    /// # Ok(()) }
    /// ```
    pub fn handover(&self) -> Option<Handover> {
        let (to, from) = handover_parts(self.holder.as_deref()?)?;
        let epoch = decode_epoch(self.epoch)?;
        let window = Duration::from_millis(u64::try_from(self.ttl_ms).ok()?);
        Some(Handover::new(
            Identity::new(from).ok()?,
            Identity::new(to).ok()?,
            epoch,
            window,
        ))
    }

    /// [`handover`](Self::handover), unless a reader whose wall clock
    /// reads `now_unix_ms` can tell that its window has passed (the row's
    /// `acquired_unix_ms`, the handing holder's wall clock, plus the
    /// window): what `Election::handover` shows. Display only: contenders
    /// count the window on their monotonic clocks ([`may_claim`]).
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::lease_row::{Row, handed_to};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let row = Row {
    ///     holder: Some(handed_to(&Identity::new("a")?, &Identity::new("b")?)),
    ///     epoch: 7,
    ///     version: 13,
    ///     ttl_ms: 15_000,
    ///     acquired_unix_ms: Some(1_000_000),
    ///     renewed_unix_ms: None,
    ///     value: None,
    /// };
    /// assert!(row.handover_at(1_010_000).is_some());
    /// assert!(row.handover_at(1_015_001).is_none());
    /// # Ok(()) }
    /// ```
    pub fn handover_at(&self, now_unix_ms: i64) -> Option<Handover> {
        let passed = self
            .acquired_unix_ms
            .is_some_and(|at| at.saturating_add(self.ttl_ms) < now_unix_ms);
        if passed { None } else { self.handover() }
    }
}

/// Whether `holder`, as a lease row stores it, names a term's holder
/// rather than a pseudo-holder: a revocation ([`REVOKED_BY`]) or a
/// handover ([`HANDED_TO`]), both of which begin with a control character
/// no [`Identity`] holds. A revoke or a transfer request applies only to
/// a term's holder.
///
/// ```
/// use election_core::Identity;
/// use election_sql::lease_row::{handed_to, is_term_holder, revoked_by};
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// assert!(is_term_holder("host-a/1"));
/// assert!(!is_term_holder(&revoked_by(&Identity::new("ops")?)));
/// assert!(!is_term_holder(&handed_to(&Identity::new("a")?, &Identity::new("b")?)));
/// # Ok(()) }
/// ```
pub fn is_term_holder(holder: &str) -> bool {
    !holder.starts_with(PSEUDO)
}

/// The first character of every pseudo-holder.
const PSEUDO: char = '\u{1}';

/// How a handover's row names the successor and the handing holder in the
/// `holder` column (ADR 0112): a control character, which no [`Identity`]
/// holds, `handed-to `, the successor, the control character again and
/// the holder that handed over. Contenders compare holders as text, so
/// they treat the row as a holder that stopped renewing, for the row's
/// TTL (the window) only ([`may_claim`]); the successor takes it at once
/// ([`may_claim_as`]); readers show nobody ([`Row::leader`]) and the
/// handover ([`Row::handover`]).
pub const HANDED_TO: &str = "\u{1}handed-to ";

/// The `holder` a handover by `from` to `to` writes ([`HANDED_TO`]).
///
/// ```
/// use election_core::Identity;
/// use election_sql::lease_row::{HANDED_TO, handed_to};
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let holder = handed_to(&Identity::new("a")?, &Identity::new("b")?);
/// assert_eq!(holder, format!("{HANDED_TO}b\u{1}a"));
/// # Ok(()) }
/// ```
pub fn handed_to(from: &Identity, to: &Identity) -> String {
    format!("{HANDED_TO}{to}{PSEUDO}{from}")
}

/// The successor and the handing holder a handover's `holder` names.
fn handover_parts(holder: &str) -> Option<(&str, &str)> {
    holder.strip_prefix(HANDED_TO)?.split_once(PSEUDO)
}

/// Whether `holder` is a handover's, and to whom: the successor as
/// stored.
///
/// ```
/// use election_core::Identity;
/// use election_sql::lease_row::{handed_to, handover_to};
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// assert_eq!(handover_to(&handed_to(&Identity::new("a")?, &Identity::new("b")?)), Some("b"));
/// assert_eq!(handover_to("a"), None);
/// # Ok(()) }
/// ```
pub fn handover_to(holder: &str) -> Option<&str> {
    handover_parts(holder).map(|(to, _)| to)
}

/// A handover's window as a lease row stores it (`ttl_ms`): whole
/// milliseconds, rounded up (never shorter than asked), at least 1.
///
/// ```
/// use std::time::Duration;
/// use election_sql::lease_row::window_ms;
///
/// assert_eq!(window_ms(Duration::from_secs(15)), 15_000);
/// assert_eq!(window_ms(Duration::from_micros(1500)), 2);
/// assert_eq!(window_ms(Duration::from_nanos(1)), 1);
/// ```
pub fn window_ms(window: Duration) -> i64 {
    let ms = window.as_nanos().div_ceil(1_000_000).max(1);
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A transfer request as a lease row stores it beside its term (ADR
/// 0112): the successor asked for, who asked, and when by the asker's
/// wall clock. The backends read it with the row's epoch only (stored
/// beside it as `transfer_epoch`, as a published value is), so a request
/// never outlives its term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// The successor asked for, as stored.
    pub to: String,
    /// Who asked, as stored.
    pub by: String,
    /// When (Unix ms, the asker's wall clock); display only.
    pub at_unix_ms: Option<i64>,
}

impl Asked {
    /// The request of the columns as read (`transfer_to`, `transfer_by`,
    /// `transfer_at`, each read only in the row's epoch): `None` if
    /// nobody asked.
    ///
    /// ```
    /// use election_sql::lease_row::Asked;
    ///
    /// assert_eq!(Asked::of(None, None, None), None);
    /// let asked = Asked::of(Some("b".into()), Some("ops".into()), Some(1_700_000_000_000));
    /// assert_eq!(asked.map(|a| a.to), Some("b".to_owned()));
    /// ```
    pub fn of(to: Option<String>, by: Option<String>, at_unix_ms: Option<i64>) -> Option<Asked> {
        Some(Asked {
            to: to?,
            by: by?,
            at_unix_ms,
        })
    }

    /// The request for the term of `epoch`; `None` if an identity does
    /// not decode (edited by hand).
    ///
    /// ```
    /// use election_core::Epoch;
    /// use election_sql::lease_row::Asked;
    ///
    /// let asked = Asked { to: "b".into(), by: "ops".into(), at_unix_ms: None };
    /// let r = asked.request(Epoch::FIRST).expect("decodes");
    /// assert_eq!((r.to.as_str(), r.by.as_str(), r.epoch), ("b", "ops", Epoch::FIRST));
    /// ```
    pub fn request(&self, epoch: Epoch) -> Option<TransferRequest> {
        // A preferred candidate's: `by` is [`PREFERRED`] and its priority.
        if let Some(p) = self.by.strip_prefix(PREFERRED) {
            let priority = p.parse::<u32>().ok()?;
            let asked = Asked {
                by: self.to.clone(),
                ..self.clone()
            };
            return Some(asked.request(epoch)?.with_priority(priority));
        }
        let at = self
            .at_unix_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
        Some(TransferRequest::new(
            Identity::new(&self.to).ok()?,
            Identity::new(&self.by).ok()?,
            epoch,
            at,
        ))
    }
}

/// How a preferred candidate's request ([`Election::prefer`](election_core::Election::prefer),
/// ADR 0112) is stored in the `transfer_by` column: a control character,
/// which no [`Identity`] holds, then `priority ` and the priority; its
/// `transfer_to` is the candidate, which is also who asked.
pub const PREFERRED: &str = "\u{1}priority ";

/// The `transfer_by` of a preferred candidate's request of `priority`.
///
/// ```
/// use election_core::Epoch;
/// use election_sql::lease_row::{Asked, preferred_by};
///
/// let asked = Asked { to: "zone-a/1".into(), by: preferred_by(5), at_unix_ms: None };
/// let r = asked.request(Epoch::FIRST).expect("decodes");
/// assert_eq!((r.by.as_str(), r.priority), ("zone-a/1", Some(5)));
/// ```
pub fn preferred_by(priority: u32) -> String {
    format!("{PREFERRED}{priority}")
}

/// How a revocation's row names its revoker in the `holder` column (ADR
/// 0111): a control character, which no [`Identity`] holds, then
/// `revoked-by ` and the identity. Contenders compare holders as text, so
/// they treat the row as a holder that stopped renewing (a full TTL, the
/// longer of theirs and the row's); readers show nobody
/// ([`Row::leader`]) and the revocation ([`Row::revocation`]).
pub const REVOKED_BY: &str = "\u{1}revoked-by ";

/// The `holder` a revocation by `by` writes: [`REVOKED_BY`] and `by`.
///
/// ```
/// use election_core::Identity;
/// use election_sql::lease_row::{REVOKED_BY, revoked_by};
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// assert_eq!(revoked_by(&Identity::new("ops")?), format!("{REVOKED_BY}ops"));
/// # Ok(()) }
/// ```
pub fn revoked_by(by: &Identity) -> String {
    format!("{REVOKED_BY}{by}")
}

/// What a revocation by `by` at `wall_ms` (the revoker's wall clock) in
/// stored epoch `epoch` of the term `deposed` shows, for
/// [`Election::revoke`](election_core::Election::revoke): `Ok(None)` if
/// `deposed` shows no term or `epoch` does not decode (the caller reports
/// a corrupt row).
///
/// # Errors
///
/// The deposed holder's identity does not decode (see [`Row::leader`]).
///
/// ```
/// use election_core::Identity;
/// use election_sql::lease_row::{Row, revoked};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let deposed = Row {
///     holder: Some("host-a/1".into()),
///     epoch: 7,
///     version: 3,
///     ttl_ms: 10_000,
///     acquired_unix_ms: None,
///     renewed_unix_ms: None,
///     value: None,
/// };
/// let r = revoked(&deposed, 8, &Identity::new("ops")?, 1_700_000_000_000)?.ok_or("no term")?;
/// assert_eq!((r.deposed.epoch.get(), r.revocation.epoch.get()), (7, 8));
/// # Ok(()) }
/// ```
pub fn revoked(
    deposed: &Row,
    epoch: i64,
    by: &Identity,
    wall_ms: i64,
) -> Result<Option<election_core::Revoked>, ConfigError> {
    let (Some(leader), Some(epoch)) = (deposed.leader()?, decode_epoch(epoch)) else {
        return Ok(None);
    };
    let at = u64::try_from(wall_ms)
        .ok()
        .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
    Ok(Some(election_core::Revoked::new(
        leader,
        Revocation::new(by.clone(), epoch, at),
    )))
}

/// An epoch as stored (a signed 64-bit integer), decoded: `None` outside
/// `1..=`[`Epoch::MAX`] (the range [`Epoch::new`] accepts). A backend that
/// accepts only terms' epochs filters further with [`Epoch::is_term`].
///
/// ```
/// use election_sql::lease_row::decode_epoch;
///
/// let stored: i64 = 7; // the epoch column as read
/// match decode_epoch(stored) {
///     Some(epoch) => println!("term {epoch}"),
///     None => eprintln!("not an epoch: {stored}"), // never turned into one
/// }
/// assert_eq!(decode_epoch(-1), None);
/// ```
pub fn decode_epoch(epoch: i64) -> Option<Epoch> {
    u64::try_from(epoch).ok().and_then(Epoch::new)
}

/// The epoch record of a name: the highest epoch ever handed out for it
/// and the TTL of the term that got it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The highest epoch handed out, as stored.
    pub epoch: i64,
    /// The TTL (ms) of the term that got it.
    pub ttl_ms: i64,
}

/// What a contender found for a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Never held: no lease row and no epoch recorded.
    Fresh,
    /// Released: the row shows no holder.
    Vacant,
    /// Someone holds it in term `epoch` at renewal `version`.
    Held {
        /// The holder's identity as stored.
        holder: String,
        /// The term, as stored.
        epoch: i64,
        /// The renewal version.
        version: i64,
        /// The holder's TTL in milliseconds.
        ttl_ms: i64,
    },
    /// The lease row is gone although an epoch was recorded: someone
    /// deleted it by hand. Its holder may still believe it leads, so this
    /// counts as held (by nobody known) for a full TTL.
    Vanished {
        /// The epoch of the last term that won (from the epoch record): a
        /// change means a new term began (and its row vanished too), so
        /// the wait for its holder starts again.
        epoch: i64,
        /// The TTL (ms) of the last term that won (from the epoch record).
        ttl_ms: i64,
    },
}

impl Found {
    /// What `lease` (the lease row, if any) and `recorded` (the epoch
    /// record, if any) say.
    ///
    /// ```
    /// use election_sql::lease_row::{Found, Recorded, Row};
    ///
    /// let row = Row { holder: None, epoch: 7, version: 13, ttl_ms: 10_000, acquired_unix_ms: None, renewed_unix_ms: None, value: None };
    /// assert_eq!(Found::of(Some(&row), None), Found::Vacant); // released
    /// assert_eq!(Found::of(None, None), Found::Fresh); // never held
    /// let recorded = Recorded { epoch: 7, ttl_ms: 10_000 };
    /// assert_eq!(Found::of(None, Some(recorded)), Found::Vanished { epoch: 7, ttl_ms: 10_000 });
    /// ```
    pub fn of(lease: Option<&Row>, recorded: Option<Recorded>) -> Found {
        match (lease, recorded) {
            (
                Some(Row {
                    holder: Some(holder),
                    epoch,
                    version,
                    ttl_ms,
                    ..
                }),
                _,
            ) => Found::Held {
                holder: holder.clone(),
                epoch: *epoch,
                version: *version,
                ttl_ms: *ttl_ms,
            },
            (Some(_), _) => Found::Vacant,
            (None, Some(r)) => Found::Vanished {
                epoch: r.epoch,
                ttl_ms: r.ttl_ms,
            },
            (None, None) => Found::Fresh,
        }
    }
}

/// What a contender has seen of a lease held by someone else (no holder:
/// a lease row that vanished), and since when on its own monotonic clock.
/// Kept between attempts and updated by [`may_claim`].
#[derive(Clone, Debug)]
pub struct Observed {
    holder: Option<String>,
    epoch: i64,
    version: i64,
    ttl_ms: i64,
    since: Instant,
}

impl Observed {
    /// The term (epoch, as stored) of the holder seen, or `None` for a
    /// vanished row.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::lease_row::{Found, may_claim};
    /// use tokio::time::Instant;
    ///
    /// let mut observed = None;
    /// let found = Found::Held { holder: "host-b/99".into(), epoch: 7, version: 3, ttl_ms: 10_000 };
    /// may_claim(&mut observed, &found, Duration::from_secs(10), Instant::now());
    /// assert_eq!(observed.as_ref().and_then(|o| o.held_epoch()), Some(7));
    /// ```
    pub fn held_epoch(&self) -> Option<i64> {
        self.holder.as_ref().map(|_| self.epoch)
    }

    /// How long a contender whose own TTL is `ttl` waits this observation
    /// out: a full TTL, the longer of `ttl` and the holder's; a handover
    /// (ADR 0112) its window alone, since no term holds the row (the
    /// handing holder's ended in the write that stored the handover).
    fn wait(&self, ttl: Duration) -> Duration {
        let holders = Duration::from_millis(u64::try_from(self.ttl_ms).unwrap_or(0));
        match self.holder.as_deref().and_then(handover_to) {
            Some(_) => holders,
            None => ttl.max(holders),
        }
    }

    /// When, on the contender's monotonic clock, the handover this
    /// observation saw (ADR 0112) stops reserving the name for its
    /// successor: its window after this contender first read it. `None`
    /// for anything else seen. A waiting contender wakes then at the
    /// latest.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Identity;
    /// use election_sql::lease_row::{Found, handed_to, may_claim};
    /// use tokio::time::Instant;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let holder = handed_to(&Identity::new("a")?, &Identity::new("b")?);
    /// let found = Found::Held { holder, epoch: 7, version: 3, ttl_ms: 2_000 };
    /// let (mut observed, t0) = (None, Instant::now());
    /// assert!(!may_claim(&mut observed, &found, Duration::from_secs(10), t0));
    /// let ends = observed.as_ref().and_then(|o| o.handover_ends());
    /// assert_eq!(ends, Some(t0 + Duration::from_secs(2)));
    /// # Ok(()) }
    /// ```
    pub fn handover_ends(&self) -> Option<Instant> {
        self.holder.as_deref().and_then(handover_to)?;
        Some(self.since + self.wait(Duration::ZERO))
    }
}

/// The observation key of a vanished row (no holder, no term).
const VANISHED: i64 = i64::MIN;

/// Whether a contender may claim a name now, given what it `found` and
/// what it has `observed` before (updated here), with its own TTL `ttl`
/// and `now` read from its monotonic clock (inject it in tests):
///
/// - released (a row with no holder): yes;
/// - never held (no row, no epoch recorded) and nothing observed before:
///   yes;
/// - held: only once this contender has seen that same holder, term and
///   renewal version for a full TTL (the longer of `ttl` and the holder's)
///   on its monotonic clock, counted from the first time it saw them;
/// - vanished (no row, but an epoch recorded; or no row at all after this
///   contender saw one held): treated as held by an unknown holder, so only
///   after a full TTL of seeing it gone with the same recorded epoch,
///   counted from the first time it was seen so (a term won in between,
///   whose row vanished too, starts the wait again). The holder whose row
///   vanished loses at its next renewal or commit-point check, which
///   always comes before that.
///
/// Anything else seen than the observation kept starts a new one at `now`
/// (and answers no).
///
/// ```
/// use std::time::Duration;
/// use election_sql::lease_row::{Found, may_claim};
/// use tokio::time::Instant;
///
/// let ttl = Duration::from_secs(10);
/// let mut observed = None; // kept between a contender's attempts
/// let found = Found::Held { holder: "host-b/99".into(), epoch: 7, version: 3, ttl_ms: 10_000 };
/// let t0 = Instant::now();
/// assert!(!may_claim(&mut observed, &found, ttl, t0)); // first sight: wait
/// assert!(!may_claim(&mut observed, &found, ttl, t0 + Duration::from_secs(5)));
/// // The same holder, term and version, unchanged for a full TTL: take it over.
/// assert!(may_claim(&mut observed, &found, ttl, t0 + ttl));
/// assert!(may_claim(&mut observed, &Found::Vacant, ttl, t0)); // released: at once
/// ```
pub fn may_claim(
    observed: &mut Option<Observed>,
    found: &Found,
    ttl: Duration,
    now: Instant,
) -> bool {
    let (holder, epoch, version, ttl_ms) = match found {
        Found::Vacant => return true,
        Found::Fresh => match observed {
            None => return true,
            Some(o) => (None, VANISHED, VANISHED, o.ttl_ms),
        },
        Found::Held {
            holder,
            epoch,
            version,
            ttl_ms,
        } => (Some(holder.as_str()), *epoch, *version, *ttl_ms),
        Found::Vanished { epoch, ttl_ms } => (None, *epoch, VANISHED, *ttl_ms),
    };
    match observed {
        Some(o) if o.holder.as_deref() == holder && o.epoch == epoch && o.version == version => {
            now.saturating_duration_since(o.since) >= o.wait(ttl)
        }
        _ => {
            *observed = Some(Observed {
                holder: holder.map(str::to_owned),
                epoch,
                version,
                ttl_ms,
                since: now,
            });
            false
        }
    }
}

/// [`may_claim`] for the candidate `identity` (as stored): a handover to
/// `identity` (ADR 0112) is taken at once, conditional on the row as read
/// as every claim is; anything else as [`may_claim`] decides (a handover
/// to another candidate is waited out for its window).
///
/// ```
/// use std::time::Duration;
/// use election_core::Identity;
/// use election_sql::lease_row::{Found, handed_to, may_claim_as};
/// use tokio::time::Instant;
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let holder = handed_to(&Identity::new("a")?, &Identity::new("b")?);
/// let found = Found::Held { holder, epoch: 7, version: 3, ttl_ms: 60_000 };
/// let (ttl, now) = (Duration::from_secs(10), Instant::now());
/// assert!(may_claim_as(&mut None, &found, ttl, now, "b")); // the successor: at once
/// assert!(!may_claim_as(&mut None, &found, ttl, now, "c")); // anyone else waits
/// # Ok(()) }
/// ```
pub fn may_claim_as(
    observed: &mut Option<Observed>,
    found: &Found,
    ttl: Duration,
    now: Instant,
    identity: &str,
) -> bool {
    if let Found::Held { holder, .. } = found
        && handover_to(holder) == Some(identity)
    {
        return true;
    }
    may_claim(observed, found, ttl, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn held_by(holder: &str, epoch: i64, version: i64, ttl_ms: i64) -> Found {
        Found::Held {
            holder: holder.into(),
            epoch,
            version,
            ttl_ms,
        }
    }

    fn held(version: i64) -> Found {
        held_by("a", 2, version, 3000)
    }

    /// No row, with `epoch` recorded by a term of a 5 s TTL.
    fn vanished(epoch: i64) -> Found {
        Found::Vanished {
            epoch,
            ttl_ms: 5000,
        }
    }

    #[test]
    fn takeover_needs_the_same_holder_term_and_version_for_a_full_ttl() {
        let ttl = Duration::from_secs(3);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut seen = None;
        assert!(!may_claim(&mut seen, &held(7), ttl, at(0)), "first sight");
        assert!(!may_claim(&mut seen, &held(7), ttl, at(2999)));
        assert!(may_claim(&mut seen, &held(7), ttl, at(3000)));
        // A renewal (new version), another term or another holder starts
        // the count again.
        assert!(!may_claim(&mut seen, &held(8), ttl, at(3001)), "renewed");
        assert!(!may_claim(&mut seen, &held(8), ttl, at(6000)));
        assert!(may_claim(&mut seen, &held(8), ttl, at(6001)));
        assert!(!may_claim(
            &mut seen,
            &held_by("b", 2, 8, 3000),
            ttl,
            at(6002)
        ));
        assert!(!may_claim(
            &mut seen,
            &held_by("b", 3, 8, 3000),
            ttl,
            at(9002)
        ));
        // The longer of the two TTLs counts.
        let long = held_by("a", 2, 1, 10_000);
        let mut seen = None;
        assert!(!may_claim(&mut seen, &long, ttl, at(0)));
        assert!(!may_claim(&mut seen, &long, ttl, at(9999)));
        assert!(may_claim(&mut seen, &long, ttl, at(10_000)));
    }

    #[test]
    fn a_vanished_row_counts_as_held_for_a_full_ttl() {
        let ttl = Duration::from_secs(3);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // Fresh and released names are taken at once.
        assert!(may_claim(&mut None, &Found::Fresh, ttl, at(0)));
        assert!(may_claim(&mut None, &Found::Vacant, ttl, at(0)));
        // A row gone while an epoch is recorded: a full TTL (the longer of
        // this contender's and the last term's) from the first sight.
        let mut seen = None;
        let gone = vanished(3);
        assert!(!may_claim(&mut seen, &gone, ttl, at(0)));
        assert!(!may_claim(&mut seen, &gone, ttl, at(4999)));
        assert!(may_claim(&mut seen, &gone, ttl, at(5000)));
        // Another contender won term 4 in between and its row vanished
        // too, unseen by this one (the torture suite's rowdel fault, seed
        // 1): the wait for term 4's holder starts when it is first seen.
        let mut seen = None;
        assert!(!may_claim(&mut seen, &gone, ttl, at(0)));
        let gone_again = vanished(4);
        assert!(!may_claim(&mut seen, &gone_again, ttl, at(5000)));
        assert!(!may_claim(&mut seen, &gone_again, ttl, at(9999)));
        assert!(may_claim(&mut seen, &gone_again, ttl, at(10_000)));
        // A contender that saw a holder and then sees nothing at all (no
        // row, no epoch): the same, with the holder's TTL.
        let mut seen = None;
        assert!(!may_claim(&mut seen, &held_by("a", 4, 1, 5000), ttl, at(0)));
        assert!(!may_claim(&mut seen, &Found::Fresh, ttl, at(2000)));
        assert!(!may_claim(&mut seen, &Found::Fresh, ttl, at(6999)));
        assert!(may_claim(&mut seen, &Found::Fresh, ttl, at(7000)));
        // A release is taken at once even after a holder was seen.
        let mut seen = None;
        assert!(!may_claim(&mut seen, &held(4), ttl, at(0)));
        assert!(may_claim(&mut seen, &Found::Vacant, ttl, at(1)));
    }

    /// A handover (ADR 0112) is waited out for its window alone (not the
    /// contender's longer TTL), from the contender's first sight; its
    /// successor takes it at once; any change starts the wait again.
    #[test]
    fn a_handover_is_waited_out_for_its_window_and_taken_at_once_by_its_successor() {
        let id = |s: &str| Identity::new(s).unwrap();
        let holder = handed_to(&id("a"), &id("b"));
        let handover = held_by(&holder, 7, 3, 2000);
        let ttl = Duration::from_secs(10);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut seen = None;
        assert!(!may_claim_as(&mut seen, &handover, ttl, at(0), "c"));
        assert_eq!(
            seen.as_ref().and_then(Observed::handover_ends),
            Some(at(2000))
        );
        assert!(!may_claim_as(&mut seen, &handover, ttl, at(1999), "c"));
        assert!(may_claim_as(&mut seen, &handover, ttl, at(2000), "c"));
        // The successor: at once, whatever it saw before.
        assert!(may_claim_as(&mut None, &handover, ttl, at(0), "b"));
        assert!(may_claim_as(&mut seen, &handover, ttl, at(0), "b"));
        // Not the successor by a prefix of its name, nor the handing holder.
        assert!(!may_claim_as(&mut None, &handover, ttl, at(0), "a"));
        assert!(!may_claim_as(&mut None, &handover, ttl, at(0), "bb"));
        // A term's holder seen before the handover: the wait starts again.
        let mut seen = None;
        assert!(!may_claim(&mut seen, &held_by("a", 7, 2, 3000), ttl, at(0)));
        assert_eq!(seen.as_ref().and_then(Observed::handover_ends), None);
        assert!(!may_claim(&mut seen, &handover, ttl, at(9000)));
        assert!(!may_claim(&mut seen, &handover, ttl, at(10_999)));
        assert!(may_claim(&mut seen, &handover, ttl, at(11_000)));
    }

    /// A handover's row shows nobody leading, no revocation, and the
    /// handover with the ended term's epoch; a revocation's row shows no
    /// handover; neither is a term's holder.
    #[test]
    fn a_handover_row_is_neither_a_term_nor_a_revocation() {
        let id = |s: &str| Identity::new(s).unwrap();
        let row = |holder: String| Row {
            holder: Some(holder),
            epoch: 7,
            version: 3,
            ttl_ms: 15_000,
            acquired_unix_ms: Some(1_000),
            renewed_unix_ms: None,
            value: None,
        };
        let handover = row(handed_to(&id("web-1"), &id("web-2")));
        assert_eq!(handover.leader().unwrap(), None);
        assert_eq!(handover.revocation(), None);
        let h = handover.handover().unwrap();
        assert_eq!(
            (h.from.as_str(), h.to.as_str(), h.epoch.get(), h.window),
            ("web-1", "web-2", 7, Duration::from_secs(15))
        );
        assert_eq!(handover.handover_at(16_000), Some(h));
        assert_eq!(handover.handover_at(16_001), None);
        assert!(!is_term_holder(handover.holder.as_deref().unwrap()));
        let revoked = row(revoked_by(&id("ops")));
        assert_eq!(revoked.handover(), None);
        assert!(revoked.revocation().is_some());
        assert!(!is_term_holder(revoked.holder.as_deref().unwrap()));
        let term = row("web-1".into());
        assert_eq!((term.handover(), term.revocation()), (None, None));
        assert!(is_term_holder("web-1"));
        // A handover edited by hand (no separator) decodes to none.
        assert_eq!(row(format!("{HANDED_TO}web-2")).handover(), None);
    }

    /// A request decodes with the epoch it is read in; a missing column
    /// is no request.
    #[test]
    fn a_stored_request_decodes_for_its_term() {
        assert_eq!(Asked::of(Some("b".into()), None, Some(1)), None);
        let asked = Asked::of(Some("b".into()), Some("ops".into()), Some(1500)).unwrap();
        let r = asked.request(Epoch::new(9).unwrap()).unwrap();
        assert_eq!(
            (r.to.as_str(), r.by.as_str(), r.epoch.get()),
            ("b", "ops", 9)
        );
        assert_eq!(r.at, UNIX_EPOCH.checked_add(Duration::from_millis(1500)));
        let bad = Asked::of(Some(String::new()), Some("ops".into()), None).unwrap();
        assert_eq!(bad.request(Epoch::FIRST), None);
    }

    #[test]
    fn times_need_two_renewals_within_the_validity() {
        let s = Duration::from_secs;
        let ok = |ttl, renew, timeout| check_times(ttl, renew, "busy_timeout", timeout).is_ok();
        assert!(ok(s(10), s(4), s(1)));
        assert_eq!(margin(s(15)), Duration::from_millis(1500));
        assert_eq!(validity(s(10)), s(9));
        assert!(!ok(s(10), s(5), s(1)), "10 s less a tenth is below 2 x 5 s");
        assert!(!ok(s(10), s(10), s(1)));
        assert!(!ok(Duration::ZERO, s(1), s(1)));
        assert!(!ok(s(10), Duration::ZERO, s(1)));
        assert!(!ok(s(10), s(4), Duration::ZERO));
        assert!(!ok(Duration::MAX, s(4), s(1)));
        assert!(matches!(
            check_times(s(10), s(4), "busy_timeout", s(5)),
            Err(ConfigError::BadSetting {
                setting: "busy_timeout",
                ..
            })
        ));
        assert_eq!(ttl_ms(s(3)), 3000);
        assert_eq!(ttl_ms(Duration::MAX), i64::MAX);
    }

    #[test]
    fn found_of_a_row_and_a_record() {
        let row = |holder: Option<&str>| Row {
            holder: holder.map(str::to_owned),
            epoch: 5,
            version: 9,
            ttl_ms: 1000,
            acquired_unix_ms: None,
            renewed_unix_ms: None,
            value: None,
        };
        let rec = Recorded {
            epoch: 6,
            ttl_ms: 2000,
        };
        assert_eq!(Found::of(None, None), Found::Fresh);
        assert_eq!(Found::of(Some(&row(None)), Some(rec)), Found::Vacant);
        assert_eq!(
            Found::of(Some(&row(Some("a"))), Some(rec)),
            held_by("a", 5, 9, 1000)
        );
        assert_eq!(
            Found::of(None, Some(rec)),
            Found::Vanished {
                epoch: 6,
                ttl_ms: 2000
            }
        );
    }

    #[test]
    fn a_row_shows_a_leader_only_with_a_holder_and_an_epoch() {
        let row = |holder: Option<&str>, epoch| Row {
            holder: holder.map(str::to_owned),
            epoch,
            version: 1,
            ttl_ms: 1000,
            acquired_unix_ms: Some(1500),
            renewed_unix_ms: Some(2500),
            value: None,
        };
        assert_eq!(row(None, 3).leader().unwrap(), None);
        assert_eq!(row(Some("a"), 0).leader().unwrap(), None);
        assert_eq!(row(Some("a"), -1).leader().unwrap(), None);
        let leader = row(Some("a"), 3).leader().unwrap().unwrap();
        assert_eq!(leader.identity.as_str(), "a");
        assert_eq!(leader.epoch.get(), 3);
        assert_eq!(
            leader.since,
            UNIX_EPOCH.checked_add(Duration::from_millis(1500))
        );
        // The last renewal and the TTL: presumed dead (for display) once a
        // reader's wall clock is past 2.5 s + 1 s.
        assert_eq!(
            leader.renewed,
            UNIX_EPOCH.checked_add(Duration::from_millis(2500))
        );
        assert_eq!(leader.ttl, Some(Duration::from_millis(1000)));
        assert!(!leader.presumed_dead_at(UNIX_EPOCH + Duration::from_millis(3500)));
        assert!(leader.presumed_dead_at(UNIX_EPOCH + Duration::from_millis(3501)));
        assert!(row(Some(""), 3).leader().is_err());
    }

    /// One observation a contender makes: which of a few holders, terms
    /// and versions (small ranges, so repeats are common), or a release or
    /// no trace at all, after `step_ms` on its clock.
    fn step() -> impl Strategy<Value = (Found, u64)> {
        let found = prop_oneof![
            8 => (0..2usize, 2..4i64, 1..3i64, prop_oneof![Just(1000i64), Just(4000)])
                .prop_map(|(h, e, v, t)| held_by(["a", "b"][h], e, v, t)),
            2 => (2..4i64, prop_oneof![Just(1000i64), Just(4000)])
                .prop_map(|(epoch, ttl_ms)| Found::Vanished { epoch, ttl_ms }),
            1 => Just(Found::Fresh),
            1 => Just(Found::Vacant),
        ];
        (found, 0..2500u64)
    }

    /// What an observation is compared by: holder, term, version.
    type Key = (Option<String>, i64, i64);

    proptest! {
        /// The judgement's invariant: a takeover of a held or vanished
        /// row is allowed only after a full TTL (the longer of the
        /// contender's and the holder's) of unchanged observations on the
        /// injected clock, counted from the first of them; any change
        /// restarts the wait. A release is always taken; a fresh name only
        /// when nothing was seen before.
        #[test]
        fn takeover_only_after_a_full_ttl_unchanged(
            ttl_ms in 1..3000u64,
            steps in proptest::collection::vec(step(), 1..40),
        ) {
            let ttl = Duration::from_millis(ttl_ms);
            let t0 = Instant::now();
            let mut now = t0;
            let mut observed = None;
            // The model: the key of the unchanged run seen, its TTL, and
            // when it began.
            let mut run: Option<(Key, i64, Instant)> = None;
            for (found, step_ms) in steps {
                now += Duration::from_millis(step_ms);
                let may = may_claim(&mut observed, &found, ttl, now);
                let key = match &found {
                    Found::Vacant => {
                        prop_assert!(may, "a release is taken at once");
                        continue;
                    }
                    Found::Fresh if run.is_none() => {
                        prop_assert!(may, "a name never seen held is taken at once");
                        continue;
                    }
                    Found::Fresh => (None, VANISHED, VANISHED),
                    Found::Held { holder, epoch, version, .. } => {
                        (Some(holder.clone()), *epoch, *version)
                    }
                    Found::Vanished { epoch, .. } => (None, *epoch, VANISHED),
                };
                let ttl_of = match &found {
                    Found::Held { ttl_ms, .. } | Found::Vanished { ttl_ms, .. } => *ttl_ms,
                    _ => run.as_ref().map_or(0, |r| r.1),
                };
                match &run {
                    Some((k, theirs, since)) if *k == key => {
                        let full = ttl.max(Duration::from_millis(u64::try_from(*theirs).unwrap()));
                        prop_assert_eq!(may, now - *since >= full);
                    }
                    _ => {
                        prop_assert!(!may, "a change restarts the wait");
                        run = Some((key, ttl_of, now));
                    }
                }
            }
        }

        /// A holder read from a row is presumed dead exactly when a
        /// reader's wall clock is past its last renewal plus its TTL, and
        /// stays so at every later reading (issue 26: display only).
        #[test]
        fn presumed_dead_exactly_past_the_last_renewal_plus_the_ttl(
            renewed_ms in 0..4_000_000_000_000i64,
            ttl_ms in 1..600_000i64,
            at_ms in 0..4_000_000_000_000u64,
            later_ms in 0..10_000_000u64,
        ) {
            let row = Row {
                holder: Some("a".into()),
                epoch: 3,
                version: 1,
                ttl_ms,
                acquired_unix_ms: Some(renewed_ms),
                renewed_unix_ms: Some(renewed_ms),
                value: None,
            };
            let leader = row.leader().unwrap().unwrap();
            let at = UNIX_EPOCH + Duration::from_millis(at_ms);
            let dead = leader.presumed_dead_at(at);
            prop_assert_eq!(dead, i64::try_from(at_ms).unwrap() > renewed_ms + ttl_ms);
            if dead {
                prop_assert!(leader.presumed_dead_at(at + Duration::from_millis(later_ms)));
            }
            // No renewal time kept: never presumed dead.
            let unknown = Row { renewed_unix_ms: None, ..row }.leader().unwrap().unwrap();
            prop_assert!(!unknown.presumed_dead_at(at));
        }

        /// Epoch decoding: exactly 1..=MAX decodes, and it round-trips.
        #[test]
        fn epochs_decode_only_in_range(v in any::<i64>()) {
            match decode_epoch(v) {
                Some(e) => {
                    prop_assert!(v >= 1);
                    prop_assert_eq!(e.get(), u64::try_from(v).unwrap());
                }
                None => prop_assert!(v < 1),
            }
        }
    }
}
