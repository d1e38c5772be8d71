//! Opening any backend from a URL the way every candidate binary does,
//! without looking at which backend it is: the settings a backend has no
//! use for are left out (every process of a driver gets the same flags),
//! a poll interval a backend refuses is left out, and an error is retried
//! when it classifies itself as transient.

use std::time::Duration;

use election_core::{ConfigError, Disposition};
use election_url::{AnyLeaseSet, Backend, BackendUrl, Error, Settings};

/// The settings of `given` the backend of `url` uses, and the names
/// (`ttl`, `renew`, `grace`) of those it has no use for, left out.
///
/// ```
/// use std::time::Duration;
///
/// use election_url::{BackendUrl, Settings};
///
/// let given = Settings { ttl: Some(Duration::from_secs(3)), grace: Some(Duration::from_secs(1)), ..Settings::default() };
/// let url: BackendUrl = "sqlite:///tmp/a.db".parse().unwrap();
/// let (settings, unused) = candidate_testkit::open::usable_settings(&url, given);
/// assert_eq!(unused, ["grace"]);
/// assert_eq!((settings.ttl, settings.grace), (given.ttl, None));
/// ```
pub fn usable_settings(url: &BackendUrl, given: Settings) -> (Settings, Vec<&'static str>) {
    let unused = url.unused_settings(&given);
    let mut settings = given;
    for setting in &unused {
        match *setting {
            "ttl" => settings.ttl = None,
            "renew" => settings.renew = None,
            _ => settings.grace = None,
        }
    }
    (settings, unused)
}

/// Whether opening may succeed if tried again, as the error classifies
/// itself: the server could not be reached or did not answer in time (a
/// server being restarted, a freshly started cluster still electing its
/// JetStream meta leader, a loaded machine), or the outcome is unknown.
pub fn transient(e: &Error) -> bool {
    election_url::classify(e).is_some_and(|class| {
        matches!(
            class.disposition,
            Disposition::Transient | Disposition::OutcomeUnknown
        )
    })
}

/// A lease set of `identity` on `backend`, keys held elsewhere tried every
/// `poll` where the backend has such an interval; `true` with it when the
/// backend refused `poll` (it watches its keys instead) and it was left
/// out.
///
/// Cancel safety: cancel safe. Failure model: the backend's error.
pub async fn lease_set(
    backend: &Backend,
    identity: &str,
    poll: Option<Duration>,
) -> Result<(AnyLeaseSet, bool), Error> {
    match backend.lease_set_polling(identity, poll).await {
        Err(Error::Config(ConfigError::BadSetting {
            setting: "poll", ..
        })) if poll.is_some() => Ok((backend.lease_set_polling(identity, None).await?, true)),
        set => Ok((set?, false)),
    }
}
