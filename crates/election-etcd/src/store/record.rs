//! The keys this crate writes under its prefix, and the value of an
//! election key ([`ClaimRecord`]).
//!
//! - `<prefix>/e/<name>`: the election key, put with the holder's lease.
//!   A term won by a claim (put if absent) has the key's create revision
//!   as its epoch; a term a release passed on (ADR 0119: the key put over
//!   with the head waiter's lease) has that put's revision, the key's mod
//!   revision, and every later value says which (`EpochAt`).
//! - `<prefix>/w/<name>/<lease>`: a waiting candidate's place in line,
//!   put with its lease; ordered by create revision. Its value names the
//!   waiter and its attempt (`encode_waiter`), so a release can pass the
//!   term to it.
//! - `<prefix>/f/<resource>`: a fence's mark ([`EtcdFence`](crate::EtcdFence)).
//! - `<prefix>/h/<name>`: a handover (ADR 0112), put by the holder's
//!   transfer in the transaction that deletes its election key, with a
//!   lease of its own whose TTL is the window: etcd deletes it when the
//!   window ends. While it stands, only the successor it names may put the
//!   election key (its claim compares the handover's mod revision and
//!   deletes it); every other claim compares its create revision to 0.
//! - `<prefix>/t/<name>`: the latest transfer request of the term that
//!   holds `name`, put with the holder's lease (it goes with the term) in
//!   a transaction conditioned on the term's epoch; the holder watches it.
//! - `<prefix>/r/<name>`: a revocation (ADR 0111), put by
//!   [`EtcdElection::revoke`](crate::EtcdElection::revoke) in the
//!   transaction that deletes the holder's election key (conditioned on
//!   its create revision), with a lease of its own whose TTL is at least
//!   the deposed holder's: etcd deletes it once the deposed lease could
//!   have run out. Its mod revision (that transaction's revision) is the
//!   revocation's epoch. Every claim compares its create revision to 0.
//!
//! Names never contain `/` (`ElectionName`), so one name's keys never
//! share a prefix with another's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use election_core::{
    ElectionName, Epoch, Handover, Identity, Leader, LeaderValue, Revocation, TransferRequest,
};

use crate::error::Error;
use crate::store::proto::KeyValue;

/// The first bytes of every value this crate writes at an election key.
const MAGIC: &str = "election-etcd/1";

/// The election key of `name`.
pub(crate) fn election_key(prefix: &str, name: &ElectionName) -> Vec<u8> {
    format!("{prefix}/e/{}", name.as_str()).into_bytes()
}

/// The prefix of `name`'s waiters' keys.
pub(crate) fn waiters_prefix(prefix: &str, name: &ElectionName) -> Vec<u8> {
    format!("{prefix}/w/{}/", name.as_str()).into_bytes()
}

/// A waiter's key: its lease, in hex, under the name's waiters' prefix.
pub(crate) fn waiter_key(prefix: &str, name: &ElectionName, lease: i64) -> Vec<u8> {
    let mut key = waiters_prefix(prefix, name);
    key.extend_from_slice(format!("{lease:016x}").as_bytes());
    key
}

/// The handover key of `name` (ADR 0112).
pub(crate) fn handover_key(prefix: &str, name: &ElectionName) -> Vec<u8> {
    format!("{prefix}/h/{}", name.as_str()).into_bytes()
}

/// The transfer request key of `name` (ADR 0112).
pub(crate) fn request_key(prefix: &str, name: &ElectionName) -> Vec<u8> {
    format!("{prefix}/t/{}", name.as_str()).into_bytes()
}

/// The revocation key of `name` (ADR 0111).
pub(crate) fn revocation_key(prefix: &str, name: &ElectionName) -> Vec<u8> {
    format!("{prefix}/r/{}", name.as_str()).into_bytes()
}

/// The first bytes of a revocation's value.
const REVOCATION_MAGIC: &str = "election-etcd/revoked/1";

/// A revocation's value: `magic at_ms by_len\n` then `by`. Its epoch is
/// not in it: it is the key's mod revision, the revision of the
/// transaction that wrote it (unknown before it lands).
pub(crate) fn encode_revocation(by: &Identity, at: SystemTime) -> Vec<u8> {
    let ms = at
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
        .unwrap_or(0);
    let mut out = format!("{REVOCATION_MAGIC} {ms} {}\n", by.as_str().len()).into_bytes();
    out.extend_from_slice(by.as_str().as_bytes());
    out
}

