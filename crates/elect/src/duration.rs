//! Durations on the command line: `500ms`, `15s`, `1.5s`, `2m`, `1h`.

use std::time::Duration;

/// Parses a duration: a number (decimals allowed) and a unit `ms`, `s`,
/// `m` or `h`. A bare number is refused (seconds or milliseconds? say it).
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Some(positive) = t.strip_prefix('-') {
        return Err(format!(
            "{text:?} is negative: a duration is at least 0 (e.g. {positive})"
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{text:?} has no unit: write e.g. 500ms, 15s, 2m or 1h"))?;
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, m or h"
            ));
        }
    };
    if !seconds.is_finite() || seconds > 365.0 * 24.0 * 3600.0 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
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
        for bad in ["15", "s", "", "1.2.3s", "5d", "-1s", "99999999h"] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse("-5s").unwrap_err().contains("negative"));
    }
}
