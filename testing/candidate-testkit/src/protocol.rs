//! The candidate line protocol: what `election-candidate` prints
//! ([`Event`], one per line on stdout) and reads ([`Command`], one per line
//! on stdin). The binary prints with `Display`, the client parses with
//! `FromStr`: one definition for both sides.
//!
//! `<mono_ns>` is `CLOCK_MONOTONIC` in nanoseconds ([`fencing::mono`]), the
//! same clock in every process of the host.
//!
//! ```
//! use candidate_testkit::protocol::{Command, Event};
//!
//! let e = Event::Elected { epoch: 7, at: 12 };
//! assert_eq!(e.to_string(), "elected 7 12");
//! assert_eq!("elected 7 12".parse::<Event>().unwrap(), e);
//! assert_eq!("write ledger".parse::<Command>().unwrap(), Command::Write("ledger".into()));
//! ```

use std::fmt;
use std::str::FromStr;

/// Exit code: an error (after an `error` line).
pub const EXIT_ERROR: u8 = 2;
/// Exit code: `--try` found the claim held (after `not-elected`).
pub const EXIT_NOT_ELECTED: u8 = 3;
/// Exit code: the term was lost (at end of input, or a resign found it
/// lost).
pub const EXIT_LOST: u8 = 4;

/// One line a candidate prints.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// `campaigning`: the campaign starts.
    Campaigning,
    /// `elected <epoch> <mono_ns>`: a term began.
    Elected {
        /// The term's epoch.
        epoch: u64,
        /// When the campaign returned.
        at: u64,
    },
    /// `not-elected`: `--try` found the claim held (exit code 3).
    NotElected,
    /// `lost <reason>`: the term was lost.
    Lost(String),
    /// `epoch <epoch>`: the answer to `epoch`.
    Epoch(u64),
    /// `confirmed <epoch>`: the commit-point check passed.
    Confirmed(u64),
    /// `not-confirmed <reason>`: the commit-point check failed.
    NotConfirmed(String),
    /// `wrote <token>`: a fenced write was accepted.
    Wrote(u64),
    /// `refused <presented> <mark>`: the fence refused a write.
    Refused {
        /// The token the write carried.
        presented: u64,
        /// The resource's high-water mark.
        mark: u64,
    },
    /// `won <count>`: with `--many`, the elections won.
    Won(usize),
    /// `held <count> <age_ns>`: with `--many`, the answer to `held`: the
    /// terms held now (won, no loss reported, not past their validity),
    /// and the time since the least recently renewed of them was last
    /// renewed (or won), in nanoseconds (0 when none expires).
    Held {
        /// Terms held now.
        count: usize,
        /// Time since the oldest landed renewal among them.
        oldest_ns: u64,
    },
    /// `resigning <mono_ns>`: a resign starts.
    Resigning(u64),
    /// `resigned <mono_ns>`: the resign returned.
    Resigned(u64),
    /// `error <message>`: a failure (exit code 2 unless a command's).
    Error(String),
}

/// Why a line is not an [`Event`] or a [`Command`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a line of the candidate protocol: {line:?}")]
pub struct BadLine {
    /// The line.
    pub line: String,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Campaigning => f.write_str("campaigning"),
            Event::Elected { epoch, at } => write!(f, "elected {epoch} {at}"),
            Event::NotElected => f.write_str("not-elected"),
            Event::Lost(reason) => write!(f, "lost {reason}"),
            Event::Epoch(e) => write!(f, "epoch {e}"),
            Event::Confirmed(e) => write!(f, "confirmed {e}"),
            Event::NotConfirmed(reason) => write!(f, "not-confirmed {reason}"),
            Event::Wrote(t) => write!(f, "wrote {t}"),
            Event::Refused { presented, mark } => write!(f, "refused {presented} {mark}"),
            Event::Won(n) => write!(f, "won {n}"),
            Event::Held { count, oldest_ns } => write!(f, "held {count} {oldest_ns}"),
            Event::Resigning(at) => write!(f, "resigning {at}"),
            Event::Resigned(at) => write!(f, "resigned {at}"),
            Event::Error(message) => write!(f, "error {message}"),
        }
    }
}

impl FromStr for Event {
    type Err = BadLine;

