//! A small candidate process for the NATS backend, driven over stdin and
//! stdout. The fault tests and `cargo xtask bench` use it.
//!
//! ```text
//! election-nats-candidate --url URLS --name NAME --identity ID
//!     [--ttl-ms N] [--grace-ms N] [--replicas N] [--poll-ms N] [--try]
//! ```
//!
//! Events on stdout, one per line: `campaigning`, `elected <epoch>
//! <mono_ns>`, `not-elected` (with `--try`, exit code 3), `lost <reason>`,
//! `confirmed <epoch>`, `not-confirmed <reason>`, `resigning <mono_ns>`,
//! `resigned <mono_ns>`, `error <message>` (exit code 2). `<mono_ns>` is
//! `CLOCK_MONOTONIC` in nanoseconds, the same clock in every process of the
//! host.
//!
//! Commands on stdin: `resign`; `exit` (exit at once, without resigning);
//! `confirm` (the commit-point check). A loss does not end the process; end
//! of input resigns (or exits with code 4 after a loss).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use election_nats::{NatsElection, NatsOptions};
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
    url: String,
    name: String,
    identity: String,
    options: NatsOptions,
    poll: Duration,
    once: bool,
}

fn parse() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut url, mut name, mut identity) = (None, None, None);
    let (mut ttl, mut grace, mut replicas, mut poll, mut once) =
        (None, None, 1, Duration::from_millis(250), false);
    let ms = |v: Option<String>| -> Result<Duration, String> {
        let v = v.ok_or("a value is missing")?;
        v.parse()
            .map(Duration::from_millis)
            .map_err(|_| format!("bad milliseconds {v:?}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--url" => url = args.next(),
            "--name" => name = args.next(),
            "--identity" => identity = args.next(),
            "--ttl-ms" => ttl = Some(ms(args.next())?),
            "--grace-ms" => grace = Some(ms(args.next())?),
            "--poll-ms" => poll = ms(args.next())?,
            "--replicas" => replicas = args.next().ok_or("--replicas needs a value")?.parse()?,
            "--try" => once = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let mut options =
        NatsOptions::new(ttl.unwrap_or(election_nats::DEFAULT_TTL))?.replicas(replicas)?;
    if let Some(g) = grace {
        options = options.failover_grace(g)?;
    }
    Ok(Args {
        url: url.ok_or("--url is required")?,
        name: name.ok_or("--name is required")?,
        identity: identity
            .unwrap_or_else(|| election_core::Identity::for_this_process().to_string()),
        options,
        poll,
        once,
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
            say(&format!("error {msg}"));
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let args = parse()?;
    let election = NatsElection::connect(&args.url, args.options).await?;
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
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
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
                match (line.is_some(), line.as_deref().map(str::trim)) {
                    (true, Some("exit")) => std::process::exit(0),
                    (true, Some("confirm")) => match term.confirm().await {
                        Ok(()) => say(&format!("confirmed {}", term.epoch())),
                        Err(e) => say(&format!("not-confirmed {e}")),
                    },
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
