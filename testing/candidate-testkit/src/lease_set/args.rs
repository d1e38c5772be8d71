//! The command line of `lease-set-node`, through clap.

use std::time::Duration;

use clap::Parser;
use election_url::BackendUrl;

use crate::args::{Common, UsageError, identity_or_default, keys, millis, parse};

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// `--backend`: any backend URL (`?replicas=3` for R3 NATS buckets).
    pub backend: BackendUrl,
    /// `--identity` (default: host/pid).
    pub identity: String,
    /// `--keys`: how many keys (default 1,000).
    pub keys: usize,
    /// `--ttl-ms`.
    pub ttl: Option<Duration>,
    /// `--renew-ms`.
    pub renew: Option<Duration>,
    /// `--grace-ms` (NATS failover grace).
    pub grace: Option<Duration>,
    /// `--poll-ms`: how often keys held elsewhere are tried (file: each
    /// key's campaign poll interval; SQLite: the set's poll interval).
    pub poll: Option<Duration>,
    /// `--sweep-ms`: time between two sweeps over all keys (default 1 ms).
    pub sweep: Duration,
    /// `--balance GROUP`: balance the keys with the other members of the
    /// group (membership records over the same backend).
    pub balance: Option<String>,
    /// `--every-ms`: how often a balanced member rereads the group
    /// (default 500 ms).
    pub every: Duration,
}

/// One lease set in a process of its own, reporting what it holds line by
/// line.
#[derive(Debug, Parser)]
// The last of a repeated flag wins, as callers expect.
#[command(name = "lease-set-node", args_override_self = true)]
struct Cli {
    #[command(flatten)]
    common: Common,
    /// The identity of this process (default: host/pid).
    #[arg(long)]
    identity: Option<String>,
    /// How many keys (key-0000, key-0001, ...).
    #[arg(long, default_value_t = 1000, value_parser = keys)]
    keys: usize,
    /// Time between two sweeps over all keys, in milliseconds.
    #[arg(long = "sweep-ms", value_parser = millis, default_value = "1")]
    sweep: Duration,
    /// Balance the keys with the other members of this group.
    #[arg(long)]
    balance: Option<String>,
    /// How often a balanced member rereads the group, in milliseconds.
    #[arg(long = "every-ms", value_parser = millis, default_value = "500")]
    every: Duration,
}

impl Args {
    /// Parses the arguments after the program name.
    ///
    /// ```
    /// use candidate_testkit::lease_set::Args;
    ///
    /// let a = Args::parse(["--backend", "nats://127.0.0.1:4222", "--keys", "10"].map(String::from)).unwrap();
    /// assert_eq!(a.keys, 10);
    /// assert!(Args::parse(["--keys", "10"].map(String::from)).is_err()); // no backend
    /// assert!(Args::parse(["--backend"].map(String::from)).is_err());
    /// ```
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, UsageError> {
        let cli: Cli = parse("lease-set-node", args)?;
        Ok(Args {
            identity: identity_or_default(cli.identity),
            backend: cli.common.backend,
            keys: cli.keys,
            ttl: cli.common.ttl,
            renew: cli.common.renew,
            grace: cli.common.grace,
            poll: cli.common.poll,
            sweep: cli.sweep,
            balance: cli.balance,
            every: cli.every,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, UsageError> {
        Args::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn every_setting_parses() {
        let a = parse(&[
            "--backend",
            "sqlite:///tmp/a.db",
            "--identity",
            "n1",
            "--keys",
            "7",
            "--ttl-ms",
            "3000",
            "--renew-ms",
            "1000",
            "--grace-ms",
            "500",
            "--poll-ms",
            "200",
            "--sweep-ms",
            "2",
        ])
        .unwrap();
        assert_eq!(
            a.backend,
            "sqlite:///tmp/a.db".parse::<BackendUrl>().unwrap()
        );
        assert_eq!(a.identity, "n1");
        assert_eq!(a.keys, 7);
        assert_eq!(a.ttl, Some(Duration::from_secs(3)));
        assert_eq!(a.renew, Some(Duration::from_secs(1)));
        assert_eq!(a.grace, Some(Duration::from_millis(500)));
        assert_eq!(a.poll, Some(Duration::from_millis(200)));
        assert_eq!(a.sweep, Duration::from_millis(2));
    }

    #[test]
    fn bad_arguments_are_errors_not_panics() {
        for bad in [
            &["--backend", "file://x"][..],
            &["--backend", "file:///x", "--keys", "0"],
            &["--backend", "file:///x", "--keys", "many"],
            &["--backend", "file:///x", "--ttl-ms", "-1"],
            &["--backend", "file:///x", "--ttl-ms", "0"],
            &["--backend", "file:///x", "--poll-ms"],
            &["--backend", "file:///x", "--frobnicate"],
            &["--backend", "file:///x", "--replicas", "3"],
            &["--backend", "nats://h:1?replicas=3&colour=red"],
            &["--identity", "a"],
            &[],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn nats_urls_keep_every_server() {
        let a = parse(&[
            "--backend",
            "nats://127.0.0.1:1,nats://127.0.0.1:2?replicas=3",
        ])
        .unwrap();
        assert_eq!(
            a.backend.to_string(),
            "nats://127.0.0.1:1,127.0.0.1:2?replicas=3"
        );
        assert_eq!(a.keys, 1000);
    }
}
