//! `elect`: run any command as a singleton from the shell, and see who
//! leads, on a directory, a SQLite database or NATS JetStream.
//!
//! ```text
//! elect run [--backend URL] --name NAME [--identity ID] [--ttl DUR]
//!           [--wait | --no-wait | --timeout DUR] [-v...]
//!           (-c SHELL_COMMAND | -- COMMAND [ARGS...])
//! elect leader [--backend URL] --name NAME [--json]
//! elect observe [--backend URL] --name NAME [--json] [--poll DUR]
//! elect repair-epoch [--backend file:///dir] --name NAME --epoch EPOCH
//! elect man [SUBCOMMAND | --dir DIR]
//! elect completions SHELL
//! ```
//!
//! NATS credentials come from `ELECT_NATS_*` variables or files as well as
//! the URL (see `secrets`).
//!
//! See `elect --help` and the README's `elect` section.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod backend;
mod cgroup;
mod cli;
mod command;
mod default_dir;
mod duration;
mod exit;
mod exporter;
mod lead_loop;
mod leader;
mod log;
mod man;
mod repair;
mod report;
mod retry;
mod run;
mod secrets;
mod slots;
mod supervisor;
mod timing;

use std::process::ExitCode;

use clap::Parser;

use crate::backend::Opened;
use crate::cli::{Cli, Command};
use crate::exit::Failure;
use crate::report::Reporter;

/// `leader` and `observe` only read: they accept the backend's own TTL.
fn observer() -> backend::Timing {
    backend::Timing {
        observer: true,
        ..Default::default()
    }
}

/// A read-only command's timing: only the TTL that names a NATS
/// election's bucket (see `election_nats::bucket_for_ttl`).
fn observer_with_ttl(ttl: Option<std::time::Duration>) -> backend::Timing {
    backend::Timing { ttl, ..observer() }
}

async fn dispatch(
    cli: &Cli,
    standby: Option<supervisor::Standby>,
    reporter: Reporter,
) -> Result<u8, Failure> {
    match &cli.command {
        Command::Run(args) => {
            let Some(standby) = standby else {
                return Err(Failure::new(exit::INTERNAL, "no supervisor was started"));
            };
            let url = args.common.url()?;
            // Before anything is opened or created: a command that cannot
            // run must not cost a campaign (127, 126).
            command::check(&args.command)?;
            // --timeout bounds the whole wait: for the server, then for
            // the term.
            let deadline = args.timeout.map(|d| tokio::time::Instant::now() + d);
            let backend = crate::retry::open_waiting(
                url.as_ref(),
                args.timing(),
                reporter,
                args.no_wait,
                deadline.zip(args.timeout),
            )
            .await?;
            let code = run::run(
                standby,
                &backend,
                &backend.shown(url.as_ref()),
                args,
                deadline,
                reporter,
            )
            .await;
            // The term has ended (or was never won): close the backend so
            // the next start does not replay this process's WAL (SQLite),
            // and so the server's processes of this one's connections end
            // after a successor's take, not during it (PostgreSQL, ADR 0086).
            backend.close(std::time::Duration::from_secs(2)).await;
            code
        }
        Command::Leader(args) => {
            let timing = observer_with_ttl(args.ttl);
            let backend = Opened::open(args.common.url()?.as_ref(), timing, None).await?;
            match args.slots {
                Some(n) => {
                    slots::leader(&backend, &args.common.name, n, args.common.json, reporter).await
                }
                None => {
                    leader::leader(&backend, &args.common.name, args.common.json, reporter).await
                }
            }
        }
        Command::Observe(args) => {
            let timing = observer_with_ttl(args.ttl);
            let backend = Opened::open(args.common.url()?.as_ref(), timing, None).await?;
            match args.slots {
                Some(n) => {
                    slots::observe(
                        &backend,
                        &args.common.name,
                        n,
                        args.common.json,
                        args.poll,
                        reporter,
                    )
                    .await
                }
                None => {
                    leader::observe(
                        &backend,
                        &args.common.name,
                        args.common.json,
                        args.poll,
                        reporter,
                    )
                    .await
                }
            }
        }
        Command::Man(args) => crate::man::man(args),
        Command::Completions(args) => crate::man::completions(args),
        Command::Revoke(args) => {
            // Nothing is created (no store: nothing to revoke), but the
            // store found is written to.
            let timing = backend::Timing {
                operator: true,
                ..observer()
            };
            let backend = Opened::open(args.common.url()?.as_ref(), timing, None).await?;
            let by = match &args.identity {
                Some(id) => election_core::Identity::new(id)
                    .map_err(|e| exit::Failure::config(exit::chain(&e)))?,
                None => election_core::Identity::for_this_process(),
            };
            let code = leader::revoke(
                &backend,
                &args.common.name,
                &by,
                &args.fence,
                args.common.json,
            )
            .await;
            backend.close(std::time::Duration::from_secs(2)).await;
            code
        }
        Command::Transfer(args) => {
            let timing = backend::Timing {
                operator: true,
                ..observer()
            };
            let backend = Opened::open(args.common.url()?.as_ref(), timing, None).await?;
            let config = |e: election_core::ConfigError| exit::Failure::config(exit::chain(&e));
            let by = match &args.identity {
                Some(id) => election_core::Identity::new(id).map_err(config)?,
                None => election_core::Identity::for_this_process(),
            };
            let to = election_core::Identity::new(&args.to).map_err(config)?;
            let code = leader::transfer(
                &backend,
                &args.common.name,
                &to,
                &by,
                args.wait,
                args.common.json,
            )
            .await;
            backend.close(std::time::Duration::from_secs(2)).await;
            code
        }
        Command::RepairEpoch(args) => {
            let backend = Opened::open(args.common.url()?.as_ref(), observer(), None).await?;
            backend.repair_epoch(&args.common.name, args.epoch, reporter)
        }
    }
}