/// The revocation a revocation key shows: who asked and when from its
/// value, its epoch from its mod revision.
pub(crate) fn revocation_of(kv: &KeyValue) -> Result<Revocation, Error> {
    let mut h = Header::read(&kv.key, &kv.value, REVOCATION_MAGIC)?;
    let ms = h.number("no time")?;
    let len = h.len("no length")?;
    let by = h.identity(0, len)?;
    let epoch = Epoch::from_i64(kv.mod_revision)
        .filter(|e| e.is_term())
        .ok_or_else(|| h.corrupt("a mod revision that is no epoch"))?;
    let at = (ms > 0).then(|| UNIX_EPOCH + Duration::from_millis(ms));
    Ok(Revocation::new(by, epoch, at))
}

/// A value's header line (`magic field ...\n`), split from what follows
/// it: what every reader of this module's values reads first.
struct Header<'a> {
    key: &'a [u8],
    fields: std::str::Split<'a, char>,
    rest: &'a str,
}

impl<'a> Header<'a> {
    /// `bytes`, a value of `key` whose header begins with `magic`.
    fn read(key: &'a [u8], bytes: &'a [u8], magic: &str) -> Result<Self, Error> {
        let text = std::str::from_utf8(bytes).map_err(|_| corrupt(key, "not UTF-8"))?;
        let (head, rest) = text
            .split_once('\n')
            .ok_or_else(|| corrupt(key, "no header line"))?;
        let mut fields = head.split(' ');
        if fields.next() != Some(magic) {
            return Err(corrupt(key, "not a value election-etcd wrote"));
        }
        Ok(Header { key, fields, rest })
    }

    fn corrupt(&self, detail: &str) -> Error {
        corrupt(self.key, detail)
    }

    /// The next field as it is, if any.
    fn word(&mut self) -> Option<&'a str> {
        self.fields.next()
    }

    /// The next field, a number; `what` names its absence.
    fn number(&mut self, what: &str) -> Result<u64, Error> {
        let n = self.fields.next().and_then(|f| f.parse::<u64>().ok());
        n.ok_or_else(|| self.corrupt(what))
    }

    /// The next field, a length.
    fn len(&mut self, what: &str) -> Result<usize, Error> {
        usize::try_from(self.number(what)?).map_err(|_| self.corrupt("too long"))
    }

    /// The identity of `len` bytes from byte `at` after the header.
    fn identity(&self, at: usize, len: usize) -> Result<Identity, Error> {
        let text = self
            .rest
            .get(at..at.saturating_add(len))
            .ok_or_else(|| self.corrupt("short identity"))?;
        Identity::new(text).map_err(|_| self.corrupt("bad identity"))
    }
}

/// A value of `key` this module cannot read.
fn corrupt(key: &[u8], detail: &str) -> Error {
    Error::CorruptValue {
        key: String::from_utf8_lossy(key).into_owned(),
        detail: detail.to_owned(),
    }
}

/// The first bytes of a handover's value.
const HANDOVER_MAGIC: &str = "election-etcd/handover/1";

/// The first bytes of a transfer request's value.
const REQUEST_MAGIC: &str = "election-etcd/transfer/1";
/// The first word of a preferred candidate's request (ADR 0112): its
/// number is the priority (no time), both identities the candidate's.
const PREFERRED_MAGIC: &str = "election-etcd/preferred/1";

/// `magic epoch number a_len b_len\n` then `a` and `b`: the shape of a
/// handover's value (the window in ms; from, to) and of a request's (its
/// time in ms; to, by).
fn encode_pair(magic: &str, epoch: Epoch, number: u64, a: &Identity, b: &Identity) -> Vec<u8> {
    let mut out = format!(
        "{magic} {epoch} {number} {} {}\n",
        a.as_str().len(),
        b.as_str().len()
    )
    .into_bytes();
    out.extend_from_slice(a.as_str().as_bytes());
    out.extend_from_slice(b.as_str().as_bytes());
    out
}

/// Reads what [`encode_pair`] wrote.
fn decode_pair(
    magic: &str,
    key: &[u8],
    bytes: &[u8],
) -> Result<(Epoch, u64, Identity, Identity), Error> {
    let mut h = Header::read(key, bytes, magic)?;
    let epoch = Epoch::new(h.number("no epoch")?).ok_or_else(|| h.corrupt("epoch 0"))?;
    let n = h.number("no number")?;
    let a_len = h.len("no length")?;
    let b_len = h.len("no length")?;
    let a = h.identity(0, a_len)?;
    let b = h.identity(a_len, b_len)?;
    Ok((epoch, n, a, b))
}

/// A handover's value.
pub(crate) fn encode_handover(h: &Handover) -> Vec<u8> {
    let ms = u64::try_from(h.window.as_millis()).unwrap_or(u64::MAX);
    encode_pair(HANDOVER_MAGIC, h.epoch, ms, &h.from, &h.to)
}

