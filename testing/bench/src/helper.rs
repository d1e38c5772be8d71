//! `election-bench helper lock <path>`: a bare OFD lock holder, the floor of
//! the cross-process rows.
//!
//! It speaks the same line protocol (`candidate_testkit::protocol`) as
//! `election-candidate --backend file://`, minus the election: `campaigning` before it blocks in `F_OFD_SETLKW`,
//! `elected 0 <mono_ns>` when it has the lock, then on stdin `resign` (or
//! EOF) prints `resigning <mono_ns>`, unlocks, prints `resigned <mono_ns>`
//! and exits 0; `exit` exits at once, leaving the kernel to free the lock.
//!
//! `election-bench helper postgres ...` is the PostgreSQL group's candidate
//! (see [`super::postgres::helper`]).
//!
//! `election-bench helper pg-start URL CHILD...` is the floor of the CLI
//! rows' PostgreSQL start (see [`super::postgres::start_floor`]).
//!
//! `election-bench helper print` is the CLI rows' child: it prints its
//! `CLOCK_MONOTONIC` stamp and waits for a signal (see [`super::cli`]).
//!
//! `election-bench helper replica` is the rolling-deploy rows' child: its
//! stamps at its start and at SIGTERM (see [`super::rolling`]).

use std::io::{BufRead, Write};
use std::path::Path;

use candidate_testkit::protocol::{Command, Event};

use super::ofd::{OfdFile, mono_ns};
use crate::Result;

/// Runs the helper with its arguments (after `helper`).
pub(crate) fn run(args: &[String]) -> Result<()> {
    let path = match args {
        [mode, path] if mode == "lock" => Path::new(path),
        [mode] if mode == "print" => return super::cli::print_child(),
        [mode] if mode == "replica" => return super::rolling::replica_child(),
        [mode, rest @ ..] if mode == "postgres" => return super::postgres::helper(rest),
        [mode, rest @ ..] if mode == "pg-start" => return super::postgres::start_floor(rest),
        _ => return Err("usage: election-bench helper (lock <path> | print | replica | postgres URL NAME TTL_MS RENEW_MS POLL_MS | pg-start URL CHILD...)".into()),
    };
    let lock = OfdFile::open(path)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", Event::Campaigning)?;
    out.flush()?;
    lock.lock_wait()?;
    let got = mono_ns();
    writeln!(out, "{}", Event::Elected { epoch: 0, at: got })?;
    out.flush()?;

    let stdin = std::io::stdin().lock();
    for line in stdin.lines() {
        let line = line?;
        match line.trim().parse::<Command>() {
            Ok(Command::Resign) => break,
            Ok(Command::Exit) => std::process::exit(0),
            _ if line.trim().is_empty() => {}
            _ => return Err(format!("election-bench helper: unknown command {line:?}").into()),
        }
    }
    // `resign` or EOF: release in the open, like a resigning candidate.
    writeln!(out, "{}", Event::Resigning(mono_ns()))?;
    out.flush()?;
    lock.unlock()?;
    writeln!(out, "{}", Event::Resigned(mono_ns()))?;
    out.flush()?;
    Ok(())
}
