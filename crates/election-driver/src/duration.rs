//! Durations, one grammar for the URLs and the command line (ADR 0101):
//! a number, decimals allowed, and a unit `ms`, `s`, `m` or `h`, at most a
//! year: `500ms`, `15s`, `1.5s`, `2m`, `1h`.

use std::fmt;
use std::time::Duration;

/// The longest duration [`parse_duration`] accepts: 365 days.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Why a text is not a duration. Its [`Display`](fmt::Display) never
/// quotes the text (a URL's option value may be a secret typed in the
/// wrong place); a tool that quotes what the user typed says it itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// It starts with `-`: a duration is at least 0.
    Negative,
    /// A number alone: seconds or milliseconds? The user must say.
    NoUnit,
    /// It does not start with a number (`s`, `1.2.3s`, `+5s`).
    NotANumber,
    /// The unit is not `ms`, `s`, `m` or `h`.
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// Longer than [`MAX_DURATION`].
    OutOfRange,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DurationError::Negative => "negative: a duration is at least 0",
            DurationError::NoUnit => "no unit: write e.g. 500ms, 15s, 2m or 1h",
            DurationError::NotANumber | DurationError::UnknownUnit { .. } => {
                "not a number with a unit (ms, s, m, h)"
            }
            DurationError::OutOfRange => "too long: at most 365 days",
        })
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration: a number (`15`, `1.5`, `.5`) and a unit `ms`, `s`,
/// `m` or `h`, nothing around them, at most [`MAX_DURATION`]. Exact to the
/// nanosecond (digits below it are dropped); `0s` is a duration (a caller
/// that needs more says so).
///
/// ```
/// use std::time::Duration;
/// use election_driver::{DurationError, parse_duration};
///
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
/// assert_eq!(parse_duration("15"), Err(DurationError::NoUnit));
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    if text.starts_with('-') {
        return Err(DurationError::Negative);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or(DurationError::NoUnit)?;
    let (number, unit) = text.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !digits(fraction) {
        return Err(DurationError::NotANumber);
    }
    let unit_ns: u128 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other => {
            return Err(DurationError::UnknownUnit {
                unit: other.to_owned(),
            });
        }
    };
    let max = MAX_DURATION.as_nanos();
    let mut nanos: u128 = 0;
    for b in whole.bytes() {
        nanos = nanos * 10 + u128::from(b - b'0') * unit_ns;
        if nanos > max {
            return Err(DurationError::OutOfRange);
        }
    }
    // Each fraction digit is worth a tenth of the one before; a digit
    // worth less than a nanosecond adds nothing.
    let mut place = unit_ns;
    for b in fraction.bytes() {
        place /= 10;
        nanos += u128::from(b - b'0') * place;
    }
    if nanos > max {
        return Err(DurationError::OutOfRange);
    }
    let nanos = u64::try_from(nanos).map_err(|_| DurationError::OutOfRange)?;
    Ok(Duration::from_nanos(nanos))
}

/// Prints a duration so that [`parse_duration`] reads it back exactly:
/// whole seconds as `15s`, whole milliseconds as `1500ms`, anything finer
/// as decimal milliseconds (`0.25ms`).
///
/// ```
/// use std::time::Duration;
/// use election_driver::format_duration;
///
/// assert_eq!(format_duration(Duration::from_secs(9)), "9s");
/// assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
/// assert_eq!(format_duration(Duration::from_micros(250)), "0.25ms");
/// ```
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos.is_multiple_of(1_000_000_000) {
        format!("{}s", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else {
        let fraction = format!("{:06}", nanos % 1_000_000);
        format!("{}.{}ms", nanos / 1_000_000, fraction.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_decimals_and_refusals() {
        let ok = |t: &str| parse_duration(t).unwrap();
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("15s"), Duration::from_secs(15));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("1.s"), Duration::from_secs(1));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("0.1ms"), Duration::from_micros(100));
        assert_eq!(ok("8760h"), MAX_DURATION);
        use DurationError::*;
        for (bad, why) in [
            ("15", NoUnit),
            ("", NoUnit),
            ("1.5", NoUnit),
            ("-1s", Negative),
            ("s", NotANumber),
            (".s", NotANumber),
            ("1.2.3s", NotANumber),
            ("+5s", NotANumber),
            (" 5s", NotANumber),
            ("8761h", OutOfRange),
            ("99999999999999999999999h", OutOfRange),
        ] {
            assert_eq!(parse_duration(bad), Err(why), "{bad:?}");
        }
        for bad in ["5d", "5 s", "5S", "5sec"] {
            assert!(
                matches!(parse_duration(bad), Err(UnknownUnit { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn printing_reads_back_exactly() {
        for d in [
            Duration::ZERO,
            Duration::from_secs(9),
            Duration::from_millis(1500),
            Duration::from_micros(1),
            Duration::from_nanos(1_000_000_007),
            MAX_DURATION,
        ] {
            let printed = format_duration(d);
            assert_eq!(parse_duration(&printed), Ok(d), "{printed}");
        }
    }

    #[test]
    fn errors_never_quote_the_text() {
        let e = parse_duration("s3cret").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let e = parse_duration("5s3cret").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