/// Reads a handover's value (the window read at most
/// [`MAX_TRANSFER_WINDOW`](election_core::MAX_TRANSFER_WINDOW)).
pub(crate) fn decode_handover(key: &[u8], bytes: &[u8]) -> Result<Handover, Error> {
    let (epoch, ms, from, to) = decode_pair(HANDOVER_MAGIC, key, bytes)?;
    let window = Duration::from_millis(ms).min(election_core::MAX_TRANSFER_WINDOW);
    Ok(Handover::new(from, to, epoch, window))
}

/// A transfer request's value.
pub(crate) fn encode_request(r: &TransferRequest) -> Vec<u8> {
    if let Some(p) = r.priority {
        return encode_pair(PREFERRED_MAGIC, r.epoch, u64::from(p), &r.to, &r.by);
    }
    let ms =
        r.at.and_then(|at| at.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_millis()).ok())
            .unwrap_or(0);
    encode_pair(REQUEST_MAGIC, r.epoch, ms, &r.to, &r.by)
}

/// Reads a transfer request's value.
pub(crate) fn decode_request(key: &[u8], bytes: &[u8]) -> Result<TransferRequest, Error> {
    if bytes.starts_with(PREFERRED_MAGIC.as_bytes()) {
        let (epoch, p, to, by) = decode_pair(PREFERRED_MAGIC, key, bytes)?;
        let p = u32::try_from(p).map_err(|_| Error::CorruptValue {
            key: String::from_utf8_lossy(key).into_owned(),
            detail: format!("priority {p} out of range"),
        })?;
        return Ok(TransferRequest::new(to, by, epoch, None).with_priority(p));
    }
    let (epoch, ms, to, by) = decode_pair(REQUEST_MAGIC, key, bytes)?;
    let at = (ms > 0).then(|| UNIX_EPOCH + Duration::from_millis(ms));
    Ok(TransferRequest::new(to, by, epoch, at))
}

/// A fence mark's key.
pub(crate) fn fence_key(prefix: &str, resource: &str) -> Vec<u8> {
    format!("{prefix}/f/{resource}").into_bytes()
}

/// The end of the range of every key that begins with `prefix` (etcd's
/// `range_end`: the prefix with its last byte plus one).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Where a term's epoch is, seen from its election key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpochAt {
    /// The key's create revision: a term won by a claim (put if absent).
    Created,
    /// The key's mod revision: a term a release passed on (ADR 0119), as
    /// that release wrote it (its revision is unknown before it lands).
    Modified,
    /// This epoch: written by the term itself (a proclaim), which knows it.
    Is(Epoch),
}

/// What a holder writes at its election key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClaimRecord {
    pub(crate) identity: Identity,
    /// The attempt's nonce: tells two attempts of one identity apart.
    pub(crate) nonce: u64,
    /// The wall-clock time of the win (display only).
    pub(crate) since_unix_ms: u64,
    /// The value proclaimed, if any.
    pub(crate) value: Option<LeaderValue>,
    /// Where the term's epoch is.
    pub(crate) epoch_at: EpochAt,
}

impl ClaimRecord {
    /// `MAGIC nonce since_ms identity_len value_len|-[ m|epoch]\n` then the
    /// identity and the value. The last field is left out for
    /// [`EpochAt::Created`], as every value before ADR 0119 was written (a
    /// reader of that time skips a field it does not know).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let value_len = self
            .value
            .as_ref()
            .map_or_else(|| "-".to_owned(), |v| v.as_str().len().to_string());
        let epoch_at = match self.epoch_at {
            EpochAt::Created => String::new(),
            EpochAt::Modified => " m".to_owned(),
            EpochAt::Is(e) => format!(" {e}"),
        };
        let mut out = format!(
            "{MAGIC} {} {} {} {value_len}{epoch_at}\n",
            self.nonce,
            self.since_unix_ms,
            self.identity.as_str().len()
        )
        .into_bytes();
        out.extend_from_slice(self.identity.as_str().as_bytes());
        if let Some(v) = &self.value {
            out.extend_from_slice(v.as_str().as_bytes());
        }
        out
    }

    pub(crate) fn decode(key: &[u8], bytes: &[u8]) -> Result<ClaimRecord, Error> {
        let mut h = Header::read(key, bytes, MAGIC)?;
        let nonce = h.number("no nonce")?;
        let since_unix_ms = h.number("no time")?;
        let identity_len = h.len("no identity length")?;
        let value_len = match h.word() {
            Some("-") => None,
            Some(n) => Some(
                n.parse::<usize>()
                    .map_err(|_| h.corrupt("bad value length"))?,
            ),
            None => return Err(h.corrupt("no value length")),
        };
        let epoch_at = match h.word() {
            None => EpochAt::Created,
            Some("m") => EpochAt::Modified,
            Some(n) => EpochAt::Is(
                n.parse::<u64>()
                    .ok()
                    .and_then(Epoch::new)
                    .filter(|e| e.is_term())
                    .ok_or_else(|| h.corrupt("bad epoch"))?,
            ),
        };
        let identity = h.identity(0, identity_len)?;
        let value = match value_len {
            None => None,
            Some(n) => {
                let v = h
                    .rest
                    .get(identity_len..identity_len.saturating_add(n))
                    .ok_or_else(|| h.corrupt("short value"))?;
                Some(LeaderValue::new(v).map_err(|_| h.corrupt("bad value"))?)
            }
        };
        Ok(ClaimRecord {
            identity,
            nonce,
            since_unix_ms,
            value,
            epoch_at,
        })
    }

    /// The epoch of the term whose record this is, at `kv`.
    pub(crate) fn epoch(&self, kv: &KeyValue) -> Result<Epoch, Error> {
        match self.epoch_at {
            EpochAt::Created => epoch_of(&kv.key, kv.create_revision),
            EpochAt::Modified => epoch_of(&kv.key, kv.mod_revision),
            EpochAt::Is(e) => Ok(e),
        }
    }
}

