//! The command of an `elect run` candidate in the torture suite's `--elect`
//! mode: the process `elect` starts once its term is won. It writes a
//! numbered record to the fenced resource every few milliseconds with the
//! term's token (`ELECTION_TOKEN`), recording every step in its history.
//!
//! ```text
//! torture-command --writer ID --history-dir DIR --resource SPEC --end-file PATH
//!     [--escape] [--ignore-term] [--write-every-ms N (default 20)]
//!     [--token-env VAR (default ELECTION_TOKEN)]
//! torture-command --unguarded-once --writer ID --history-dir DIR --resource SPEC
//! torture-command --late-token EPOCH --hold-ms N --writer ID --history-dir DIR --resource SPEC
//! ```
//!
//! It records `start <pid>` and `elected <epoch>` (the moment the term's
//! command started: the checker's start of the term) in
//! `DIR/candidate-ID.history` and says `elected <epoch> <mono_ns>` on
//! stdout; then every write: `write <seq> <epoch>`, stamped when the
//! attempt begins (CLOCK_MONOTONIC), then `ok`, `stale` or `error`. On
//! SIGTERM it finishes the write under way, records `resigned <epoch>`,
//! says so and exits 0; with `--ignore-term` it ignores SIGTERM (only
//! SIGKILL ends it).
//!
//! `--token-env VAR`: the term's token is read from `VAR` instead of
//! `ELECTION_TOKEN`: the `nested` fault's command runs under an inner
//! `elect run`, which sets `ELECTION_TOKEN` to the inner term's token, and
//! writes with the outer term's, passed on in `VAR`.
//!
//! `--escape`: before anything else it starts a worker that leaves the
//! way daemons do: fork, `setsid`, fork again, close every descriptor
//! (stdin, stdout and stderr too), ignore SIGTERM; the worker writes with
//! the same token as writer `IDd` (history `candidate-IDd.history`, no
//! `elected` line) until the run ends.
//!
//! Both stop writing once `--end-file` exists (the orchestrator creates it
//! when the run ends) or after ten minutes.
//!
//! `--unguarded-once`: one write with a token from
//! `election_core::unguarded` (history `unguarded`), then exit: the late
//! writer of the `fencefiles` and `fencerows` faults, whose token is lower
//! than every term's.
//!
//! `--late-token EPOCH --hold-ms N`: one guarded write with that token
//! (history `write 1 EPOCH`), holding the fence's lock for N ms before the
//! append, then exit: the writer inside the fence when the `fencefiles`
//! fault deletes its lock file and a later term writes.
//!
//! Errors: `error <message>` on stderr (when it still has one); exit code
//! 64 for bad usage, 2 for anything else.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use fencing::Token;
use torture::history::{self, CandidateEvent, HistoryWriter, error_chain, mono_ns, say};
use torture::orchestrate::ELECTION;
use torture::resource::{Mode, Resource, ResourceSpec};

/// Exit code for bad usage.
const USAGE: u8 = 64;
/// The longest a command or its worker writes if the end file never
/// comes (the orchestrator died).
const MAX_LIFE: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Args {
    writer: String,
    dir: PathBuf,
    resource: ResourceSpec,
    end_file: Option<PathBuf>,
    escape: bool,
    ignore_term: bool,
    unguarded_once: bool,
    late_token: Option<Token>,
    hold: Duration,
    every: Duration,
    token_env: String,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut writer, mut dir, mut resource, mut end_file) = (None, None, None, None);
    let (mut escape, mut ignore_term, mut unguarded_once) = (false, false, false);
    let mut every = Duration::from_millis(20);
    let (mut late_token, mut hold) = (None, Duration::ZERO);
    let mut token_env = "ELECTION_TOKEN".to_owned();
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--writer" => writer = Some(value()?),
            "--history-dir" => dir = Some(PathBuf::from(value()?)),
            "--resource" => {
                resource = Some(
                    value()?
                        .parse::<ResourceSpec>()
                        .map_err(|e| e.to_string())?,
                )
            }
            "--end-file" => end_file = Some(PathBuf::from(value()?)),
            "--write-every-ms" => {
                let v = value()?;
                every = Duration::from_millis(
                    v.parse()
                        .map_err(|_| format!("--write-every-ms: bad milliseconds {v:?}"))?,
                )
            }
            "--late-token" => {
                let v = value()?;
                late_token = Some(
                    v.parse::<Token>()
                        .map_err(|e| format!("--late-token {v:?}: {e}"))?,
                )
            }
            "--hold-ms" => {
                let v = value()?;
                hold = Duration::from_millis(
                    v.parse()
                        .map_err(|_| format!("--hold-ms: bad milliseconds {v:?}"))?,
                )
            }
            "--token-env" => token_env = value()?,
            "--escape" => escape = true,
            "--ignore-term" => ignore_term = true,
            "--unguarded-once" => unguarded_once = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let writer = writer.ok_or("--writer is required")?;
    if writer.is_empty() || writer.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("--writer {writer:?} must be a non-empty word"));
    }
    if every.is_zero() {
        return Err("--write-every-ms must be at least 1".into());
    }
    Ok(Args {
        writer,
        dir: dir.ok_or("--history-dir is required")?,
        resource: resource.ok_or("--resource is required")?,
        end_file,
        escape,
        ignore_term,
        unguarded_once,
        late_token,
        hold,
        every,
        token_env,
    })
}

