//! The etcd releases this crate works with, and the check of the version
//! a member reports when an election opens (`Maintenance.Status`).
//!
//! What needs them: the claim, the release and the fence compare a key's
//! lease in one transaction (`Compare.LEASE`, etcd 3.3); etcd 3.4 is the
//! oldest release the tests run against (Debian's `etcd-server`). An
//! older server would not refuse such a compare loudly, so it is refused
//! here, before anything is claimed. A version that cannot be read counts
//! as too old: whether the compare works cannot be told.

use crate::error::Error;

/// The oldest etcd release this crate works with, as `major.minor`.
///
/// ```
/// assert_eq!(election_etcd::NEEDED_VERSION, "3.4");
/// ```
pub const NEEDED_VERSION: &str = "3.4";

/// [`NEEDED_VERSION`] as numbers.
const NEEDED: (u64, u64) = (3, 4);

/// The major and minor release of a version as etcd reports it (`3.4.23`,
/// `3.6.0-rc.1`, `v3.5.9`); `None` if it does not start with two numbers.
pub(crate) fn major_minor(reported: &str) -> Option<(u64, u64)> {
    let mut parts = reported.trim().trim_start_matches('v').splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?;
    let digits = minor
        .find(|c: char| !c.is_ascii_digit())
        .map_or(minor, |end| &minor[..end]);
    Some((major, digits.parse().ok()?))
}

/// `Ok` if `reported` is [`NEEDED_VERSION`] or later;
/// [`Error::ServerTooOld`] if it is older or cannot be read.
pub(crate) fn check(reported: &str) -> Result<(), Error> {
    match major_minor(reported) {
        Some(found) if found >= NEEDED => Ok(()),
        _ => Err(Error::ServerTooOld {
            found: reported.to_owned(),
            needed: NEEDED_VERSION,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_releases_tested_pass_and_older_ones_are_named() {
        for ok in ["3.4.0", "3.4.23", "3.5.9", "3.6.0-rc.1", "v3.7.2", "4.0.0"] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for old in ["3.3.27", "3.2.32", "3.0.0", "2.3.8"] {
            match check(old) {
                Err(Error::ServerTooOld { found, needed }) => {
                    assert_eq!((found.as_str(), needed), (old, "3.4"));
                }
                other => panic!("{old}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_version_that_cannot_be_read_is_too_old() {
        for bad in ["", "3", "three.four", "3.x.1", ".4.1", "-1.5.0"] {
            assert!(
                matches!(check(bad), Err(Error::ServerTooOld { .. })),
                "{bad:?}"
            );
        }
    }

    proptest! {
        /// Accepted exactly when `major.minor` is 3.4 or later, whatever
        /// the patch and suffix.
        #[test]
        fn accepted_iff_at_least_the_needed_release(
            major in 0u64..6,
            minor in 0u64..12,
            patch in 0u64..40,
            suffix in prop::option::of("-(rc|alpha|beta)\\.[0-9]"),
            v in any::<bool>(),
        ) {
            let reported = format!(
                "{}{major}.{minor}.{patch}{}",
                if v { "v" } else { "" },
                suffix.unwrap_or_default()
            );
            prop_assert_eq!(check(&reported).is_ok(), (major, minor) >= (3, 4));
        }

        /// Anything else, read or not, never panics, and passes only if it
        /// starts with a release at least the needed one.
        #[test]
        fn any_text_is_answered_without_panic(reported in ".{0,24}") {
            let ok = check(&reported).is_ok();
            prop_assert_eq!(ok, major_minor(&reported).is_some_and(|f| f >= (3, 4)));
        }
    }
}
