//! A small candidate process for the SQLite backend, driven over stdin and
//! stdout. The multi-process tests and `cargo xtask bench` use it.
//!
//! ```text
//! election-sqlite-candidate --db PATH --name NAME --identity ID
//!     [--ttl-ms N] [--renew-ms N] [--poll-ms N] [--try] [--many N]
//! ```
//!
//! Events on stdout, one per line: `campaigning`, `elected <epoch>
//! <mono_ns>`, `not-elected` (with `--try`, exit code 3), `lost <reason>`,
//! `wrote <epoch>`, `refused <presented> <mark>`, `resigning <mono_ns>`,
//! `resigned <mono_ns>`, `won <count>` (with `--many`), `error <message>`
//! (exit code 2). `<mono_ns>` is `CLOCK_MONOTONIC` in nanoseconds, the same
//! clock in every process of the host.
//!
//! Commands on stdin: `resign`; `exit` (exit at once, without resigning);
//! `write <resource>`: a fenced write (an insert into `candidate_writes`,
//! checked with the token taken when elected, in one transaction), made
//! even after a loss, to show the fence refusing a deposed leader. A loss
//! does not end the process; end of input resigns (or exits with code 4
//! after a loss).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use election_sqlite::{SqliteElection, SqliteFence, SqliteOptions};
use fencing::{ResourceName, Token};
use sqlx::Connection;
use tokio::io::AsyncBufReadExt;

fn mono_ns() -> u128 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u128 * 1_000_000_000 + t.tv_nsec() as u128
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct Args {
    db: String,
    name: String,
    identity: String,
    ttl: Duration,
    renew: Duration,
    poll: Duration,
    once: bool,
    many: Option<usize>,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut a = Args {
        db: String::new(),
        name: String::new(),
        identity: election_core::Identity::for_this_process().to_string(),
        ttl: election_sqlite::DEFAULT_TTL,
        renew: election_sqlite::DEFAULT_RENEW_INTERVAL,
        poll: Duration::from_millis(250),
        once: false,
        many: None,
    };
    let ms = |v: Option<String>| -> Result<Duration, String> {
        let v = v.ok_or("a value is missing")?;
        v.parse()
            .map(Duration::from_millis)
            .map_err(|_| format!("bad milliseconds {v:?}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--db" => a.db = args.next().ok_or("--db needs a path")?,
            "--name" => a.name = args.next().ok_or("--name needs a value")?,
            "--identity" => a.identity = args.next().ok_or("--identity needs a value")?,
            "--ttl-ms" => a.ttl = ms(args.next())?,
            "--renew-ms" => a.renew = ms(args.next())?,
            "--poll-ms" => a.poll = ms(args.next())?,
            "--try" => a.once = true,
            "--many" => {
                let n = args.next().ok_or("--many needs a count")?;
                a.many = Some(n.parse().map_err(|_| format!("bad count {n:?}"))?);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.db.is_empty() || (a.name.is_empty() && a.many.is_none()) {
        return Err("--db and --name are required".into());
    }
    Ok(a)
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
            say(&format!("error {msg}"));
            ExitCode::from(2)
        }
    }
}

async fn fenced_write(
    election: &SqliteElection,
    resource: &str,
    token: Token,
    identity: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let resource = ResourceName::new(resource)?;
    let mut conn = election.pool().acquire().await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    match SqliteFence::advance_in(&mut tx, &resource, token).await {
        Ok(_) => {
            sqlx::query("INSERT INTO candidate_writes (epoch, identity) VALUES (?1, ?2)")
                .bind(i64::try_from(token.epoch().get())?)
                .bind(identity)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            say(&format!("wrote {token}"));
        }
        Err(fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        }) => {
            say(&format!("refused {presented} {high_water_mark}"));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

async fn run() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let args = parse()?;
    let options = SqliteOptions::new(args.ttl, args.renew)?;
    let election = SqliteElection::open(&args.db, options).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS candidate_writes (epoch INTEGER NOT NULL, identity TEXT NOT NULL)")
        .execute(election.pool())
        .await?;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    if let Some(n) = args.many {
        let mut terms = Vec::new();
        for i in 0..n {
            let c = election.candidate(&format!("e{i}"), &args.identity)?;
            if let Some(t) = c.try_campaign().await? {
                terms.push(t);
            }
        }
        say(&format!("won {}", terms.len()));
        while let Some(line) = lines.next_line().await? {
            if line.trim() == "resign" {
                break;
            }
        }
        for t in &terms {
            t.resign().await?;
        }
        say(&format!("resigned {}", mono_ns()));
        return Ok(ExitCode::SUCCESS);
    }
    let candidate = election
        .candidate(&args.name, &args.identity)?
        .with_poll_interval(args.poll)?;
    say("campaigning");
    let term = if args.once {
        match candidate.try_campaign().await? {
            Some(t) => t,
            None => {
                say("not-elected");
                return Ok(ExitCode::from(3));
            }
        }
    } else {
        candidate.campaign().await?
    };
    say(&format!("elected {} {}", term.epoch(), mono_ns()));
    // Taken once: a write "in flight" across a pause still carries it.
    let token = Token::issue(&term)?;
    let mut lost = false;
    loop {
        tokio::select! {
            biased;
            l = term.lost(), if !lost => {
                say(&format!("lost {}", l.reason));
                lost = true;
            }
            line = lines.next_line() => {
                let line = line?;
                let mut words = line.as_deref().unwrap_or("").split_whitespace();
                match (line.is_some(), words.next()) {
                    (true, Some("exit")) => std::process::exit(0),
                    (true, Some("write")) => {
                        let resource = words.next().unwrap_or("resource");
                        fenced_write(&election, resource, token, &args.identity).await?;
                    }
                    (false, _) if lost => return Ok(ExitCode::from(4)),
                    (false, _) | (true, Some("resign")) => {
                        say(&format!("resigning {}", mono_ns()));
                        match term.resign().await {
                            Ok(()) => say(&format!("resigned {}", mono_ns())),
                            Err(election_core::Error::Lost(l)) => {
                                say(&format!("lost {}", l.reason));
                                return Ok(ExitCode::from(4));
                            }
                            Err(e) => return Err(e.into()),
                        }
                        return Ok(ExitCode::SUCCESS);
                    }
                    (true, other) => say(&format!("error unknown command {other:?}")),
                }
            }
        }
    }
}
