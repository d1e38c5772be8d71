//! The records stored in the buckets, and their keys: a claim's
//! ([`ClaimRecord`]) and a lease-set session's ([`SessionRecord`]).
//!
//! A key is the election name, with every byte outside `[A-Za-z0-9_-]`
//! written as `=XX` (hex), so any election name is a valid KV key. A claim's record:
//!
//! ```text
//! election-nats/1
//! identity=host-a/4711
//! nonce=1234567890
//! base=1796000000000000
//! epoch=1796000000000042  (from the first write after the win on)
//! since_unix_ms=1796000000000
//! value=10.0.3.17:8443  (once the term proclaimed one, ADR 0068)
//! ```
//!
//! `base` is the creation time (µs since the Unix epoch) of the bucket
//! incarnation the writer wrote into; the epoch of a term is `base +` the
//! revision of its winning write (see `bucket::epoch_at`). The winning
//! write carries `base` but not yet `epoch` (its revision is only known
//! once it landed); every later write of the term carries both.
//!
//! `since_unix_ms` is the holder's wall clock at the term's first write
//! (the winning create); every later write of the term (grace refresh,
//! renewals, commit-point checks) carries the same value. Display only.

use std::time::{Duration, UNIX_EPOCH};

use async_nats::jetstream::kv;
use election_core::{ElectionName, Epoch, Identity, Leader, LeaderValue};

use crate::error::Error;

/// The KV key of an election.
pub(crate) fn key(name: &ElectionName) -> String {
    key_of(name.as_str())
}

/// The KV key for any validated name (election or fenced resource).
pub(crate) fn key_of(name: &str) -> String {
    let mut k = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            k.push(b as char);
        } else {
            k.push_str(&format!("={b:02X}"));
        }
    }
    k
}

/// An election key's value: the holder of one term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClaimRecord {
    pub(crate) identity: Identity,
    /// The random nonce of the attempt that wrote it.
    pub(crate) nonce: u64,
    pub(crate) epoch: Option<Epoch>,
    pub(crate) since_unix_ms: Option<u64>,
    /// The bucket incarnation's creation time the writer used (µs).
    pub(crate) base: Option<u64>,
    /// The value the term published (ADR 0068); every later write of the
    /// term (renewals, commit-point checks) carries it.
    pub(crate) value: Option<LeaderValue>,
}

/// A lease-set record: the value of a session key (in the sessions
/// bucket) and of a lease-set key (in the keys bucket), naming the session
/// that holds it.
///
/// ```text
/// election-nats/1
/// identity=host-a/4711
/// session=1234567890
/// nonce=1234567890        (the same id, for readers before `session=`)
/// base=1796000000000000   (keys only)
/// ```
///
/// Versions before `session=` wrote the session id as `nonce=` alone;
/// such a record still decodes (its `nonce` is the session id), and the
/// `nonce=` line every record still carries lets those versions read
/// today's records. A record whose two ids differ is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SessionRecord {
    pub(crate) identity: Identity,
    /// The lease-set session's id.
    pub(crate) session: u64,
    /// The keys bucket incarnation's creation time the writer used (µs);
    /// `None` in a session key's value.
    pub(crate) base: Option<u64>,
}

const HEADER: &str = "election-nats/1";

/// The `key=value` lines of a value after its header, parsed and checked
/// for the fields either kind of value uses; unknown keys are ignored (a
/// newer writer's additions, such as [`PENDING`]).
#[derive(Default)]
struct Fields {
    identity: Option<Identity>,
    nonce: Option<u64>,
    session: Option<u64>,
    epoch: Option<Epoch>,
    since_unix_ms: Option<u64>,
    base: Option<u64>,
    value: Option<LeaderValue>,
}

/// The error for a value of `key` that cannot be read.
fn corrupt(key: &str, detail: String) -> Error {
    Error::CorruptValue {
        key: key.to_owned(),
        detail,
    }
}

/// The error for a value of `key` of the other kind (`what` it is).
fn wrong_kind(key: &str, what: &str) -> Error {
    corrupt(
        key,
        format!("{what}: not the kind of value this bucket holds"),
    )
}