    fn from_str(line: &str) -> Result<Event, BadLine> {
        let bad = || BadLine {
            line: line.to_owned(),
        };
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
        let two = || -> Result<(u64, u64), BadLine> {
            let (a, b) = rest.split_once(' ').ok_or_else(bad)?;
            Ok((num(a)?, num(b)?))
        };
        Ok(match word {
            "campaigning" if rest.is_empty() => Event::Campaigning,
            "elected" => {
                let (epoch, at) = two()?;
                Event::Elected { epoch, at }
            }
            "not-elected" if rest.is_empty() => Event::NotElected,
            "lost" => Event::Lost(rest.to_owned()),
            "epoch" => Event::Epoch(num(rest)?),
            "confirmed" => Event::Confirmed(num(rest)?),
            "not-confirmed" => Event::NotConfirmed(rest.to_owned()),
            "wrote" => Event::Wrote(num(rest)?),
            "refused" => {
                let (presented, mark) = two()?;
                Event::Refused { presented, mark }
            }
            "won" => Event::Won(rest.parse().map_err(|_| bad())?),
            "held" => {
                let (count, oldest_ns) = two()?;
                Event::Held {
                    count: usize::try_from(count).map_err(|_| bad())?,
                    oldest_ns,
                }
            }
            "resigning" => Event::Resigning(num(rest)?),
            "resigned" => Event::Resigned(num(rest)?),
            "error" => Event::Error(rest.to_owned()),
            _ => return Err(bad()),
        })
    }
}

/// One line a candidate reads. End of input resigns (or, after a loss,
/// exits with code 4).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// `resign`: resign, then exit 0 (4 if the term was lost).
    Resign,
    /// `exit`: exit at once without resigning (the backend frees the claim
    /// as it does for a crash).
    Exit,
    /// `epoch`: print the term's epoch.
    Epoch,
    /// `confirm`: the commit-point check (`Term::confirm`), answered by
    /// `confirmed` or `not-confirmed`.
    Confirm,
    /// `write <resource>`: a fenced write with the token taken when
    /// elected, made even after a loss, to show the fence refusing a
    /// deposed leader (SQLite: into `candidate_writes`, in the fence's
    /// transaction).
    Write(String),
    /// `held`: with `--many`, how many terms are held now and how long
    /// ago the oldest renewal among them landed (answered by `held`).
    Held,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Resign => f.write_str("resign"),
            Command::Exit => f.write_str("exit"),
            Command::Epoch => f.write_str("epoch"),
            Command::Confirm => f.write_str("confirm"),
            Command::Write(resource) => write!(f, "write {resource}"),
            Command::Held => f.write_str("held"),
        }
    }
}

impl FromStr for Command {
    type Err = BadLine;

    fn from_str(line: &str) -> Result<Command, BadLine> {
        let mut words = line.split_whitespace();
        Ok(match (words.next(), words.next(), words.next()) {
            (Some("resign"), None, _) => Command::Resign,
            (Some("exit"), None, _) => Command::Exit,
            (Some("epoch"), None, _) => Command::Epoch,
            (Some("confirm"), None, _) => Command::Confirm,
            (Some("held"), None, _) => Command::Held,
            (Some("write"), resource, None) => {
                Command::Write(resource.unwrap_or("resource").to_owned())
            }
            _ => {
                return Err(BadLine {
                    line: line.to_owned(),
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_prints_and_parses_back() {
        for e in [
            Event::Campaigning,
            Event::Elected { epoch: 3, at: 9 },
            Event::NotElected,
            Event::Lost("the lease expired".into()),
            Event::Epoch(4),
            Event::Confirmed(5),
            Event::NotConfirmed("election jobs: lost".into()),
            Event::Wrote(6),
            Event::Refused {
                presented: 6,
                mark: 7,
            },
            Event::Won(1000),
            Event::Held {
                count: 100,
                oldest_ns: 4_900_000_000,
            },
            Event::Resigning(1),
            Event::Resigned(2),
            Event::Error("no such file".into()),
        ] {
            assert_eq!(e.to_string().parse::<Event>(), Ok(e.clone()), "{e}");
        }
        for c in [
            Command::Resign,
            Command::Exit,
            Command::Epoch,
            Command::Confirm,
            Command::Write("ledger".into()),
            Command::Held,
        ] {
            assert_eq!(c.to_string().parse::<Command>(), Ok(c.clone()), "{c}");
        }
        for bad in [
            "",
            "elected",
            "elected 1",
            "elected x 1",
            "won many",
            "held 3",
            "held x 1",
            "hello",
        ] {
            assert!(bad.parse::<Event>().is_err(), "{bad:?}");
        }
        for bad in ["", "resign now", "write a b", "hello"] {
            assert!(bad.parse::<Command>().is_err(), "{bad:?}");
        }
    }
}
