//! The one command-line parser of the candidate binaries
//! (`election-candidate`, `lease-set-node`, and the torture suite's
//! `torture-candidate`): the flags they share — which backend, which
//! election, who is asking, the backend's timings and the keys — are
//! parsed here and nowhere else, the same way in each (ADR 0055).
//!
//! A binary names the shared flags it takes ([`Flag`]); [`ArgParser`]
//! parses those itself and hands every other flag back to the binary,
//! which parses its own with [`ArgParser::value`], [`ArgParser::millis`]
//! and [`ArgParser::count`] (so its values follow the same rules) and
//! refuses what it does not know with [`unknown`]. A shared flag the
//! binary did not name is handed back too, so it is refused as unknown.
//!
//! ```
//! use candidate_testkit::args::{ArgParser, Flag, unknown};
//!
//! let line = ["--backend", "sqlite:///tmp/e.db", "--ttl-ms", "3000", "--try"];
//! let mut parser = ArgParser::new(line.map(String::from), &[Flag::Backend, Flag::Ttl]);
//! let mut once = false;
//! while let Some(flag) = parser.next_flag()? {
//!     match flag.as_str() {
//!         "--try" => once = true,
//!         _ => return Err(unknown(&flag)),
//!     }
//! }
//! let args = parser.finish()?;
//! assert!(once);
//! assert_eq!(args.ttl, Some(std::time::Duration::from_secs(3)));
//! # Ok::<(), candidate_testkit::args::UsageError>(())
//! ```

use std::ops::RangeInclusive;
use std::time::Duration;

use election_url::{BackendUrl, Settings};

/// A command line a candidate binary cannot run with: a missing or
/// unknown flag, or a value that is not what the flag takes. The binary
/// reports it and exits; it is never a panic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

impl UsageError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> UsageError {
        UsageError(message.into())
    }
}

/// The error for a flag nobody parses.
pub fn unknown(flag: &str) -> UsageError {
    UsageError::new(format!("unknown argument {flag:?}"))
}

/// A flag every candidate binary parses the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flag {
    /// `--backend URL`: any backend URL of `election-url`.
    Backend,
    /// `--name NAME`: the election.
    Name,
    /// `--identity ID`: who campaigns (default: host/pid).
    Identity,
    /// `--ttl-ms N`: the backend's TTL.
    Ttl,
    /// `--renew-ms N`: the backend's renewal interval.
    Renew,
    /// `--grace-ms N`: NATS's failover grace.
    Grace,
    /// `--poll-ms N`: how often a claim held elsewhere is tried.
    Poll,
    /// `--keys N`: how many keys (1 to 100,000).
    Keys,
}

impl Flag {
    /// Every shared flag.
    pub const ALL: [Flag; 8] = [
        Flag::Backend,
        Flag::Name,
        Flag::Identity,
        Flag::Ttl,
        Flag::Renew,
        Flag::Grace,
        Flag::Poll,
        Flag::Keys,
    ];

    /// The flag as written on the command line.
    pub fn text(self) -> &'static str {
        match self {
            Flag::Backend => "--backend",
            Flag::Name => "--name",
            Flag::Identity => "--identity",
            Flag::Ttl => "--ttl-ms",
            Flag::Renew => "--renew-ms",
            Flag::Grace => "--grace-ms",
            Flag::Poll => "--poll-ms",
            Flag::Keys => "--keys",
        }
    }

    fn of(text: &str) -> Option<Flag> {
        Flag::ALL.into_iter().find(|f| f.text() == text)
    }
}

/// What the shared flags said. `backend` is always given (every candidate
/// binary needs one); the rest are `None` when not given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateArgs {
    /// `--backend`.
    pub backend: BackendUrl,
    /// `--name`.
    pub name: Option<String>,
    /// `--identity`.
    pub identity: Option<String>,
    /// `--ttl-ms`.
    pub ttl: Option<Duration>,
    /// `--renew-ms`.
    pub renew: Option<Duration>,
    /// `--grace-ms`.
    pub grace: Option<Duration>,
    /// `--poll-ms`.
    pub poll: Option<Duration>,
    /// `--keys`.
    pub keys: Option<usize>,
}

impl CandidateArgs {
    /// `--identity`, or this process's default identity (host/pid).
    pub fn identity_or_default(&self) -> String {
        self.identity
            .clone()
            .unwrap_or_else(|| election_core::Identity::for_this_process().to_string())
    }

    /// The backend settings `--ttl-ms`, `--renew-ms` and `--grace-ms`
    /// asked for, as given (see [`Settings::unused_by`] for the ones the
    /// backend has no use for).
    pub fn settings(&self) -> Settings {
        Settings {
            ttl: self.ttl,
            renew: self.renew,
            grace: self.grace,
            ..Settings::default()
        }
    }
}

/// Parses a candidate binary's command line: the shared flags it takes
/// here, every other flag by the binary (see the module docs).
#[derive(Debug)]
pub struct ArgParser<I> {
    args: I,
    takes: &'static [Flag],
    backend: Option<BackendUrl>,
    name: Option<String>,
    identity: Option<String>,
    ttl: Option<Duration>,
    renew: Option<Duration>,
    grace: Option<Duration>,
    poll: Option<Duration>,
    keys: Option<usize>,
}