impl Fields {
    /// The writer's identity, which every value carries.
    fn identity(&self, key: &str) -> Result<Identity, Error> {
        self.identity
            .clone()
            .ok_or_else(|| corrupt(key, "no identity".into()))
    }

    fn parse(key: &str, bytes: &[u8]) -> Result<Fields, Error> {
        let bad = |detail: String| corrupt(key, detail);
        let number = |name: &str, v: &str| {
            v.parse::<u64>()
                .map_err(|_| bad(format!("bad {name} {v:?}")))
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(bad(format!("the first line is not {HEADER:?}")));
        }
        let mut f = Fields::default();
        for line in lines {
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| bad(format!("line {line:?} is not key=value")))?;
            match k {
                "identity" => f.identity = Some(Identity::new(v).map_err(|e| bad(e.to_string()))?),
                "nonce" => f.nonce = Some(number(k, v)?),
                "session" => f.session = Some(number(k, v)?),
                "epoch" => f.epoch = Some(v.parse().map_err(|e| bad(format!("{e}")))?),
                "since_unix_ms" => f.since_unix_ms = v.parse().ok(),
                "base" => f.base = Some(number(k, v)?),
                "value" => f.value = Some(LeaderValue::new(v).map_err(|e| bad(e.to_string()))?),
                _ => {}
            }
        }
        Ok(f)
    }
}

impl ClaimRecord {
    pub(crate) fn encode(&self) -> bytes::Bytes {
        let mut s = format!(
            "{HEADER}\nidentity={}\nnonce={}\n",
            self.identity, self.nonce
        );
        if let Some(b) = self.base {
            s.push_str(&format!("base={b}\n"));
        }
        if let Some(e) = self.epoch {
            s.push_str(&format!("epoch={e}\n"));
        }
        if let Some(ms) = self.since_unix_ms {
            s.push_str(&format!("since_unix_ms={ms}\n"));
        }
        if let Some(v) = &self.value {
            s.push_str(&format!("value={v}\n"));
        }
        s.into()
    }

    /// Decodes an election key's value; a lease-set record (it names a
    /// session) is refused.
    pub(crate) fn decode(key: &str, bytes: &[u8]) -> Result<ClaimRecord, Error> {
        let f = Fields::parse(key, bytes)?;
        if f.session.is_some() {
            return Err(wrong_kind(key, "a lease-set record (it names a session)"));
        }
        Ok(ClaimRecord {
            identity: f.identity(key)?,
            nonce: f.nonce.ok_or_else(|| corrupt(key, "no nonce".into()))?,
            epoch: f.epoch,
            since_unix_ms: f.since_unix_ms,
            base: f.base,
            value: f.value,
        })
    }

    /// The epoch of the term this value belongs to, written at `revision`:
    /// the one it carries, else `base + revision`, else (a value of an
    /// older version of this crate) the bare revision.
    pub(crate) fn epoch_at(&self, key: &str, revision: u64) -> Result<Epoch, Error> {
        if let Some(e) = self.epoch {
            return Ok(e);
        }
        match self.base {
            Some(base) => crate::store::bucket::epoch_at(base, revision),
            None => Epoch::new(revision).ok_or_else(|| corrupt(key, "revision 0".into())),
        }
    }
}

impl SessionRecord {
    pub(crate) fn encode(&self) -> bytes::Bytes {
        let mut s = format!(
            "{HEADER}\nidentity={}\nsession={id}\nnonce={id}\n",
            self.identity,
            id = self.session
        );
        if let Some(b) = self.base {
            s.push_str(&format!("base={b}\n"));
        }
        s.into()
    }