/// The first bytes of a waiter key's value.
const WAITER_MAGIC: &str = "election-etcd/waiter/1";

/// A waiter key's value: `magic nonce identity_len\n` then the identity:
/// who waits, and which attempt, so that a release can write its record
/// when it passes the term on (ADR 0119).
pub(crate) fn encode_waiter(identity: &Identity, nonce: u64) -> Vec<u8> {
    let mut out = format!("{WAITER_MAGIC} {nonce} {}\n", identity.as_str().len()).into_bytes();
    out.extend_from_slice(identity.as_str().as_bytes());
    out
}

/// Reads a waiter key's value: the waiter's identity and attempt nonce.
/// A value without them (a waiter from before ADR 0119: its identity
/// alone) is `CorruptValue`: such a waiter is not passed the term.
pub(crate) fn decode_waiter(key: &[u8], bytes: &[u8]) -> Result<(Identity, u64), Error> {
    let mut h = Header::read(key, bytes, WAITER_MAGIC)?;
    let nonce = h.number("no nonce")?;
    let len = h.len("no length")?;
    Ok((h.identity(0, len)?, nonce))
}

/// The wall clock in ms since the Unix epoch (display only).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
        .unwrap_or(0)
}

/// The epoch `revision` (a create or mod revision), checked.
pub(crate) fn epoch_of(key: &[u8], revision: i64) -> Result<Epoch, Error> {
    Epoch::from_i64(revision)
        .filter(|e| e.is_term())
        .ok_or_else(|| Error::CorruptValue {
            key: String::from_utf8_lossy(key).into_owned(),
            detail: format!("revision {revision} is no term's epoch"),
        })
}

