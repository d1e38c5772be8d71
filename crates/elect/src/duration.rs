//! Durations on the command line: `500ms`, `15s`, `1.5s`, `2m`, `1h`, in
//! the grammar the backend URLs use ([`election_url::parse_duration`], ADR
//! 0101); the messages quote what the user typed.

use std::time::Duration;

use election_url::DurationError;

/// Parses a duration: a number (decimals allowed) and a unit `ms`, `s`,
/// `m` or `h`. A bare number is refused (seconds or milliseconds? say it).
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    election_url::parse_duration(t).map_err(|e| match e {
        DurationError::Negative => {
            let positive = &t[1..];
            format!("{text:?} is negative: a duration is at least 0 (e.g. {positive})")
        }
        DurationError::NoUnit => format!("{text:?} has no unit: write e.g. 500ms, 15s, 2m or 1h"),
        DurationError::NotANumber => format!("{text:?} does not start with a number"),
        DurationError::UnknownUnit { unit } => {
            format!("unknown unit {unit:?} in {text:?}: use ms, s, m or h")
        }
        DurationError::OutOfRange => format!("{text:?} is out of range"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_refusals() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse(" 2m "), Ok(Duration::from_secs(120)));
        for bad in ["15", "s", "", "1.2.3s", "5d", "-1s", "99999999h"] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            parse("-5s").unwrap_err(),
            "\"-5s\" is negative: a duration is at least 0 (e.g. 5s)"
        );
        assert_eq!(
            parse("15").unwrap_err(),
            "\"15\" has no unit: write e.g. 500ms, 15s, 2m or 1h"
        );
        assert_eq!(
            parse("5d").unwrap_err(),
            "unknown unit \"d\" in \"5d\": use ms, s, m or h"
        );
    }
}