fn main() -> ExitCode {
    // First, while this is the only thread: ELECT_NATS_* out of the
    // environment COMMAND inherits.
    secrets::Env::take();
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Command::Run(a) = &mut cli.command {
        a.take_shell();
    }
    let (style, verbose) = match &cli.command {
        Command::Run(a) => (a.common.style(), a.common.verbose),
        Command::Leader(a) => (a.common.style(), a.common.verbose),
        Command::Observe(a) => (a.common.style(), a.common.verbose),
        Command::RepairEpoch(a) => (a.common.style(), a.common.verbose),
        Command::Revoke(a) => (a.common.style(), a.common.verbose),
        Command::Transfer(a) => (a.common.style(), a.common.verbose),
        Command::Man(..) | Command::Completions(..) => (report::Style::Human, 0),
    };
    let reporter = Reporter::new(style);
    // `elect run`: the supervisor is forked now, while this is still the
    // only thread, and waits for the term (ADR 0031); winning then costs
    // one message to it, not the start of another process.
    let standby = match &cli.command {
        Command::Run(a) => match supervisor::Standby::fork(&a.command) {
            Ok(supervisor::Forked::Elect(standby)) => Some(standby),
            Ok(supervisor::Forked::Supervisor(code)) => return code,
            Err(e) => {
                reporter.error(
                    &format!("cannot start the command's supervisor: {e}"),
                    None,
                    exit::INTERNAL,
                );
                return ExitCode::from(exit::INTERNAL);
            }
        },
        _ => None,
    };
    log::install(style, verbose);
    // One thread is enough: the command runs under the supervisor (see
    // `supervisor`), which outlives elect and stops the command's tree.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            reporter.error(
                &format!("cannot start the runtime: {e}"),
                None,
                exit::INTERNAL,
            );
            return ExitCode::from(exit::INTERNAL);
        }
    };
    match runtime.block_on(dispatch(&cli, standby, reporter)) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            reporter.error(&secrets::redact(&f.message), f.hint.as_deref(), f.code);
            ExitCode::from(f.code)
        }
    }
}
