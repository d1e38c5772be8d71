//! The command line of the candidate binaries (`election-candidate`,
//! `lease-set-node`, and the torture suite's `torture-candidate` and
//! `torture-member`), through clap derive: the flags they share — which
//! backend and its timings — are one struct, [`Common`], flattened into
//! each binary's own `clap::Parser`, and the values every binary takes
//! (milliseconds, counts, backend URLs) are parsed by the value parsers
//! here, the same way in each (ADR 0055).
//!
//! [`parse`] runs a binary's parser over its arguments and turns clap's
//! errors into a [`UsageError`] (the binary reports it and exits with its
//! usage code); `--help` prints the help and exits 0.
//!
//! ```
//! use candidate_testkit::args::{Common, parse};
//!
//! #[derive(Debug, clap::Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     common: Common,
//!     /// Try once.
//!     #[arg(long = "try")]
//!     once: bool,
//! }
//!
//! let line = ["--backend", "sqlite:///tmp/e.db", "--ttl-ms", "3000", "--try"];
//! let cli: Cli = parse("example", line.map(String::from))?;
//! assert!(cli.once);
//! assert_eq!(cli.common.ttl, Some(std::time::Duration::from_secs(3)));
//! assert!(parse::<Cli>("example", ["--try".to_owned()]).is_err()); // no backend
//! # Ok::<(), candidate_testkit::args::UsageError>(())
//! ```

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

/// The flags every candidate binary takes: the backend and its timings.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct Common {
    /// Any backend URL of election-url (`file:///dir`, `sqlite:///path.db`,
    /// `nats://host:port?bucket=B&replicas=N`, `postgres://...`).
    #[arg(long, value_parser = backend_url)]
    pub backend: BackendUrl,
    /// The backend's lease TTL, in milliseconds.
    #[arg(long = "ttl-ms", value_parser = millis)]
    pub ttl: Option<Duration>,
    /// The backend's renewal interval, in milliseconds.
    #[arg(long = "renew-ms", value_parser = millis)]
    pub renew: Option<Duration>,
    /// NATS's failover grace, in milliseconds.
    #[arg(long = "grace-ms", value_parser = millis)]
    pub grace: Option<Duration>,
    /// How often a claim held elsewhere is tried, in milliseconds.
    #[arg(long = "poll-ms", value_parser = millis)]
    pub poll: Option<Duration>,
}

impl Common {
    /// The backend settings `--ttl-ms`, `--renew-ms` and `--grace-ms`
    /// asked for, as given (see [`BackendUrl::unused_settings`](election_url::BackendUrl::unused_settings) for the ones the
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

/// `--identity`, or this process's default identity (host/pid).
pub fn identity_or_default(identity: Option<String>) -> String {
    identity.unwrap_or_else(|| election_core::Identity::for_this_process().to_string())
}

/// Parses `args` (the arguments after the program name) with the binary
/// `program`'s parser `C`. `--help` (and `--version`) print and exit 0;
/// every other error of clap is a [`UsageError`] on one line. `C` should
/// have `#[command(args_override_self = true)]`: the candidate binaries'
/// callers repeat a flag to override it (the last wins).
pub fn parse<C: clap::Parser>(
    program: &str,
    args: impl IntoIterator<Item = String>,
) -> Result<C, UsageError> {
    let line = std::iter::once(program.to_owned()).chain(args);
    C::try_parse_from(line).map_err(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        _ => {
            let text = e.render().to_string();
            let text = text.trim_end().trim_start_matches("error: ");
            UsageError::new(text.replace('\n', " "))
        }
    })
}

/// A backend URL, as `--backend` takes it.
pub fn backend_url(text: &str) -> Result<BackendUrl, String> {
    BackendUrl::parse(text).map_err(|e| format!("bad backend URL: {e}"))
}

/// A whole number of milliseconds, at least 1 (no candidate setting
/// means anything at zero).
pub fn millis(text: &str) -> Result<Duration, String> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(Duration::from_millis(n)),
        _ => Err(format!("bad milliseconds {text:?}")),
    }
}

/// A count of keys, as `--keys` takes it: 1 to 100,000.
pub fn keys(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("bad count {text:?} (1 to 100000)")),
    }
}

/// A count of at least 1.
pub fn positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("bad count {text:?} (at least 1)")),
    }
}

/// A word: not empty, no whitespace or control characters (`--writer`).
pub fn word(text: &str) -> Result<String, String> {
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(format!("{text:?} must be a non-empty word"))
    } else {
        Ok(text.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    #[command(args_override_self = true)]
    struct Cli {
        #[command(flatten)]
        common: Common,
        #[arg(long, value_parser = keys)]
        keys: Option<usize>,
    }

    fn parse_line(line: &[&str]) -> Result<Cli, UsageError> {
        parse("test", line.iter().map(|s| s.to_string()))
    }

    #[test]
    fn every_common_flag_parses() {
        let a = parse_line(&[
            "--backend",
            "file:///d",
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
        ])
        .unwrap();
        assert_eq!(a.common.backend, BackendUrl::file("/d"));
        let s = a.common.settings();
        assert_eq!(
            (s.ttl, s.renew, s.grace),
            (
                Some(Duration::from_secs(3)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_millis(500))
            )
        );
        assert_eq!(a.common.poll, Some(Duration::from_millis(20)));
        assert_eq!(a.keys, Some(7));
    }

    #[test]
    fn the_last_of_a_repeated_flag_wins() {
        let a = parse_line(&["--backend", "file:///d", "--ttl-ms", "1", "--ttl-ms", "2"]).unwrap();
        assert_eq!(a.common.ttl, Some(Duration::from_millis(2)));
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
            &["--backend", "file:///d", "--frobnicate"],
            &["--ttl-ms", "10"],
            &[],
        ] {
            assert!(parse_line(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn words_and_counts() {
        assert_eq!(word("c1"), Ok("c1".to_owned()));
        assert!(word("").is_err());
        assert!(word("a b").is_err());
        assert_eq!(positive("3"), Ok(3));
        assert!(positive("0").is_err());
    }
}
