//! Keys and values in the bucket.
//!
//! A key is the election name, with every byte outside `[A-Za-z0-9_-]`
//! written as `=XX` (hex), so any election name is a valid KV key. A value:
//!
//! ```text
//! election-nats/1
//! identity=host-a/4711
//! nonce=1234567890
//! base=1796000000000000
//! epoch=1796000000000042  (from the first write after the win on)
//! since_unix_ms=1796000000000
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

use election_core::{ElectionName, Epoch, Identity};

use crate::Error;

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

/// A lease value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Value {
    pub(crate) identity: Identity,
    pub(crate) nonce: u64,
    pub(crate) epoch: Option<Epoch>,
    pub(crate) since_unix_ms: Option<u64>,
    /// The bucket incarnation's creation time the writer used (µs).
    pub(crate) base: Option<u64>,
}

const HEADER: &str = "election-nats/1";

impl Value {
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
        s.into()
    }

    pub(crate) fn decode(key: &str, bytes: &[u8]) -> Result<Value, Error> {
        let bad = |detail: String| Error::CorruptValue {
            key: key.to_owned(),
            detail,
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(bad(format!("the first line is not {HEADER:?}")));
        }
        let (mut identity, mut nonce, mut epoch, mut since, mut base) =
            (None, None, None, None, None);
        for line in lines {
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| bad(format!("line {line:?} is not key=value")))?;
            match k {
                "identity" => identity = Some(Identity::new(v).map_err(|e| bad(e.to_string()))?),
                "nonce" => nonce = Some(v.parse().map_err(|_| bad(format!("bad nonce {v:?}")))?),
                "epoch" => epoch = Some(v.parse().map_err(|e| bad(format!("{e}")))?),
                "since_unix_ms" => since = v.parse().ok(),
                "base" => base = Some(v.parse().map_err(|_| bad(format!("bad base {v:?}")))?),
                _ => {}
            }
        }
        Ok(Value {
            identity: identity.ok_or_else(|| bad("no identity".into()))?,
            nonce: nonce.ok_or_else(|| bad("no nonce".into()))?,
            epoch,
            since_unix_ms: since,
            base,
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
            Some(base) => crate::bucket::epoch_at(base, revision),
            None => Epoch::new(revision).ok_or_else(|| Error::CorruptValue {
                key: key.to_owned(),
                detail: "revision 0".into(),
            }),
        }
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
        let v = Value {
            identity: Identity::new("host/1").unwrap(),
            nonce: 7,
            epoch: None,
            since_unix_ms: Some(5),
            base: Some(9),
        };
        let plain = v.encode();
        let mut pending = plain.to_vec();
        pending.extend_from_slice(PENDING.as_bytes());
        assert!(!is_pending(&plain));
        assert!(is_pending(&pending));
        assert_eq!(Value::decode("k", &pending).unwrap(), v);
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
        fn values_round_trip(nonce in any::<u64>(), epoch in proptest::option::of(1u64..), since in proptest::option::of(any::<u64>()), base in proptest::option::of(any::<u64>())) {
            let v = Value { identity: Identity::new("host/1").unwrap(), nonce, epoch: epoch.and_then(Epoch::new), since_unix_ms: since, base };
            prop_assert_eq!(Value::decode("k", &v.encode()).unwrap(), v);
        }
    }
}
