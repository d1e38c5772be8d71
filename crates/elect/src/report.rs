//! Progress on stderr: a line per event for people, a JSON object per line
//! for machines (`--json`), or nothing but errors (`--quiet`).

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

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

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub(crate) fn utc(t: SystemTime) -> String {
    let ms = unix_ms(t);
    let (secs, milli) = (ms / 1000, ms % 1000);
    let days = (secs / 86_400) as i64;
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

/// A leader as JSON: `{"identity", "epoch", "since_unix_ms"}` (`since`
/// only when the backend knows it), or `null`.
pub(crate) fn leader_json(leader: Option<&Leader>) -> Value {
    match leader {
        None => Value::Null,
        Some(l) => {
            let mut v = json!({ "identity": l.identity.as_str(), "epoch": l.epoch.get() });
            if let Some(since) = l.since {
                v["since_unix_ms"] = json!(unix_ms(since));
                v["since"] = json!(utc(since));
            }
            v
        }
    }
}

/// A leader for people: `led by ID in term N (since ...)` or `no leader`.
pub(crate) fn leader_text(leader: Option<&Leader>) -> String {
    match leader {
        None => "no leader".to_owned(),
        Some(l) => {
            let mut s = format!("led by {} in term {}", l.identity, l.epoch);
            if let Some(since) = l.since {
                s.push_str(&format!(" (since {})", utc(since)));
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
    fn utc_formats_known_instants() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // `date -u -d @1796000000.123` says 2026-11-30T00:53:20.
        let t = UNIX_EPOCH + Duration::from_millis(1_796_000_000_123);
        assert_eq!(utc(t), "2026-11-30T00:53:20.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc(leap), "2000-02-29T00:00:00.000Z");
    }
}