    /// Decodes a lease-set record: the session id from `session=`, or from
    /// `nonce=` alone (a record of a version before `session=`); a record
    /// naming two different ids, or one carrying a term's epoch, is refused.
    pub(crate) fn decode(key: &str, bytes: &[u8]) -> Result<SessionRecord, Error> {
        let f = Fields::parse(key, bytes)?;
        let session = match (f.session, f.nonce) {
            (Some(s), Some(n)) if s != n => {
                return Err(corrupt(
                    key,
                    format!("session {s} and nonce {n} differ: not a lease-set record"),
                ));
            }
            (Some(id), _) | (None, Some(id)) => id,
            (None, None) => return Err(corrupt(key, "no session".into())),
        };
        if f.epoch.is_some() {
            return Err(wrong_kind(key, "an election value (it carries an epoch)"));
        }
        Ok(SessionRecord {
            identity: f.identity(key)?,
            session,
            base: f.base,
        })
    }
}

/// The holder an election key's entry shows: `None` for a delete or purge
/// marker, else the value's identity, its term's epoch (see
/// [`ClaimRecord::epoch_at`]) and start time.
pub(crate) fn leader_of(
    key: &str,
    operation: kv::Operation,
    value: &[u8],
    revision: u64,
) -> Result<Option<Leader>, Error> {
    if operation != kv::Operation::Put || is_revoked(value) || is_handover(value) {
        return Ok(None);
    }
    let v = ClaimRecord::decode(key, value)?;
    let epoch = v.epoch_at(key, revision)?;
    let value = v.value.clone();
    let since = v
        .since_unix_ms
        .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
    Ok(Some(Leader {
        identity: v.identity,
        epoch,
        since,
        // The server ages a dead holder's key out by itself (max_age):
        // no renewal time to show.
        renewed: None,
        ttl: None,
        value,
    }))
}

/// The line a revocation's record carries (ADR 0111): the key holds no
/// term, but a record that candidates treat as held until the server ages
/// it out (the bucket's max age, the TTL), so nobody wins before the
/// deposed holder's lease could have run out. Readers of older versions
/// ignore the unknown key (and show the revoker as holding the key).
pub(crate) const REVOKED: &str = "revoked=1\n";

/// Whether `value` is a revocation's record.
pub(crate) fn is_revoked(value: &[u8]) -> bool {
    std::str::from_utf8(value).is_ok_and(|t| t.lines().any(|l| l == REVOKED.trim_end()))
}

/// The revocation the entry (`operation`, `value` at `revision`) of `key`
/// shows, if it is a revocation's record.
pub(crate) fn revocation_of(
    key: &str,
    operation: kv::Operation,
    value: &[u8],
    revision: u64,
) -> Result<Option<election_core::Revocation>, Error> {
    if operation != kv::Operation::Put || !is_revoked(value) {
        return Ok(None);
    }
    let v = ClaimRecord::decode(key, value)?;
    let epoch = v.epoch_at(key, revision)?;
    let at = v
        .since_unix_ms
        .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
    Ok(Some(election_core::Revocation::new(v.identity, epoch, at)))
}

/// A revocation's record under a lease-set key (ADR 0111): the revoker
/// (`identity`), session 0 (no session has that id: a record of an older
/// version reads as held by a session nobody renews), the keys bucket
/// incarnation it was written in (`base`), when (`since_unix_ms`), and
/// [`REVOKED`]. It holds no term; members treat the key as held until
/// they have seen the record for the TTL and the failover grace.
pub(crate) fn encode_key_revocation(
    by: &Identity,
    base: u64,
    at_unix_ms: Option<u64>,
) -> bytes::Bytes {
    let mut s = format!("{HEADER}\nidentity={by}\nsession=0\nnonce=0\nbase={base}\n");
    if let Some(ms) = at_unix_ms {
        s.push_str(&format!("since_unix_ms={ms}\n"));
    }
    s.push_str(REVOKED);
    s.into()
}

/// A revocation's record under a lease-set key, decoded: who revoked, and
/// when (wall clock, if written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyRevocation {
    pub(crate) by: Identity,
    pub(crate) at_unix_ms: Option<u64>,
}

/// The revocation a lease-set key's live `value` shows, if it is a
/// revocation's record ([`encode_key_revocation`]).
pub(crate) fn key_revocation_of(key: &str, value: &[u8]) -> Result<Option<KeyRevocation>, Error> {
    if !is_revoked(value) {
        return Ok(None);
    }
    let f = Fields::parse(key, value)?;
    Ok(Some(KeyRevocation {
        by: f.identity(key)?,
        at_unix_ms: f.since_unix_ms,
    }))
}