/// The leader an election key shows.
pub(crate) fn leader_of(kv: &KeyValue) -> Result<Leader, Error> {
    let record = ClaimRecord::decode(&kv.key, &kv.value)?;
    let since = (record.since_unix_ms > 0)
        .then(|| UNIX_EPOCH + Duration::from_millis(record.since_unix_ms));
    Ok(Leader {
        epoch: record.epoch(kv)?,
        identity: record.identity,
        since,
        renewed: None,
        ttl: None,
        value: record.value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_record_reads_back_as_written(
            identity in "[a-z0-9/\\- ]{1,40}",
            value in proptest::option::of("[^\\p{Cc}]{0,40}"),
            nonce: u64,
            since in 0u64..u64::MAX,
            epoch_at in prop_oneof![
                Just(EpochAt::Created),
                Just(EpochAt::Modified),
                (2u64..i64::MAX as u64).prop_map(|e| EpochAt::Is(Epoch::new(e).unwrap())),
            ],
        ) {
            let record = ClaimRecord {
                identity: Identity::new(&identity).unwrap(),
                nonce,
                since_unix_ms: since,
                value: value.map(|v| LeaderValue::new(v).unwrap()),
                epoch_at,
            };
            prop_assert_eq!(ClaimRecord::decode(b"k", &record.encode()).unwrap(), record);
        }

        #[test]
        fn a_waiter_reads_back_as_written(identity in "[a-z0-9/\\- ]{1,40}", nonce: u64) {
            let identity = Identity::new(&identity).unwrap();
            prop_assert_eq!(
                decode_waiter(b"k", &encode_waiter(&identity, nonce)).unwrap(),
                (identity, nonce)
            );
        }

        /// Whatever a waiter key holds (one from before ADR 0119 holds a
        /// bare identity), reading it answers without a panic.
        #[test]
        fn any_waiter_value_reads_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_waiter(b"k", &bytes);
        }
    }

    /// The epoch comes from where the record says: a claim's from the
    /// create revision, a passed term's from the mod revision (the put
    /// over the key), a proclaim's from its own field.
    #[test]
    fn the_epoch_is_read_where_the_record_says() {
        let record = |epoch_at| ClaimRecord {
            identity: Identity::new("a").unwrap(),
            nonce: 1,
            since_unix_ms: 2,
            value: None,
            epoch_at,
        };
        let kv = |r: &ClaimRecord| KeyValue {
            key: b"p/e/jobs".to_vec(),
            value: r.encode(),
            create_revision: 9,
            mod_revision: 12,
            ..Default::default()
        };
        let seven = Epoch::new(7).unwrap();
        for (at, epoch) in [
            (EpochAt::Created, 9),
            (EpochAt::Modified, 12),
            (EpochAt::Is(seven), 7),
        ] {
            let r = record(at);
            assert_eq!(leader_of(&kv(&r)).unwrap().epoch.get_i64(), epoch, "{at:?}");
        }
        // A value written before ADR 0119 reads as a claim's.
        let old = KeyValue {
            value: b"election-etcd/1 1 2 1 -\na".to_vec(),
            ..kv(&record(EpochAt::Created))
        };
        assert_eq!(leader_of(&old).unwrap().epoch.get_i64(), 9);
        assert!(ClaimRecord::decode(b"k", b"election-etcd/1 1 2 1 - x\na").is_err());
        assert!(decode_waiter(b"k", b"a").is_err());
    }

    #[test]
    fn foreign_values_are_corrupt_not_a_panic() {
        for bad in [&b""[..], b"x", b"election-etcd/1 1 2 99 -\nab", b"\xff\xfe"] {
            assert!(matches!(
                ClaimRecord::decode(b"k", bad),
                Err(Error::CorruptValue { .. })
            ));
        }
    }

    #[test]
    fn handovers_and_requests_read_back_as_written() {
        let (a, b) = (
            Identity::new("a b").unwrap(),
            Identity::new("web-2").unwrap(),
        );
        let epoch = Epoch::new(42).unwrap();
        let h = Handover::new(a.clone(), b.clone(), epoch, Duration::from_millis(1500));
        assert_eq!(decode_handover(b"k", &encode_handover(&h)).unwrap(), h);
        let r = TransferRequest::new(b, a, epoch, Some(UNIX_EPOCH + Duration::from_millis(7)));
        assert_eq!(decode_request(b"k", &encode_request(&r)).unwrap(), r);
        assert!(decode_request(b"k", &encode_handover(&h)).is_err());
        assert!(decode_handover(b"k", b"election-etcd/handover/1 0 1 1 1\nab").is_err());
        let name = ElectionName::new("jobs").unwrap();
        assert_eq!(handover_key("p", &name), b"p/h/jobs".to_vec());
        assert_eq!(request_key("p", &name), b"p/t/jobs".to_vec());
    }

    #[test]
    fn a_revocation_reads_back_with_its_mod_revision_as_epoch() {
        let name = ElectionName::new("jobs").unwrap();
        assert_eq!(revocation_key("p", &name), b"p/r/jobs".to_vec());
        let by = Identity::new("ops/alice b").unwrap();
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let kv = KeyValue {
            key: revocation_key("p", &name),
            value: encode_revocation(&by, at),
            create_revision: 9,
            mod_revision: 12,
            ..Default::default()
        };
        let r = revocation_of(&kv).unwrap();
        assert_eq!((r.by, r.epoch.get_i64(), r.at), (by, 12, Some(at)));
        for bad in [
            &b""[..],
            b"election-etcd/revoked/1 1 9\nab",
            b"election-etcd/1 1 2 1 -\na",
        ] {
            let kv = KeyValue {
                value: bad.to_vec(),
                mod_revision: 3,
                ..Default::default()
            };
            assert!(matches!(
                revocation_of(&kv),
                Err(Error::CorruptValue { .. })
            ));
        }
        let zero = KeyValue {
            mod_revision: 0,
            ..kv
        };
        assert!(revocation_of(&zero).is_err());
    }

    #[test]
    fn a_prefix_range_ends_after_every_key_under_it() {
        assert_eq!(prefix_end(b"a/w/x/"), b"a/w/x0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
    }
}
