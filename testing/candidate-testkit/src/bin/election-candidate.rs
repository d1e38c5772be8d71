//! One candidate process for every backend, driven over stdin and stdout:
//! see the crate docs of `candidate_testkit` for the command line and
//! `candidate_testkit::protocol` for the lines.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use candidate_testkit::args::{self, Common, positive};
use candidate_testkit::protocol::{Command, EXIT_ERROR, EXIT_LOST, EXIT_NOT_ELECTED, Event};
use election_core::{Candidate, Election, Health, Lease, Term};
use election_url::{AnyClaim, Backend, BackendUrl, Settings};
use fencing::mono::mono_ns;
use fencing::{ResourceName, Token};
use tokio::io::AsyncBufReadExt;

type BoxError = Box<dyn std::error::Error>;

fn say(event: Event) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{event}");
    let _ = out.flush();
}

struct Args {
    url: BackendUrl,
    name: Option<String>,
    identity: String,
    settings: Settings,
    poll: Option<Duration>,
    once: bool,
    many: Option<usize>,
    at_once: usize,
    set: Option<Vec<String>>,
}

/// One candidate, driven over stdin and stdout (see the crate docs of
/// candidate_testkit).
#[derive(Debug, clap::Parser)]
// The last of a repeated flag wins, as callers expect.
#[command(name = "election-candidate", args_override_self = true)]
struct Cli {
    #[command(flatten)]
    common: Common,
    /// The election (or --many, or --set); with --many, the prefix of
    /// its names (default `e`).
    #[arg(long)]
    name: Option<String>,
    /// Who campaigns (default: host/pid).
    #[arg(long)]
    identity: Option<String>,
    /// Try once instead of campaigning.
    #[arg(long = "try")]
    once: bool,
    /// Try once for each of the elections `e0` .. `e<N-1>` (`--name P`:
    /// `P0` ..), then hold those won.
    #[arg(long, value_parser = positive)]
    many: Option<usize>,
    /// With --many: how many of the tries run at once (default 1, one
    /// after another).
    #[arg(long = "at-once", value_parser = positive, default_value_t = 1)]
    at_once: usize,
    /// Campaign for these keys (k1,k2,...) as one lease set.
    #[arg(long, value_delimiter = ',')]
    set: Option<Vec<String>>,
}

