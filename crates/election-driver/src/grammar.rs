//! The URL grammar's shared pieces: a driver parses its own scheme's
//! authority, path and options with them, so that every scheme decodes,
//! refuses and prints alike (see `election-url`'s crate docs for the
//! grammar).

use std::fmt;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS};

/// Why a backend URL does not parse. Never quotes a secret.
///
/// ```
/// use election_driver::ParseError;
///
/// let e = ParseError::RepeatedOption { option: "bucket".into() };
/// assert_eq!(e.to_string(), "option \"bucket\" is given twice");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// No `scheme://` (the schemes known are listed).
    #[error("no scheme ({})", schemes.iter().map(|s| format!("{s}://")).collect::<Vec<_>>().join(", ").replacen_last(", ", " or "))]
    NoScheme {
        /// The schemes known.
        schemes: Vec<&'static str>,
    },
    /// A scheme no driver knows.
    #[error("unknown scheme {scheme:?} ({})", schemes.join(", ").replacen_last(", ", " or "))]
    UnknownScheme {
        /// The scheme given.
        scheme: String,
        /// The schemes known.
        schemes: Vec<&'static str>,
    },
    /// An option the scheme does not know.
    #[error("unknown option {option:?} ({})", if known.is_empty() { format!("{scheme}:// URLs take no options") } else { format!("{scheme}:// knows {}", known.join(", ")) })]
    UnknownOption {
        /// The scheme.
        scheme: &'static str,
        /// The option given.
        option: String,
        /// The options the scheme knows.
        known: &'static [&'static str],
    },
    /// An option given twice.
    #[error("option {option:?} is given twice")]
    RepeatedOption {
        /// The option.
        option: String,
    },
    /// An option without `=`.
    #[error("an option is not key=value")]
    NotKeyValue,
    /// An option's value that does not fit it.
    #[error("{option}: the value is {reason}")]
    BadValue {
        /// The option.
        option: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// Anything else that is not the grammar.
    #[error("{reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },
}

/// `a, b, c` → `a, b or c`, for the lists of schemes in messages.
trait ReplaceLast {
    fn replacen_last(&self, from: &str, to: &str) -> String;
}

impl ReplaceLast for String {
    fn replacen_last(&self, from: &str, to: &str) -> String {
        match self.rfind(from) {
            Some(at) => format!("{}{to}{}", &self[..at], &self[at + from.len()..]),
            None => self.clone(),
        }
    }
}

/// What stands in for a password or a token when a URL is shown.
pub const REDACTED: &str = "REDACTED";

