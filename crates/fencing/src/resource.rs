//! [`ResourceName`]: the name of a fenced resource.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use election_core::{ConfigError, ElectionName};

/// The longest resource name, in bytes.
pub const MAX_RESOURCE_LEN: usize = election_core::MAX_NAME_LEN;

/// The name of a resource whose writes are fenced: each resource has its
/// own high-water mark.
///
/// A name is 1 to 200 bytes of text without control characters, path
/// separators (`/`, `\`) or a leading dot, so every store can use it as a
/// file name, a row key or a KV key.
///
/// ```
/// use fencing::ResourceName;
///
/// assert_eq!(ResourceName::new("orders.v2").unwrap().as_str(), "orders.v2");
/// assert!(ResourceName::new("").is_err());
/// assert!(ResourceName::new("../etc/passwd").is_err());
/// assert!("ledger".parse::<ResourceName>().is_ok());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceName(Arc<str>);

impl ResourceName {
    /// Checks and wraps `name`; refuses it with
    /// [`ConfigError::BadName`] (which converts into
    /// [`Error::Config`](crate::Error::Config)).
    ///
    /// ```
    /// use fencing::ResourceName;
    ///
    /// # fn main() -> Result<(), fencing::Error> {
    /// let orders = ResourceName::new("orders.v2")?; // `?` turns a bad name into Error::Config
    /// assert_eq!(orders.to_string(), "orders.v2");
    /// assert!(ResourceName::new("a/b").is_err());
    /// # Ok(()) }
    /// ```
    pub fn new(name: impl AsRef<str>) -> Result<ResourceName, ConfigError> {
        let name = name.as_ref();
        election_core::check_key_name("resource name", name)?;
        Ok(ResourceName(name.into()))
    }

    /// The resource of one key of a lease set (or of one election): the
    /// key's own name, so each key has its own high-water mark. Infallible:
    /// an [`ElectionName`] obeys the same rules as a resource name.
    ///
    /// ```
    /// use election_core::ElectionName;
    /// use fencing::ResourceName;
    ///
    /// let key = ElectionName::new("tenant-42").unwrap();
    /// assert_eq!(ResourceName::for_key(&key).as_str(), "tenant-42");
    /// assert_eq!(ResourceName::from(&key), ResourceName::for_key(&key));
    /// ```
    pub fn for_key(key: &ElectionName) -> ResourceName {
        ResourceName(Arc::from(key.as_str()))
    }

    /// The name as text.
    ///
    /// ```
    /// use fencing::ResourceName;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let orders = ResourceName::new("orders.v2")?;
    /// let mark_file = format!("{}.fence", orders.as_str());
    /// assert_eq!(mark_file, "orders.v2.fence");
    /// # Ok(()) }
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&ElectionName> for ResourceName {
    /// [`ResourceName::for_key`].
    fn from(key: &ElectionName) -> ResourceName {
        ResourceName::for_key(key)
    }
}

impl FromStr for ResourceName {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ResourceName::new(s)
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for ResourceName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn refuses_what_a_file_store_cannot_use() {
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "/abs",
            "a\\b",
            "tab\there",
            "nul\0",
            "new\nline",
            "del\u{7f}",
        ] {
            let err = ResourceName::new(bad).expect_err(bad);
            assert!(matches!(
                err,
                ConfigError::BadName {
                    what: "resource name",
                    ..
                }
            ));
        }
        assert!(ResourceName::new("x".repeat(MAX_RESOURCE_LEN + 1)).is_err());
        assert!(ResourceName::new("x".repeat(MAX_RESOURCE_LEN)).is_ok());
        // 67 three-byte characters are 201 bytes: the limit is in bytes.
        assert!(ResourceName::new("€".repeat(67)).is_err());
        for good in ["orders", "orders.v2", "a..b", "räksmörgås", "x-1_2 3"] {
            assert_eq!(ResourceName::new(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn long_bad_values_are_cut_in_the_error() {
        let err = ResourceName::new(format!("/{}", "y".repeat(300))).unwrap_err();
        let ConfigError::BadName { value, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(value.chars().count(), 64);
    }

    #[test]
    fn every_election_name_is_a_resource_name() {
        for key in [
            "orders",
            "a..b",
            "räksmörgås",
            &"x".repeat(MAX_RESOURCE_LEN),
        ] {
            let name = ElectionName::new(key).unwrap();
            let resource = ResourceName::for_key(&name);
            assert_eq!(resource.as_str(), key);
            assert_eq!(ResourceName::new(key).unwrap(), resource);
        }
    }

    proptest! {
        #[test]
        fn election_names_and_resource_names_agree(s in any::<String>()) {
            prop_assert_eq!(ElectionName::new(&s).is_ok(), ResourceName::new(&s).is_ok());
        }

        #[test]
        fn never_panics_and_accepted_names_are_plain_file_names(s in any::<String>()) {
            if let Ok(name) = ResourceName::new(&s) {
                prop_assert_eq!(name.as_str(), s.as_str());
                let path = std::path::Path::new(name.as_str());
                prop_assert_eq!(path.components().count(), 1);
                prop_assert!(matches!(
                    path.components().next(),
                    Some(std::path::Component::Normal(_))
                ));
            }
        }
    }
}
