//! The check every backend's URL type runs (issue 41): printed, a URL
//! parses back to itself, and printed redacted it parses too and shows no
//! secret ([`round_trip`]); with the strategies the backends' proptests
//! build their URLs from ([`absolute_path`], [`text`]).

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use election_driver::{Driver, REDACTED, Target};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// Any absolute path without NUL bytes: one to three parts of any other
/// bytes (a part may hold `/`, `.`, bytes that are not UTF-8).
///
/// ```
/// use election_testkit::driver::absolute_path;
/// use proptest::prelude::*;
///
/// proptest!(|(path in absolute_path())| {
///     prop_assert!(path.is_absolute());
/// });
/// ```
pub fn absolute_path() -> impl Strategy<Value = PathBuf> {
    prop::collection::vec(prop::collection::vec(1u8..=255, 1..8), 1..4).prop_map(|parts| {
        let mut bytes = Vec::new();
        for p in parts {
            bytes.push(b'/');
            bytes.extend(p);
        }
        PathBuf::from(OsString::from_vec(bytes))
    })
}

/// Any text without NUL characters, at most 12 characters long.
///
/// ```
/// use election_testkit::driver::text;
/// use proptest::prelude::*;
///
/// proptest!(|(t in text())| {
///     prop_assert!(!t.contains('\0') && t.chars().count() <= 12);
/// });
/// ```
pub fn text() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,12}"
}

/// A URL printed as [`Target::write`] prints it: with its secrets when the
/// second field is `true`, else each shown as [`REDACTED`].
///
/// ```
/// use election_testkit::driver::Printed;
///
/// let url = election_file::FileUrl::new("/srv/my elections");
/// assert_eq!(Printed(&url, true).to_string(), "file:///srv/my%20elections");
/// ```
#[derive(Debug)]
pub struct Printed<'a>(pub &'a dyn Target, pub bool);

impl fmt::Display for Printed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, self.1)
    }
}

/// Checks that `url`, printed whole, parses back (by `driver`) to a URL
/// printed the same; and that printed redacted it parses too, shows none
/// of its passwords and tokens (those longer than [`REDACTED`], which a
/// shorter secret may be part of), and parses to a URL whose every secret
/// is [`REDACTED`].
///
/// For a backend's proptest over its URL type: the error says which
/// printing failed, and how.
///
/// ```
/// use election_testkit::driver::round_trip;
///
/// let url = election_file::FileUrl::new("/srv/elections?#%");
/// round_trip(&election_file::FileDriver, &url)?;
/// # Ok::<(), proptest::test_runner::TestCaseError>(())
/// ```
pub fn round_trip(driver: &dyn Driver, url: &dyn Target) -> Result<(), TestCaseError> {
    let whole = Printed(url, true).to_string();
    let again = parse(driver, url, &whole)?;
    prop_assert_eq!(Printed(again.as_ref(), true).to_string(), whole);

    let shown = Printed(url, false).to_string();
    let parsed = parse(driver, url, &shown)?;
    let creds = url.credentials();
    for secret in creds.password.iter().chain(creds.token.iter()) {
        if secret.expose().len() > REDACTED.len() {
            prop_assert!(!shown.contains(secret.expose()), "{} shows a secret", shown);
        }
    }
    let hidden = parsed.credentials();
    prop_assert!(
        hidden
            .password
            .iter()
            .chain(hidden.token.iter())
            .all(|s| s.expose() == REDACTED),
        "{} parses to a URL with a secret that is not {}",
        shown,
        REDACTED
    );
    Ok(())
}

/// `printed` (a URL of `url`'s scheme) parsed by `driver`.
fn parse(
    driver: &dyn Driver,
    url: &dyn Target,
    printed: &str,
) -> Result<Box<dyn Target>, TestCaseError> {
    let prefix = format!("{}://", url.scheme());
    let Some(rest) = printed.strip_prefix(&prefix) else {
        return Err(TestCaseError::fail(format!(
            "{printed} does not start with {prefix}"
        )));
    };
    driver
        .parse(rest)
        .map_err(|e| TestCaseError::fail(format!("{printed} does not parse: {e}")))
}