/// The key of the transfer requests of the election of key `key` (ADR
/// 0112): `t.<key>`, beside the election key in the elections bucket. An
/// election key never contains a `.` ([`key_of`]), and the waiters' keys
/// are `w.<key>.<nonce>`, so it collides with neither. A request is a
/// key of its own so that storing it never moves the revision the
/// holder's renewals expect.
pub(crate) fn request_key(key: &str) -> String {
    format!("t.{key}")
}

/// The lines a handover's record carries (ADR 0112): the successor the
/// name is reserved for and the window (ms). The record is the holder's
/// last write: `identity` is the holder that handed over and `epoch` the
/// ended term's. It holds no term: readers show nobody; candidates other
/// than the successor treat it as held until they have seen it (the same
/// revision) for the window on their own clock, or the server removed it
/// (its per-key TTL is the window, rounded up to whole seconds). Readers
/// of older versions ignore the unknown keys (and show the old holder).
const HANDOVER_TO: &str = "handover_to";
const HANDOVER_WINDOW_MS: &str = "handover_window_ms";

/// The successor and window a handover's record names, if `value` is one.
///
/// A window above [`election_core::MAX_TRANSFER_WINDOW`] is read as the
/// maximum.
pub(crate) fn handover_in(key: &str, value: &[u8]) -> Result<Option<(Identity, Duration)>, Error> {
    let Ok(text) = std::str::from_utf8(value) else {
        return Ok(None);
    };
    let (mut to, mut window) = (None, None);
    for line in text.lines() {
        match line.split_once('=') {
            Some((HANDOVER_TO, v)) => {
                to = Some(Identity::new(v).map_err(|e| corrupt(key, e.to_string()))?);
            }
            Some((HANDOVER_WINDOW_MS, v)) => {
                let ms = v
                    .parse::<u64>()
                    .map_err(|_| corrupt(key, format!("bad handover window {v:?}")))?;
                window = Some(Duration::from_millis(ms).min(election_core::MAX_TRANSFER_WINDOW));
            }
            _ => {}
        }
    }
    match (to, window) {
        (Some(to), Some(window)) => Ok(Some((to, window))),
        (None, None) => Ok(None),
        _ => Err(corrupt(
            key,
            "a handover without its successor or window".into(),
        )),
    }
}

/// Whether `value` is a handover's record.
pub(crate) fn is_handover(value: &[u8]) -> bool {
    std::str::from_utf8(value).is_ok_and(|t| {
        t.lines()
            .any(|l| l.split_once('=').is_some_and(|(k, _)| k == HANDOVER_TO))
    })
}

/// A handover's record: `holder` (the ended term's record, with a fresh
/// nonce, never the term's: nothing takes it for the term's own write)
/// handed to `to` for `window`.
pub(crate) fn encode_handover(
    holder: &ClaimRecord,
    to: &Identity,
    window: Duration,
) -> bytes::Bytes {
    let mut bytes = holder.encode().to_vec();
    let ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    bytes.extend_from_slice(format!("{HANDOVER_TO}={to}\n{HANDOVER_WINDOW_MS}={ms}\n").as_bytes());
    bytes.into()
}

/// The handover the entry (`operation`, `value` at `revision`) of `key`
/// shows, if it is a handover's record.
pub(crate) fn handover_of(
    key: &str,
    operation: kv::Operation,
    value: &[u8],
    revision: u64,
) -> Result<Option<election_core::Handover>, Error> {
    if operation != kv::Operation::Put {
        return Ok(None);
    }
    let Some((to, window)) = handover_in(key, value)? else {
        return Ok(None);
    };
    let v = ClaimRecord::decode(key, value)?;
    let epoch = v.epoch_at(key, revision)?;
    Ok(Some(election_core::Handover::new(
        v.identity, to, epoch, window,
    )))
}