impl<I: Iterator<Item = String>> ArgParser<I> {
    /// A parser of `args` (the arguments after the program name) for a
    /// binary that takes the shared flags `takes`.
    pub fn new(args: impl IntoIterator<IntoIter = I>, takes: &'static [Flag]) -> ArgParser<I> {
        ArgParser {
            args: args.into_iter(),
            takes,
            backend: None,
            name: None,
            identity: None,
            ttl: None,
            renew: None,
            grace: None,
            poll: None,
            keys: None,
        }
    }

    /// Parses shared flags up to the next flag that is not one this
    /// binary takes, and returns it (`None` at the end of the line).
    pub fn next_flag(&mut self) -> Result<Option<String>, UsageError> {
        while let Some(arg) = self.args.next() {
            let Some(flag) = Flag::of(&arg).filter(|f| self.takes.contains(f)) else {
                return Ok(Some(arg));
            };
            match flag {
                Flag::Backend => {
                    let url = self.value(&arg, "a backend URL")?;
                    self.backend = Some(BackendUrl::parse(&url).map_err(|e| {
                        UsageError::new(format!("--backend: bad backend URL: {e}"))
                    })?);
                }
                Flag::Name => self.name = Some(self.value(&arg, "a name")?),
                Flag::Identity => self.identity = Some(self.value(&arg, "an identity")?),
                Flag::Ttl => self.ttl = Some(self.millis(&arg)?),
                Flag::Renew => self.renew = Some(self.millis(&arg)?),
                Flag::Grace => self.grace = Some(self.millis(&arg)?),
                Flag::Poll => self.poll = Some(self.millis(&arg)?),
                Flag::Keys => self.keys = Some(self.count(&arg, 1..=100_000)?),
            }
        }
        Ok(None)
    }

    /// The value after `flag`, which is described as `what` when missing.
    pub fn value(&mut self, flag: &str, what: &str) -> Result<String, UsageError> {
        self.args
            .next()
            .ok_or_else(|| UsageError::new(format!("{flag} needs {what}")))
    }

    /// The value after `flag` as a whole number of milliseconds, at least
    /// 1 (no candidate setting means anything at zero).
    pub fn millis(&mut self, flag: &str) -> Result<Duration, UsageError> {
        let v = self.value(flag, "milliseconds")?;
        match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Duration::from_millis(n)),
            _ => Err(UsageError::new(format!("{flag}: bad milliseconds {v:?}"))),
        }
    }

    /// The value after `flag` as a count within `range`.
    pub fn count(&mut self, flag: &str, range: RangeInclusive<usize>) -> Result<usize, UsageError> {
        let v = self.value(flag, "a count")?;
        match v.parse::<usize>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(UsageError::new(format!(
                "{flag}: bad count {v:?} ({} to {})",
                range.start(),
                range.end()
            ))),
        }
    }

    /// The shared flags given; `--backend` is required.
    pub fn finish(self) -> Result<CandidateArgs, UsageError> {
        Ok(CandidateArgs {
            backend: self
                .backend
                .ok_or_else(|| UsageError::new("--backend is required"))?,
            name: self.name,
            identity: self.identity,
            ttl: self.ttl,
            renew: self.renew,
            grace: self.grace,
            poll: self.poll,
            keys: self.keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &[&str], takes: &'static [Flag]) -> Result<CandidateArgs, UsageError> {
        let mut parser = ArgParser::new(line.iter().map(|s| s.to_string()), takes);
        if let Some(flag) = parser.next_flag()? {
            return Err(unknown(&flag));
        }
        parser.finish()
    }

    #[test]
    fn every_shared_flag_parses() {
        let a = parse(
            &[
                "--backend",
                "file:///d",
                "--name",
                "jobs",
                "--identity",
                "a",
                "--ttl-ms",
                "3000",
                "--renew-ms",
                "1000",
                "--grace-ms",
                "500",
                "--poll-ms",
                "20",
                "--keys",
                "7",
            ],
            &Flag::ALL,
        )
        .unwrap();
        assert_eq!(a.backend, BackendUrl::file("/d"));
        assert_eq!(a.name.as_deref(), Some("jobs"));
        assert_eq!(a.identity_or_default(), "a");
        let s = a.settings();
        assert_eq!(
            (s.ttl, s.renew, s.grace),
            (
                Some(Duration::from_secs(3)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_millis(500))
            )
        );
        assert_eq!(a.poll, Some(Duration::from_millis(20)));
        assert_eq!(a.keys, Some(7));
    }

    #[test]
    fn a_shared_flag_the_binary_does_not_take_is_unknown() {
        let e = parse(&["--backend", "file:///d", "--keys", "7"], &[Flag::Backend]).unwrap_err();
        assert_eq!(e, unknown("--keys"));
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        for bad in [
            &["--backend"][..],
            &["--backend", "zookeeper"],
            &["--backend", "file:///d", "--ttl-ms", "0"],
            &["--backend", "file:///d", "--ttl-ms", "-1"],
            &["--backend", "file:///d", "--ttl-ms", "soon"],
            &["--backend", "file:///d", "--keys", "0"],
            &["--backend", "file:///d", "--keys", "100001"],
            &["--backend", "file:///d", "--name"],
            &["--name", "jobs"],
            &[],
        ] {
            assert!(parse(bad, &Flag::ALL).is_err(), "{bad:?} was accepted");
        }
    }
}
