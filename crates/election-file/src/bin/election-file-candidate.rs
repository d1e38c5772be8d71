//! A small candidate process for the file backend, driven over stdin and
//! stdout. The multi-process tests and `cargo xtask bench` use it.
//!
//! ```text
//! election-file-candidate --dir DIR --name NAME --identity ID [--try]
//! ```
//!
//! It prints one line per event: `campaigning`, `elected <epoch> <mono_ns>`,
//! `not-elected` (with `--try`, exit code 3), `resigning <mono_ns>`,
//! `resigned <mono_ns>`, `lost <reason>` (exit code 4), `error <message>`
//! (exit code 2). `<mono_ns>` is `CLOCK_MONOTONIC` in nanoseconds, which is
//! the same clock in every process of the host.
//!
//! It reads commands from stdin: `resign` (resign, then exit 0), `exit`
//! (exit at once without resigning: the kernel frees the lock). End of
//! input resigns.

use std::io::Write;
use std::process::ExitCode;

use election_core::Lease;
use election_file::FileElection;
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
    dir: String,
    name: String,
    identity: String,
    once: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut name, mut identity, mut once) = (None, None, None, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => dir = args.next(),
            "--name" => name = args.next(),
            "--identity" => identity = args.next(),
            "--try" => once = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        dir: dir.ok_or("--dir is required")?,
        name: name.ok_or("--name is required")?,
        identity: identity
            .unwrap_or_else(|| election_core::Identity::for_this_process().to_string()),
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
    let candidate = FileElection::new(&args.dir)?.candidate(&args.name, &args.identity)?;
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
    loop {
        tokio::select! {
            lost = term.lost() => {
                say(&format!("lost {}", lost.reason));
                return Ok(ExitCode::from(4));
            }
            line = lines.next_line() => match line?.as_deref().map(str::trim) {
                Some("exit") => std::process::exit(0),
                Some("resign") | None => {
                    say(&format!("resigning {}", mono_ns()));
                    term.resign().await?;
                    say(&format!("resigned {}", mono_ns()));
                    return Ok(ExitCode::SUCCESS);
                }
                Some("epoch") => say(&format!("epoch {}", term.lease().epoch())),
                Some(other) => say(&format!("error unknown command {other:?}")),
            }
        }
    }
}