/// SIGTERM ignored from now on (also in processes forked after).
#[allow(unsafe_code)]
fn ignore_sigterm() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: SIG_IGN installs no handler code; called before any thread
    // of this process exists.
    unsafe {
        let _ = signal(Signal::SIGTERM, SigHandler::SigIgn);
    }
}

/// Closes every descriptor of this process (a daemon's step).
fn close_every_descriptor() {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_else(|_| (0..1024).collect());
    for fd in fds {
        let _ = nix::unistd::close(fd);
    }
}

/// In the calling process: `Some(())` in the escaped worker (fork,
/// `setsid`, fork, every descriptor closed, SIGTERM ignored), `None` in
/// the original process once the first child has exited.
#[allow(unsafe_code)]
fn escape() -> Result<Option<()>, String> {
    use nix::unistd::{ForkResult, fork, setsid};
    // SAFETY: called before any thread of this process exists (no runtime
    // yet), so the child may run any code.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Parent { child } => {
            let _ = nix::sys::wait::waitpid(child, None);
            Ok(None)
        }
        ForkResult::Child => {
            let _ = setsid();
            // SAFETY: still single-threaded.
            match unsafe { fork() } {
                Ok(ForkResult::Child) => {
                    close_every_descriptor();
                    ignore_sigterm();
                    Ok(Some(()))
                }
                // The middle process exits at once: the worker is
                // orphaned, as a daemon is.
                _ => std::process::exit(0),
            }
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))
}

fn history(args: &Args, writer: &str) -> Result<HistoryWriter, String> {
    let path = args.dir.join(history::candidate_file_name(writer));
    HistoryWriter::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// The write loop of the command (`announce`: records `elected` first) or
/// of its escaped worker.
async fn write_loop(
    args: &Args,
    writer: &str,
    token: Token,
    announce: bool,
    honour_term: bool,
) -> Result<(), String> {
    let mut term = if honour_term {
        Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| format!("SIGTERM handler: {e}"))?,
        )
    } else {
        None
    };
    let log = history(args, writer)?;
    let record = |at: Option<u64>, event: &CandidateEvent| {
        log.record_at(at, event)
            .map_err(|e| format!("cannot write {}: {e}", log.path().display()))
    };
    let epoch = token.epoch().get();
    record(
        None,
        &CandidateEvent::Start {
            pid: std::process::id(),
        },
    )?;
    if announce {
        let at = record(None, &CandidateEvent::Elected { epoch })?;
        say(&format!("elected {epoch} {at}"));
    }
    let resource = Resource::open(&args.resource, Mode::Safe)
        .await
        .map_err(|e| error_chain(&e))?;
    let started = Instant::now();
    let mut seq = 0;
    loop {
        if args.end_file.as_ref().is_some_and(|f| f.exists()) || started.elapsed() > MAX_LIFE {
            return Ok(());
        }
        seq += 1;
        // The attempt's time: before the resource is touched.
        record(Some(mono_ns()), &CandidateEvent::Write { seq, epoch })?;
        let outcome = resource.write(writer, seq, token).await;
        record(None, &outcome.event(seq, epoch))?;
        let pause = tokio::time::sleep(args.every);
        match term.as_mut() {
            Some(term) => tokio::select! {
                biased;
                _ = term.recv() => {
                    let at = record(None, &CandidateEvent::Resigned { epoch })?;
                    say(&format!("resigned {epoch} {at}"));
                    return Ok(());
                }
                _ = pause => {}
            },
            None => pause.await,
        }
    }
}