/// A transfer request's record, the value of [`request_key`]:
///
/// ```text
/// election-nats/1
/// transfer_to=web-2
/// by=deploy/7
/// epoch=1796000000000042
/// at_unix_ms=1796000000000
/// ```
pub(crate) fn encode_request(request: &election_core::TransferRequest) -> bytes::Bytes {
    let mut s = format!(
        "{HEADER}\ntransfer_to={}\nby={}\nepoch={}\n",
        request.to, request.by, request.epoch
    );
    if let Some(ms) = request
        .at
        .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_millis()).ok())
    {
        s.push_str(&format!("at_unix_ms={ms}\n"));
    }
    if let Some(p) = request.priority {
        s.push_str(&format!("priority={p}\n"));
    }
    s.into()
}

/// Decodes a transfer request's record (see [`encode_request`]).
pub(crate) fn decode_request(
    key: &str,
    bytes: &[u8],
) -> Result<election_core::TransferRequest, Error> {
    let bad = |detail: String| corrupt(key, detail);
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(bad(format!("the first line is not {HEADER:?}")));
    }
    let (mut to, mut by, mut epoch, mut at, mut priority) = (None, None, None, None, None);
    for line in lines {
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| bad(format!("line {line:?} is not key=value")))?;
        match k {
            "priority" => priority = Some(v.parse::<u32>().map_err(|e| bad(format!("{e}")))?),
            "transfer_to" => to = Some(Identity::new(v).map_err(|e| bad(e.to_string()))?),
            "by" => by = Some(Identity::new(v).map_err(|e| bad(e.to_string()))?),
            "epoch" => epoch = Some(v.parse::<Epoch>().map_err(|e| bad(format!("{e}")))?),
            "at_unix_ms" => {
                at = v
                    .parse::<u64>()
                    .ok()
                    .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
            }
            _ => {}
        }
    }
    match (to, by, epoch) {
        (Some(to), Some(by), Some(epoch)) => {
            let mut request = election_core::TransferRequest::new(to, by, epoch, at);
            request.priority = priority;
            Ok(request)
        }
        _ => Err(bad(
            "a transfer request without its successor, asker or epoch".into(),
        )),
    }
}

/// The line a claim's winning write carries while its writer waits out
/// the failover grace before its term begins (see [`is_pending`]); the
/// refresh after the grace writes the value without it. Readers of older
/// versions ignore the unknown key.
pub(crate) const PENDING: &str = "pending=1\n";