fn parse() -> Result<Args, BoxError> {
    let cli: Cli = args::parse("election-candidate", std::env::args().skip(1))?;
    if cli.name.is_none() && cli.many.is_none() && cli.set.is_none() {
        return Err("--name (or --many, or --set) is required".into());
    }
    Ok(Args {
        identity: args::identity_or_default(cli.identity),
        settings: cli.common.settings(),
        url: cli.common.backend,
        name: cli.name,
        poll: cli.common.poll,
        once: cli.once,
        many: cli.many,
        at_once: cli.at_once,
        set: cli.set,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(code) => code,
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = e.source();
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            say(Event::Error(msg));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// A fenced write with `token`: on SQLite an insert into
/// `candidate_writes`, checked by the fence in the same transaction.
async fn fenced_write(
    backend: &Backend,
    resource: &str,
    token: Token,
    identity: &str,
) -> Result<(), BoxError> {
    use sqlx::Connection;
    if let Some(election) = backend.downcast_ref::<election_postgres::PostgresElection>() {
        return postgres_write(election, resource, token, identity).await;
    }
    let Some(election) = backend.downcast_ref::<election_sqlite::SqliteElection>() else {
        say(Event::Error(format!(
            "write: the {} backend has no resource here (sqlite and postgres only)",
            backend.kind()
        )));
        return Ok(());
    };
    let resource = ResourceName::new(resource)?;
    let mut conn = election.pool().acquire().await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    match election.fence().advance_in(&mut tx, &resource, token).await {
        Ok(_) => {
            sqlx::query("INSERT INTO candidate_writes (epoch, identity) VALUES (?1, ?2)")
                .bind(token.get_i64())
                .bind(identity)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            say(Event::Wrote(token.epoch().get()));
        }
        Err(e) => refused(e)?,
    }
    Ok(())
}

/// A fenced write on PostgreSQL: an insert into `candidate_writes`, checked
/// by the election's fence in the same transaction.
async fn postgres_write(
    election: &election_postgres::PostgresElection,
    resource: &str,
    token: Token,
    identity: &str,
) -> Result<(), BoxError> {
    let resource = ResourceName::new(resource)?;
    let mut tx = election.pool().begin().await?;
    match election.fence().advance_in(&mut tx, &resource, token).await {
        Ok(_) => {
            sqlx::query("INSERT INTO candidate_writes (epoch, identity) VALUES ($1, $2)")
                .bind(token.get_i64())
                .bind(identity)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            say(Event::Wrote(token.epoch().get()));
        }
        Err(e) => refused(e)?,
    }
    Ok(())
}

/// A fence's refusal of a write: said as `Refused`; any other error is
/// the caller's.
fn refused(e: fencing::Error) -> Result<(), BoxError> {
    match e {
        fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        } => {
            say(Event::Refused {
                presented: presented.epoch().get(),
                mark: high_water_mark.epoch().get(),
            });
            Ok(())
        }
        e => Err(e.into()),
    }
}

fn candidate(args: &Args, backend: &Backend, name: &str) -> Result<Candidate<AnyClaim>, BoxError> {
    // On stderr (the test's output): a candidate silent after
    // "campaigning" says why (ADR 0084).
    let identity = args.identity.clone();
    let candidate = backend
        .candidate(name, &args.identity)?
        .on_retry(move |e| eprintln!("{identity}: campaign retries after: {e}"));
    Ok(match args.poll {
        Some(poll) => candidate.with_poll_interval(poll)?,
        None => candidate,
    })
}

/// `--many N`: tries each of `e0` .. `e<N-1>` once (with `--name P`:
/// `P0` .. `P<N-1>`), `--at-once K` of them at a time (a NATS win of a
/// fresh key waits out the failover grace: one after another, 100 names
/// would take 100 graces), and says `won <count>`; then says `lost <name>:
/// <reason>` for each term it loses, answers `held` with `held <count>
/// <age_ns>` (see [`held`]), and resigns every term still held on
/// `resign` or at end of input (a lost one is only closed), then says
/// `resigned <mono_ns>`.
async fn many(args: &Args, backend: &Backend, n: usize) -> Result<ExitCode, BoxError> {
    let prefix = args.name.as_deref().unwrap_or("e");
    let mut terms = Vec::new();
    let mut tries = tokio::task::JoinSet::new();
    for i in 0..n {
        let candidate = candidate(args, backend, &format!("{prefix}{i}"))?;
        tries.spawn(async move { candidate.try_campaign().await });
        if tries.len() >= args.at_once || i + 1 == n {
            while let Some(tried) = tries.join_next().await {
                terms.extend(tried??);
            }
        }
    }
    say(Event::Won(terms.len()));
    // One task per term, each ending with its loss (a resign's too: the
    // tasks are dropped before the resigns).
    let mut losses = tokio::task::JoinSet::new();
    for t in &terms {
        let lease = t.lease();
        losses.spawn(async move {
            let lost = lease.lost().await;
            format!("{}: {}", lease.name(), lost.reason)
        });
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        tokio::select! {
            Some(Ok(loss)) = losses.join_next() => say(Event::Lost(loss)),
            line = lines.next_line() => match line? {
                Some(l) if l.parse() == Ok(Command::Held) => say(held(&terms)),
                Some(l) if l.parse() == Ok(Command::Exit) => std::process::exit(0),
                Some(l) if l.parse() != Ok(Command::Resign) => {}
                _ => break,
            },
        }
    }
    losses.abort_all();
    for t in &terms {
        match t.resign().await {
            Ok(()) | Err(election_core::Error::Lost(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    say(Event::Resigned(mono_ns()));
    Ok(ExitCode::SUCCESS)
}

/// `held <count> <age_ns>`: how many of `terms` are held now (no loss
/// reported, validity not passed), and the time since the least recently
/// renewed of them last had a renewal land (or was won; 0 if none
/// expires).
fn held(terms: &[Term<AnyClaim>]) -> Event {
    let live: Vec<&Term<AnyClaim>> = terms.iter().filter(|t| !t.is_lost()).collect();
    let oldest = live
        .iter()
        .filter_map(|t| match t.health_check(Duration::ZERO).check() {
            Health::Unhealthy {
                since_last_renewal, ..
            } => Some(since_last_renewal),
            _ => None,
        })
        .max()
        .unwrap_or(Duration::ZERO);
    Event::Held {
        count: live.len(),
        oldest_ns: u64::try_from(oldest.as_nanos()).unwrap_or(u64::MAX),
    }
}

/// `--set k1,k2,...`: a lease set asking every key; says `won <n>` each
/// time the number of keys it holds changes (looked at every millisecond);
/// closes the set on `resign` or at end of input.
async fn lease_set(args: &Args, backend: &Backend, keys: &[String]) -> Result<ExitCode, BoxError> {
    let set = backend.lease_set_polling(&args.identity, args.poll).await?;
    say(Event::Campaigning);
    for key in keys {
        set.ask(key).await?;
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut said = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let held = set.held_keys().len();
                if said != Some(held) {
                    say(Event::Won(held));
                    said = Some(held);
                }
            }
            line = lines.next_line() => match line? {
                Some(l) if l.parse() == Ok(Command::Exit) => std::process::exit(0),
                Some(l) if l.parse() != Ok(Command::Resign) => {}
                _ => break,
            },
        }
    }
    say(Event::Resigning(mono_ns()));
    set.close().await;
    say(Event::Resigned(mono_ns()));
    Ok(ExitCode::SUCCESS)
}

async fn run() -> Result<ExitCode, BoxError> {
    let args = parse()?;
    if let Some(unused) = args.url.unused_settings(&args.settings).first() {
        return Err(format!(
            "--{unused}-ms: the {} backend has no such setting",
            args.url.scheme()
        )
        .into());
    }
    let backend = args.url.open(&args.settings).await?;
    if let Some(election) = backend.downcast_ref::<election_sqlite::SqliteElection>() {
        sqlx::query("CREATE TABLE IF NOT EXISTS candidate_writes (epoch INTEGER NOT NULL, identity TEXT NOT NULL)")
            .execute(election.pool())
            .await?;
    }
    if let Some(election) = backend.downcast_ref::<election_postgres::PostgresElection>() {
        // Under a transaction-scoped advisory lock: concurrent `CREATE
        // TABLE IF NOT EXISTS` of one table can fail on PostgreSQL (a
        // duplicate key in `pg_type`) when many candidates start at once.
        let mut tx = election.pool().begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('candidate_writes', 0))")
            .execute(&mut *tx)
            .await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS candidate_writes (epoch BIGINT NOT NULL, identity TEXT NOT NULL, at BIGSERIAL)")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    if let Some(n) = args.many {
        return many(&args, &backend, n).await;
    }
    if let Some(keys) = &args.set {
        return lease_set(&args, &backend, keys).await;
    }
    let name = args.name.as_deref().unwrap_or_default();
    let candidate = candidate(&args, &backend, name)?;
    say(Event::Campaigning);
    let term = if args.once {
        match candidate.try_campaign().await? {
            Some(t) => t,
            None => {
                say(Event::NotElected);
                return Ok(ExitCode::from(EXIT_NOT_ELECTED));
            }
        }
    } else {
        candidate.campaign().await?
    };
    say(Event::Elected {
        epoch: term.epoch().get(),
        at: mono_ns(),
    });
    // Taken once: a write "in flight" across a pause still carries it.
    let token = Token::issue(&term)?;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut lost = false;
    loop {
        tokio::select! {
            biased;
            l = term.lost(), if !lost => {
                say(Event::Lost(l.reason.to_string()));
                lost = true;
            }
            line = lines.next_line() => {
                // Before acting: a validity that ran out while this process
                // was stopped is a loss now (`is_lost` checks the deadline
                // itself; a fresh `lost()` timer may not have fired yet
                // when the runtime resumes), reported before anything else.
                if !lost && term.is_lost() {
                    say(Event::Lost(term.lost().await.reason.to_string()));
                    lost = true;
                }
                let command = match line? {
                    None if lost => return Ok(ExitCode::from(EXIT_LOST)),
                    None => Command::Resign,
                    Some(line) => match line.parse::<Command>() {
                        Ok(c) => c,
                        Err(e) => {
                            say(Event::Error(e.to_string()));
                            continue;
                        }
                    },
                };
                match command {
                    Command::Exit => std::process::exit(0),
                    Command::Epoch => say(Event::Epoch(term.epoch().get())),
                    Command::Confirm => match term.confirm().await {
                        Ok(()) => say(Event::Confirmed(term.epoch().get())),
                        Err(e) => say(Event::NotConfirmed(e.to_string())),
                    },
                    Command::Write(resource) => {
                        fenced_write(&backend, &resource, token, &args.identity).await?
                    }
                    Command::Resign => {
                        say(Event::Resigning(mono_ns()));
                        match term.resign().await {
                            Ok(()) => say(Event::Resigned(mono_ns())),
                            Err(election_core::Error::Lost(l)) => {
                                say(Event::Lost(l.reason.to_string()));
                                return Ok(ExitCode::from(EXIT_LOST));
                            }
                            Err(e) => return Err(e.into()),
                        }
                        return Ok(ExitCode::SUCCESS);
                    }
                    _ => say(Event::Error(format!("unsupported command {command}"))),
                }
            }
        }
    }
}