/// One unguarded write, then exit.
async fn unguarded_once(args: &Args) -> Result<(), String> {
    let log = history(args, &args.writer)?;
    let resource = Resource::open(&args.resource, Mode::Safe)
        .await
        .map_err(|e| error_chain(&e))?;
    let written = election_core::unguarded(
        ELECTION,
        "torture: a late writer with a token below every term's",
        async |write_token| {
            let token = Token::from(&write_token);
            let epoch = token.epoch().get();
            log.record(&CandidateEvent::Unguarded { seq: 1, epoch })?;
            let outcome = resource.write(&args.writer, 1, token).await;
            log.record(&outcome.event(1, epoch))?;
            Ok::<(), std::io::Error>(())
        },
    )
    .await
    .map_err(|e| error_chain(&e))?;
    written.map_err(|e| format!("cannot write {}: {e}", log.path().display()))
}

/// One guarded write with `token`, holding the fence for `--hold-ms`.
async fn late_write(args: &Args, token: Token) -> Result<(), String> {
    let log = history(args, &args.writer)?;
    let resource = Resource::open(&args.resource, Mode::Safe)
        .await
        .map_err(|e| error_chain(&e))?;
    let epoch = token.epoch().get();
    let io = |e: std::io::Error| format!("cannot write {}: {e}", log.path().display());
    log.record(&CandidateEvent::Write { seq: 1, epoch })
        .map_err(io)?;
    let outcome = resource
        .write_holding(&args.writer, 1, token, args.hold)
        .await;
    log.record(&outcome.event(1, epoch)).map_err(io)?;
    Ok(())
}

fn run(args: Args) -> Result<(), String> {
    if args.unguarded_once {
        return runtime()?.block_on(unguarded_once(&args));
    }
    if let Some(token) = args.late_token {
        return runtime()?.block_on(late_write(&args, token));
    }
    let var = &args.token_env;
    let token: Token = std::env::var(var)
        .map_err(|_| format!("{var} is not set: run me under `elect run`"))?
        .parse()
        .map_err(|e| format!("{var}: {e}"))?;
    if args.ignore_term {
        ignore_sigterm();
    }
    if args.escape && escape()?.is_some() {
        // The escaped worker: no descriptor, no SIGTERM, its own session.
        let writer = format!("{}d", args.writer);
        return runtime()?.block_on(write_loop(&args, &writer, token, false, false));
    }
    let honour = !args.ignore_term;
    runtime()?.block_on(write_loop(&args, &args.writer, token, true, honour))
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error {e}");
            return ExitCode::from(USAGE);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_command_line() {
        let a = parse(
            [
                "--writer",
                "c1.2",
                "--history-dir",
                "/tmp/run",
                "--resource",
                "file:/tmp/run/resource",
                "--end-file",
                "/tmp/run/end",
                "--escape",
                "--ignore-term",
            ]
            .iter()
            .map(|s| s.to_string()),
        )
        .unwrap();
        assert!(a.escape && a.ignore_term && !a.unguarded_once);
        assert_eq!(a.writer, "c1.2");
        assert_eq!(a.every, Duration::from_millis(20));
        assert_eq!(a.token_env, "ELECTION_TOKEN");
        let b = parse(
            [
                "--writer",
                "c1.2",
                "--history-dir",
                "/tmp/run",
                "--resource",
                "file:/tmp/run/resource",
                "--token-env",
                "OUTER",
            ]
            .iter()
            .map(|s| s.to_string()),
        )
        .unwrap();
        assert_eq!(b.token_env, "OUTER");
        assert!(parse(["--writer", "a b"].iter().map(|s| s.to_string())).is_err());
        assert!(parse(["--bogus"].iter().map(|s| s.to_string())).is_err());
    }
}