/// Whether `value` was written by a candidate still in its failover grace.
pub(crate) fn is_pending(value: &[u8]) -> bool {
    std::str::from_utf8(value).is_ok_and(|t| t.lines().any(|l| l == PENDING.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_pending_value_says_so_and_decodes_as_before() {
        let v = ClaimRecord {
            identity: Identity::new("host/1").unwrap(),
            nonce: 7,
            epoch: None,
            since_unix_ms: Some(5),
            base: Some(9),
            value: None,
        };
        let plain = v.encode();
        let mut pending = plain.to_vec();
        pending.extend_from_slice(PENDING.as_bytes());
        assert!(!is_pending(&plain));
        assert!(is_pending(&pending));
        assert_eq!(ClaimRecord::decode("k", &pending).unwrap(), v);
    }

    #[test]
    fn handovers_and_requests_round_trip_and_hold_no_term() {
        let holder = ClaimRecord {
            identity: Identity::new("a").unwrap(),
            nonce: 7,
            epoch: Epoch::new(42),
            since_unix_ms: Some(5),
            base: Some(9),
            value: None,
        };
        let to = Identity::new("b").unwrap();
        let v = encode_handover(&holder, &to, Duration::from_millis(1500));
        assert!(is_handover(&v));
        assert_eq!(
            handover_in("k", &v).unwrap(),
            Some((to.clone(), Duration::from_millis(1500)))
        );
        assert_eq!(leader_of("k", kv::Operation::Put, &v, 50).unwrap(), None);
        let h = handover_of("k", kv::Operation::Put, &v, 50)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.from.as_str(), h.to.as_str(), h.epoch.get()),
            ("a", "b", 42)
        );
        assert_eq!(handover_in("k", &holder.encode()).unwrap(), None);
        assert!(handover_in("k", b"election-nats/1\nhandover_to=b\n").is_err());
        assert_eq!(request_key("jobs"), "t.jobs");

        let r = election_core::TransferRequest::new(
            to,
            Identity::new("deploy/7").unwrap(),
            Epoch::new(42).unwrap(),
            Some(UNIX_EPOCH + Duration::from_millis(1234)),
        );
        assert_eq!(decode_request("t.k", &encode_request(&r)).unwrap(), r);
        assert!(decode_request("t.k", b"election-nats/1\nby=x\n").is_err());
    }

    #[test]
    fn keys_are_valid_kv_keys() {
        let k = key(&ElectionName::new("billing dispatcher.v2").unwrap());
        assert_eq!(k, "billing=20dispatcher=2Ev2");
        assert_eq!(key(&ElectionName::new("jobs").unwrap()), "jobs");
    }

    proptest! {
        #[test]
        fn any_name_maps_to_a_distinct_valid_key(a in "[^/\\\\.\\p{Cc}][^/\\\\\\p{Cc}]{0,30}", b in "[^/\\\\.\\p{Cc}][^/\\\\\\p{Cc}]{0,30}") {
            let (na, nb) = (ElectionName::new(&a).unwrap(), ElectionName::new(&b).unwrap());
            let (ka, kb) = (key(&na), key(&nb));
            prop_assert!(ka.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'='));
            prop_assert_eq!(a == b, ka == kb);
        }

        #[test]
        fn values_round_trip(nonce in any::<u64>(), epoch in proptest::option::of(1u64..), since in proptest::option::of(any::<u64>()), base in proptest::option::of(any::<u64>()), value in proptest::option::of("[^\\p{Cc}]{0,40}")) {
            let value = value.map(|v| LeaderValue::new(v).unwrap());
            let v = ClaimRecord { identity: Identity::new("host/1").unwrap(), nonce, epoch: epoch.and_then(Epoch::new), since_unix_ms: since, base, value };
            prop_assert_eq!(ClaimRecord::decode("k", &v.encode()).unwrap(), v);
        }

        #[test]
        fn session_records_round_trip(session in any::<u64>(), base in proptest::option::of(any::<u64>())) {
            let r = SessionRecord { identity: Identity::new("host/1").unwrap(), session, base };
            prop_assert_eq!(SessionRecord::decode("k", &r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn session_records_name_the_session_and_stay_readable_both_ways() {
        let r = SessionRecord {
            identity: Identity::new("host/1").unwrap(),
            session: 42,
            base: Some(9),
        };
        let text = String::from_utf8(r.encode().to_vec()).unwrap();
        assert!(text.contains("\nsession=42\n"), "{text}");
        // A record of a version before `session=`: the nonce is the id.
        let old = b"election-nats/1\nidentity=host/1\nnonce=42\nbase=9\n";
        assert_eq!(SessionRecord::decode("k", old).unwrap(), r);
        // Such a version reads today's record by its nonce line.
        assert!(text.contains("\nnonce=42\n"), "{text}");
    }

    #[test]
    fn records_of_the_wrong_kind_are_refused() {
        let two_ids = b"election-nats/1\nidentity=h\nsession=1\nnonce=2\n";
        assert!(matches!(
            SessionRecord::decode("k", two_ids),
            Err(Error::CorruptValue { .. })
        ));
        let no_id = b"election-nats/1\nidentity=h\n";
        assert!(SessionRecord::decode("k", no_id).is_err());
        let term = b"election-nats/1\nidentity=h\nnonce=2\nepoch=7\n";
        assert!(SessionRecord::decode("k", term).is_err());
        let record = SessionRecord {
            identity: Identity::new("h").unwrap(),
            session: 3,
            base: None,
        };
        assert!(matches!(
            ClaimRecord::decode("k", &record.encode()),
            Err(Error::CorruptValue { .. })
        ));
        assert!(ClaimRecord::decode("k", b"election-nats/2\nidentity=h\nnonce=1\n").is_err());
        assert!(ClaimRecord::decode("k", b"election-nats/1\nidentity=h\nnonce=x\n").is_err());
    }
}
