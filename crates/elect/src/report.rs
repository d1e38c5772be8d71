//! Progress on stderr: a line per event for people, a JSON object per line
//! for machines (`--json`), or nothing but errors (`--quiet`).

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use election_core::Leader;
use serde_json::{Value, json};

/// How progress is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    Human,
    Json,
    Quiet,
}

/// Writes progress events to stderr.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reporter {
    style: Style,
}

/// Milliseconds since the Unix epoch.
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `d` in whole milliseconds, `u64::MAX` for a longer one (584 million
/// years): what the JSON events show of a duration.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub(crate) fn utc(t: SystemTime) -> String {
    let ms = unix_ms(t);
    let (secs, milli) = (ms / 1000, ms % 1000);
    // At most u64::MAX / 86_400_000 < 2^38 days: an i64.
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A leader as JSON: `{"identity", "epoch", "since_unix_ms", "since"}`
/// (`since` only when the backend knows it), with `"renewed_unix_ms"`,
/// `"renewed"`, `"ttl_ms"` and `"presumed_dead"` where the backend keeps
/// the holder's last renewal (SQLite, PostgreSQL); or `null`.
pub(crate) fn leader_json(leader: Option<&Leader>) -> Value {
    leader_json_at(leader, SystemTime::now())
}

fn leader_json_at(leader: Option<&Leader>, now: SystemTime) -> Value {
    match leader {
        None => Value::Null,
        Some(l) => {
            let mut v = json!({ "identity": l.identity.as_str(), "epoch": l.epoch.get() });
            if let Some(value) = &l.value {
                v["value"] = json!(value.as_str());
            }
            if let Some(since) = l.since {
                v["since_unix_ms"] = json!(unix_ms(since));
                v["since"] = json!(utc(since));
            }
            if let Some(renewed) = l.renewed {
                v["renewed_unix_ms"] = json!(unix_ms(renewed));
                v["renewed"] = json!(utc(renewed));
                if let Some(ttl) = l.ttl {
                    v["ttl_ms"] = json!(duration_ms(ttl));
                }
                v["presumed_dead"] = json!(l.presumed_dead_at(now));
            }
            v
        }
    }
}

/// A leader for people: `led by ID in term N[, value "V"] (since ..., last renewed
/// ...)`, with `; presumed dead: ...` once its lease ran out by this
/// host's clock, or `no leader`.
pub(crate) fn leader_text(leader: Option<&Leader>) -> String {
    leader_text_at(leader, SystemTime::now())
}

fn leader_text_at(leader: Option<&Leader>, now: SystemTime) -> String {
    match leader {
        None => "no leader".to_owned(),
        Some(l) => {
            let mut s = format!("led by {} in term {}", l.identity, l.epoch);
            if let Some(value) = &l.value {
                s.push_str(&format!(", value {:?}", value.as_str()));
            }
            let mut times = Vec::new();
            if let Some(since) = l.since {
                times.push(format!("since {}", utc(since)));
            }
            if let Some(renewed) = l.renewed {
                times.push(format!("last renewed {}", utc(renewed)));
            }
            if !times.is_empty() {
                s.push_str(&format!(" ({})", times.join(", ")));
            }
            if l.presumed_dead_at(now)
                && let Some(expires) = l.expires()
            {
                s.push_str(&format!(
                    "; presumed dead: its lease ran out at {} (by this host's clock) with no \
                     renewal; the next candidate takes over",
                    utc(expires)
                ));
            }
            s
        }
    }
}

impl Reporter {
    pub(crate) fn new(style: Style) -> Self {
        Reporter { style }
    }

    /// One event: `text` for people, `fields` (plus `event` and `at`) for
    /// machines.
    pub(crate) fn event(&self, event: &str, text: &str, fields: Value) {
        let line = match self.style {
            Style::Quiet => return,
            Style::Human => format!("elect: {text}"),
            Style::Json => {
                let mut v = json!({ "event": event, "at": utc(SystemTime::now()) });
                if let (Some(obj), Value::Object(extra)) = (v.as_object_mut(), fields) {
                    obj.extend(extra);
                }
                v.to_string()
            }
        };
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
        let _ = err.flush();
    }

    /// An error, always written (also with `--quiet`).
    pub(crate) fn error(&self, message: &str, hint: Option<&str>, code: u8) {
        let line = match self.style {
            Style::Json => json!({
                "event": "error",
                "at": utc(SystemTime::now()),
                "message": message,
                "hint": hint,
                "exit_code": code,
            })
            .to_string(),
            _ => match hint {
                Some(h) => format!("elect: error: {message}\nelect: hint: {h}"),
                None => format!("elect: error: {message}"),
            },
        };
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_holder_past_its_lease_reads_presumed_dead() {
        let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
        let leader = Leader {
            identity: election_core::Identity::new("host-a/1").unwrap(),
            epoch: election_core::Epoch::new(3).unwrap(),
            since: Some(at(1_000)),
            renewed: Some(at(5_000)),
            ttl: Some(Duration::from_secs(2)),
            value: None,
        };
        let live = leader_text_at(Some(&leader), at(6_000));
        assert_eq!(
            live,
            "led by host-a/1 in term 3 (since 1970-01-01T00:00:01.000Z, \
             last renewed 1970-01-01T00:00:05.000Z)"
        );
        let dead = leader_text_at(Some(&leader), at(7_001));
        assert!(
            dead.ends_with(
                "; presumed dead: its lease ran out at 1970-01-01T00:00:07.000Z (by this \
                 host's clock) with no renewal; the next candidate takes over"
            ),
            "{dead}"
        );
        let v = leader_json_at(Some(&leader), at(7_001));
        assert_eq!(v["presumed_dead"], json!(true));
        assert_eq!(v["renewed_unix_ms"], json!(5_000));
        assert_eq!(v["ttl_ms"], json!(2_000));
        assert_eq!(
            leader_json_at(Some(&leader), at(6_000))["presumed_dead"],
            json!(false)
        );
        // No renewal kept (file, NATS): never presumed dead, no fields.
        let file = Leader {
            renewed: None,
            ttl: None,
            ..leader
        };
        assert!(
            leader_json_at(Some(&file), at(u64::MAX / 2))
                .get("presumed_dead")
                .is_none()
        );
        assert!(!leader_text_at(Some(&file), at(u64::MAX / 2)).contains("presumed"));
    }

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // `date -u -d @1796000000.123` says 2026-11-30T00:53:20.
        let t = UNIX_EPOCH + Duration::from_millis(1_796_000_000_123);
        assert_eq!(utc(t), "2026-11-30T00:53:20.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc(leap), "2000-02-29T00:00:00.000Z");
    }
}
