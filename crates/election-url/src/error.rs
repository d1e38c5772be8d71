//! The errors, and [`classify`]: an error chain's [`Class`], found by
//! every compiled-in backend's probe.

use election_core::{Class, Classify, Probe, probe};

pub use election_driver::{Error, ParseError};

use crate::table::DRIVERS;

/// The class of `error`, walking its `source()` chain
/// ([`election_core::classify`]) with every backend's probe: the first
/// backend error found classifies it, else the first core error. An
/// [`Error::Election`] is classified by the backend error its core error
/// carries, if any.
///
/// ```
/// use election_core::Disposition;
///
/// let e = election_url::Error::Absent { what: "the bucket elections".into() };
/// assert_eq!(election_url::classify(&e).map(|c| c.disposition), Some(Disposition::Other));
/// ```
pub fn classify(error: &(dyn std::error::Error + 'static)) -> Option<Class> {
    if let Some(Error::Election(e)) = error.downcast_ref::<Error>() {
        return classify(e).or_else(|| Some(e.class()));
    }
    let probes: Vec<Probe> = std::iter::once(probe::<Error> as Probe)
        .chain(DRIVERS.iter().map(|d| d.probe()))
        .collect();
    election_core::classify(error, &probes)
}