/// A password or a token: shown as [`REDACTED`] by `Debug` and `Display`;
/// [`expose`](Secret::expose) gives the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    ///
    /// ```
    /// use election_driver::Secret;
    ///
    /// let token = Secret::new("s3cr3t");
    /// assert_eq!(format!("{token} {token:?}"), "REDACTED REDACTED");
    /// ```
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, to hand to the server.
    ///
    /// ```
    /// use election_driver::Secret;
    ///
    /// let token = Secret::new("s3cr3t");
    /// assert_eq!(token.expose(), "s3cr3t"); // for the server only, never a log
    /// ```
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The secret as a URL prints it: percent-encoded when `whole`, else
    /// [`REDACTED`].
    ///
    /// ```
    /// use election_driver::Secret;
    ///
    /// let pw = Secret::new("p:w");
    /// assert_eq!((pw.printed(true), pw.printed(false)), ("p%3Aw".to_owned(), "REDACTED".to_owned()));
    /// ```
    pub fn printed(&self, whole: bool) -> String {
        if whole {
            encode(self.0.as_bytes(), false)
        } else {
            REDACTED.to_owned()
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A [`ParseError::Malformed`] saying `reason`.
///
/// ```
/// assert_eq!(election_driver::grammar::malformed("no path").to_string(), "no path");
/// ```
pub fn malformed(reason: impl Into<String>) -> ParseError {
    ParseError::Malformed {
        reason: reason.into(),
    }
}

/// Percent-decodes `text` (`%3F` is `?`); `+` stays `+`. Refuses a `%`
/// not followed by two hex digits, and a decoded NUL byte; `what` names
/// the part in the error.
///
/// ```
/// use election_driver::grammar::decode;
///
/// assert_eq!(decode("a%20b+c", "the path")?, b"a b+c");
/// assert!(decode("a%zz", "the path").is_err());
/// # Ok::<(), election_driver::ParseError>(())
/// ```
pub fn decode(text: &str, what: &str) -> Result<Vec<u8>, ParseError> {
    let bytes = text.as_bytes();
    let bad_escape = bytes.iter().enumerate().any(|(i, &b)| {
        b == b'%'
            && !bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if bad_escape {
        return Err(malformed(format!(
            "{what}: '%' must be followed by two hex digits (%25 for '%')"
        )));
    }
    let out: Vec<u8> = percent_encoding::percent_decode(bytes).collect();
    if out.contains(&0) {
        return Err(malformed(format!(
            "{what}: a NUL byte (%00) is not allowed"
        )));
    }
    Ok(out)
}

/// Percent-decodes `text` as UTF-8 text.
///
/// ```
/// use election_driver::grammar::decode_text;
///
/// assert_eq!(decode_text("us%40r", "the user")?, "us@r");
/// # Ok::<(), election_driver::ParseError>(())
/// ```
pub fn decode_text(text: &str, what: &str) -> Result<String, ParseError> {
    String::from_utf8(decode(text, what)?)
        .map_err(|_| malformed(format!("{what} is not UTF-8 once percent-decoded")))
}

/// The bytes a path's or a value's printing percent-encodes besides those
/// above ASCII: control bytes, the space, and those the grammar gives a
/// meaning (`%`, `?`, `#`, `&`, `=`, `,`, `@`, `:`).
const MEANINGFUL: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'%')
    .add(b'?')
    .add(b'#')
    .add(b'&')
    .add(b'=')
    .add(b',')
    .add(b'@')
    .add(b':');

/// [`MEANINGFUL`] and `/`: for a value that is not a path.
const MEANINGFUL_AND_SLASH: &AsciiSet = &MEANINGFUL.add(b'/');

/// Percent-encodes the bytes of `bytes` that the grammar gives a meaning
/// (`%`, `?`, `#`, `&`, `=`, `,`, `@`, `:`, and `/` unless `slash` says
/// it stays), spaces, control bytes and every byte above ASCII.
///
/// ```
/// use election_driver::grammar::encode;
///
/// assert_eq!(encode(b"/a b/c?", true), "/a%20b/c%3F");
/// assert_eq!(encode(b"a/b", false), "a%2Fb");
/// ```
pub fn encode(bytes: &[u8], slash: bool) -> String {
    let set = if slash {
        MEANINGFUL
    } else {
        MEANINGFUL_AND_SLASH
    };
    percent_encoding::percent_encode(bytes, set).to_string()
}

/// The `key=value` pairs of a query, percent-decoded, each key once and
/// one of `known` (else [`ParseError::UnknownOption`] names `scheme`).
///
/// ```
/// use election_driver::grammar::query;
///
/// let pairs = query("nats", Some("bucket=a%26b"), &["bucket"])?;
/// assert_eq!(pairs, [("bucket".to_owned(), "a&b".to_owned())]);
/// assert!(query("nats", Some("colour=red"), &["bucket"]).is_err());
/// # Ok::<(), election_driver::ParseError>(())
/// ```
pub fn query(
    scheme: &'static str,
    text: Option<&str>,
    known: &'static [&'static str],
) -> Result<Vec<(String, String)>, ParseError> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for pair in text.split('&') {
        if pair.is_empty() {
            return Err(malformed("an empty option (a stray '?' or '&')"));
        }
        let (k, v) = pair.split_once('=').ok_or(ParseError::NotKeyValue)?;
        let k = decode_text(k, "an option name")?;
        if !known.contains(&k.as_str()) {
            return Err(ParseError::UnknownOption {
                scheme,
                option: k,
                known,
            });
        }
        if pairs.iter().any(|(seen, _)| *seen == k) {
            return Err(ParseError::RepeatedOption { option: k });
        }
        let v = decode_text(v, &format!("the value of {k}"))?;
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// Splits `rest` (after `scheme://`) into the part before the query and
/// the query; refuses a fragment.
///
/// ```
/// use election_driver::grammar::split_query;
///
/// assert_eq!(split_query("h:1?bucket=b")?, ("h:1", Some("bucket=b")));
/// assert!(split_query("/d#x").is_err());
/// # Ok::<(), election_driver::ParseError>(())
/// ```
pub fn split_query(rest: &str) -> Result<(&str, Option<&str>), ParseError> {
    if rest.contains('#') {
        return Err(malformed(
            "a '#' fragment is not part of a backend URL (write %23 for a '#' in a path)",
        ));
    }
    Ok(match rest.split_once('?') {
        Some((before, q)) => (before, Some(q)),
        None => (rest, None),
    })
}

/// `1`/`true` or `0`/`false`, the value of a yes-or-no option.
///
/// ```
/// use election_driver::grammar::flag;
///
/// assert!(flag("volatile_ok", "1")?);
/// assert!(flag("volatile_ok", "yes").is_err());
/// # Ok::<(), election_driver::ParseError>(())
/// ```
pub fn flag(option: &str, value: &str) -> Result<bool, ParseError> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(ParseError::BadValue {
            option: option.to_owned(),
            reason: "not 1 or 0".to_owned(),
        }),
    }
}

/// The absolute path of `scheme://path` (after the query is split off),
/// percent-decoded.
///
/// ```
/// use election_driver::grammar::absolute;
///
/// assert_eq!(absolute("/srv/my%20app.db")?, std::path::Path::new("/srv/my app.db"));
/// assert!(absolute("relative").is_err());
/// # Ok::<(), election_driver::ParseError>(())
/// ```
pub fn absolute(path: &str) -> Result<PathBuf, ParseError> {
    // `file:///dir` → `/dir`; `file://host/dir` is not supported.
    if !path.starts_with('/') {
        return Err(malformed(
            "the path must be absolute (three slashes: scheme:///path)",
        ));
    }
    if path.len() == 1 {
        return Err(malformed("no path"));
    }
    let bytes = decode(path, "the path")?;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// A duration option's value (`ttl=`, `renew=`): the one duration grammar
/// ([`parse_duration`](crate::parse_duration): `500ms`, `1.5s`, `2m`,
/// `1h`), at least 1 ms; the error is the reason for a
/// [`ParseError::BadValue`].
///
/// ```
/// use std::time::Duration;
/// use election_driver::grammar::duration_value;
///
/// assert_eq!(duration_value("1.5s"), Ok(Duration::from_millis(1500)));
/// assert!(duration_value("0.5ms").is_err());
/// ```
pub fn duration_value(text: &str) -> Result<Duration, String> {
    let d = crate::parse_duration(text).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(1) {
        return Err("below 1ms".to_owned());
    }
    Ok(d)
}

/// `text`, a URL as given (perhaps not one that parses), with what looks
/// like a password (`user:password@`) or a token (`token=...`) replaced by
/// [`REDACTED`]: for error messages that quote what the user typed.
///
/// ```
/// assert_eq!(
///     election_driver::redact("nats://u:pw@h?token=t&colour=red"),
///     "nats://u:REDACTED@h?token=REDACTED&colour=red"
/// );
/// assert_eq!(election_driver::redact("file:///d?x=1"), "file:///d?x=1");
/// ```
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    if let Some((scheme, rest)) = text.split_once("://") {
        let end = rest.find(['?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            out = format!("{scheme}://{}:{REDACTED}{}", &rest[..colon], &rest[at..]);
        }
    }
    let mut parts: Vec<String> = Vec::new();
    let (head, query) = match out.split_once('?') {
        Some((h, q)) => (h.to_owned(), Some(q.to_owned())),
        None => (out.clone(), None),
    };
    let Some(query) = query else { return out };
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((k, _)) if decode_text(k, "").is_ok_and(|k| k == "token") => {
                parts.push(format!("{k}={REDACTED}"))
            }
            _ => parts.push(pair.to_owned()),
        }
    }
    format!("{head}?{}", parts.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_lists_read_as_prose() {
        let schemes = vec!["file", "sqlite", "nats", "postgres"];
        assert_eq!(
            ParseError::NoScheme {
                schemes: schemes.clone()
            }
            .to_string(),
            "no scheme (file://, sqlite://, nats:// or postgres://)"
        );
        assert_eq!(
            ParseError::UnknownScheme {
                scheme: "redis".into(),
                schemes
            }
            .to_string(),
            "unknown scheme \"redis\" (file, sqlite, nats or postgres)"
        );
    }

    #[test]
    fn redaction_hides_passwords_and_tokens() {
        assert_eq!(
            redact("nats://u:s3cret@h:1?to%6Ben=t0ken"),
            "nats://u:REDACTED@h:1?to%6Ben=REDACTED"
        );
        assert_eq!(redact("nats://h:1,h:2"), "nats://h:1,h:2");
        assert_eq!(
            redact("postgresql://app:s3cret@h:1/db?colour=red"),
            "postgresql://app:REDACTED@h:1/db?colour=red"
        );
    }
}
