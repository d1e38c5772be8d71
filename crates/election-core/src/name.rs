//! Validated names: the election's name and the candidate's identity.

use std::fmt;
use std::sync::Arc;

use crate::ConfigError;

/// The longest name or identity, in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// Checks that `value` can name something in every backend and store: 1 to
/// 200 bytes of text without control characters, path separators (`/`,
/// `\`) or a leading dot, so it works as a file name, a row key and a KV
/// key. `what` names the value in the error (e.g. `"resource name"`).
///
/// ```
/// assert!(election_core::check_key_name("resource name", "orders.v2").is_ok());
/// assert!(election_core::check_key_name("resource name", "../etc").is_err());
/// ```
pub fn check_key_name(what: &'static str, value: &str) -> Result<(), ConfigError> {
    validate(what, value, false)
}

fn validate(what: &'static str, value: &str, allow_slash: bool) -> Result<(), ConfigError> {
    let bad = |reason: &'static str| ConfigError::BadName {
        what,
        value: value.chars().take(64).collect(),
        reason,
    };
    if value.is_empty() {
        return Err(bad("it is empty"));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(bad("it is longer than 200 bytes"));
    }
    if value.chars().any(char::is_control) {
        return Err(bad("it contains a control character"));
    }
    if !allow_slash && (value.contains('/') || value.contains('\\')) {
        return Err(bad("it contains a path separator"));
    }
    if !allow_slash && (value == "." || value == ".." || value.starts_with('.')) {
        return Err(bad("it starts with a dot"));
    }
    Ok(())
}

/// The name of an election: candidates with the same name (on the same
/// backend) compete for the same claim.
///
/// A name is 1 to 200 bytes of text without control characters, path
/// separators or a leading dot, so every backend can use it as a file name,
/// a row key or a KV key.
///
/// ```
/// use election_core::ElectionName;
///
/// assert!(ElectionName::new("billing-dispatcher").is_ok());
/// assert!(ElectionName::new("").is_err());
/// assert!(ElectionName::new("../etc").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElectionName(Arc<str>);

impl ElectionName {
    /// Checks and wraps `name`.
    ///
    /// ```
    /// use election_core::ElectionName;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let name = ElectionName::new("billing-dispatcher")?;
    /// assert_eq!(name.to_string(), "billing-dispatcher");
    /// assert!(ElectionName::new("a/b").is_err()); // no path separators
    /// # Ok(()) }
    /// ```
    pub fn new(name: impl AsRef<str>) -> Result<Self, ConfigError> {
        let name = name.as_ref();
        check_key_name("election name", name)?;
        Ok(ElectionName(name.into()))
    }

    /// The name as text.
    ///
    /// ```
    /// use election_core::ElectionName;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let name = ElectionName::new("billing-dispatcher")?;
    /// let file_name = format!("{}.lock", name.as_str());
    /// assert_eq!(file_name, "billing-dispatcher.lock");
    /// # Ok(()) }
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Who a candidate is: shown to others by [`Candidate::leader`](crate::Candidate::leader)
/// and carried by its [`Term`](crate::Term).
///
/// An identity is 1 to 200 bytes of text without control characters. Give
/// every candidate process its own identity (a host name and process id, a
/// pod name): two candidates with one identity cannot be told apart by
/// observers.
///
/// ```
/// use election_core::Identity;
///
/// assert_eq!(Identity::new("host-a/4711").unwrap().as_str(), "host-a/4711");
/// assert!(Identity::new("line\nbreak").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity(Arc<str>);

impl Identity {
    /// Checks and wraps `identity`.
    ///
    /// ```
    /// use election_core::Identity;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let pod = Identity::new("orders-7f9c/10.0.3.17")?; // slashes are fine in an identity
    /// assert_eq!(pod.as_str(), "orders-7f9c/10.0.3.17");
    /// assert!(Identity::new("").is_err());
    /// # Ok(()) }
    /// ```
    pub fn new(identity: impl AsRef<str>) -> Result<Self, ConfigError> {
        let identity = identity.as_ref();
        validate("identity", identity, true)?;
        Ok(Identity(identity.into()))
    }

    /// An identity for this process: `<host name>/<process id>`.
    ///
    /// ```
    /// use election_core::Identity;
    ///
    /// let me = Identity::for_this_process();
    /// assert!(me.as_str().ends_with(&format!("/{}", std::process::id())));
    /// ```
    ///
    /// A `&Identity` goes wherever a backend takes the identity as `&str`:
    ///
    /// ```
    /// use election_core::{Candidate, Identity};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", &Identity::for_this_process())?);
    /// # drop(candidate);
    /// # Ok(()) }
    /// ```
    pub fn for_this_process() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty() && validate("identity", h, true).is_ok())
            .unwrap_or_else(|| "localhost".to_owned());
        Identity(format!("{host}/{}", std::process::id()).into())
    }

    /// The identity as text.
    ///
    /// ```
    /// use election_core::Identity;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let me = Identity::new("host-a/4711")?;
    /// println!("campaigning as {}", me.as_str());
    /// # Ok(()) }
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! text_impls {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }
        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        /// The text, so a `&` of it goes wherever a `&str` is taken (a
        /// backend's `candidate(name, identity)`).
        impl std::ops::Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
    };
}
text_impls!(ElectionName);
text_impls!(Identity);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_refuse_what_backends_cannot_store() {
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "tab\there",
            "nul\0",
        ] {
            assert!(ElectionName::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(ElectionName::new("x".repeat(201)).is_err());
        assert!(ElectionName::new("x".repeat(200)).is_ok());
        assert!(ElectionName::new("orders.v2").is_ok());
    }

    #[test]
    fn identities_allow_slashes_but_not_controls() {
        assert!(Identity::new("host/1").is_ok());
        assert!(Identity::new("").is_err());
        assert!(Identity::new("a\rb").is_err());
        let own = Identity::for_this_process();
        assert!(own.as_str().ends_with(&format!("/{}", std::process::id())));
    }
}
