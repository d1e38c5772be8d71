//! `elect run`: campaign, run the command while elected, resign when it
//! exits; stop it when the term is lost.

use std::process::ExitStatus;
use std::time::Duration;

use election_core::{Candidate, Claim, Identity, Term};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::backend::{Backend, sqlite_failure};
use crate::cli::RunArgs;
use crate::exit::{self, Failure};
use crate::report::{Reporter, leader_text};

/// How the campaign waits.
#[derive(Clone, Copy, Debug)]
enum Waiting {
    Forever,
    No,
    AtMost(Duration),
}

/// A signal `elect` received, and where it came from.
#[derive(Clone, Copy, Debug)]
struct Received {
    signal: Signal,
    /// Sent by the kernel, not by a process: a terminal's Ctrl-C, Ctrl-\
    /// or hang-up, which the kernel sends to the whole foreground process
    /// group at once.
    from_terminal: bool,
}

/// The signals `elect` forwards to the command (and that end a campaign):
/// SIGINT, SIGTERM and SIGHUP, with their origin (`siginfo`'s `si_code`),
/// read by a thread of their own and handed over on a channel.
struct Signals {
    rx: tokio::sync::mpsc::UnboundedReceiver<Received>,
}

impl Signals {
    fn install() -> Result<Signals, Failure> {
        use signal_hook::iterator::SignalsInfo;
        use signal_hook::iterator::exfiltrator::WithOrigin;
        use signal_hook::low_level::siginfo::Cause;
        let failed =
            |e: std::io::Error| Failure::new(exit::INTERNAL, format!("signal handler: {e}"));
        let wanted = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP].map(|s| s as i32);
        let mut info = SignalsInfo::<WithOrigin>::new(wanted).map_err(failed)?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("elect-signals".into())
            .spawn(move || {
                for origin in info.forever() {
                    let Ok(signal) = Signal::try_from(origin.signal) else {
                        continue;
                    };
                    let from_terminal = matches!(origin.cause, Cause::Kernel);
                    if tx
                        .send(Received {
                            signal,
                            from_terminal,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            })
            .map_err(failed)?;
        Ok(Signals { rx })
    }

    /// The next of the three.
    async fn next(&mut self) -> Received {
        match self.rx.recv().await {
            Some(received) => received,
            // The reading thread is gone: no more signals come.
            None => std::future::pending().await,
        }
    }
}

/// Whether `child` is in `elect`'s own process group (a terminal's signal
/// to `elect`'s group then reached it too).
fn in_our_group(child: &tokio::process::Child) -> bool {
    let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
        return false;
    };
    nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))) == Ok(nix::unistd::getpgrp())
}

/// A command's exit status as a shell reports it: its code, or 128 + the
/// signal that killed it.
fn code_of(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(exit::INTERNAL),
        (None, Some(s)) => u8::try_from((128 + s) & 0xff).unwrap_or(exit::INTERNAL),
        (None, None) => exit::INTERNAL,
    }
}

/// `elect run`.
pub(crate) async fn run(
    backend: &Backend,
    shown: &str,
    args: &RunArgs,
    report: Reporter,
) -> Result<u8, Failure> {
    let identity = match &args.identity {
        Some(id) => Identity::new(id).map_err(|e| {
            Failure::config(exit::chain(&e))
                .hint("an identity is 1-200 bytes, no control characters")
        })?,
        None => Identity::for_this_process(),
    };
    let name = args.common.name.as_str();
    let waiting = match (args.no_wait, args.timeout) {
        (true, _) => Waiting::No,
        (false, Some(d)) => Waiting::AtMost(d),
        (false, None) => Waiting::Forever,
    };
    let config = |e: &(dyn std::error::Error + 'static)| Failure::config(exit::chain(e));
    match backend {
        Backend::File(e) => {
            let c = e
                .candidate(name, identity.as_str())
                .map_err(|e| config(&e))?;
            elected(c, shown, args, waiting, report).await
        }
        Backend::Sqlite(e) => {
            let c = e
                .candidate(name, identity.as_str())
                .map_err(sqlite_failure)?;
            elected(c, shown, args, waiting, report).await
        }
        Backend::Nats(e) => {
            let c = e
                .candidate(name, identity.as_str())
                .map_err(|e| config(&e))?;
            if e.replicas() < 2 && !e.options().is_single_replica_ok() {
                report.event(
                    "warning",
                    "warning: the NATS bucket has a single replica: a host crash or power loss \
                     can lose its last writes, and a later term can then reuse an epoch. Use \
                     ?replicas=3 on a cluster, or a server with `jetstream { sync_interval: \
                     always }`, and say ?single_replica_ok=1 to silence this",
                    serde_json::json!({ "replicas": e.replicas() }),
                );
            }
            elected(c, shown, args, waiting, report).await
        }
        Backend::NatsPending(..) | Backend::Absent(..) => Err(Failure::new(
            exit::INTERNAL,
            "a candidate's backend was opened as an observer's",
        )),
    }
}

async fn elected<C: Claim>(
    candidate: Candidate<C>,
    shown: &str,
    args: &RunArgs,
    waiting: Waiting,
    report: Reporter,
) -> Result<u8, Failure> {
    let name = candidate.claim().name().clone();
    let identity = candidate.claim().identity().clone();
    let retries = crate::retry::Retries::new(name.as_str(), report);
    let candidate = candidate.on_retry(retries.reporter());
    let mut signals = Signals::install()?;
    report.event(
        "campaigning",
        &format!("campaigning for {name} as {identity} on {shown}"),
        json!({ "name": name.as_str(), "identity": identity.as_str(), "backend": shown }),
    );
    let campaign = async {
        match waiting {
            Waiting::Forever => candidate.campaign().await.map(Some),
            Waiting::No => candidate.try_campaign().await,
            Waiting::AtMost(d) => candidate.campaign_timeout(d).await,
        }
    };
    let term = tokio::select! {
        term = campaign => term?,
        Received { signal: sig, .. } = signals.next() => {
            report.event("interrupted", &format!("{sig} while campaigning: giving up"), json!({ "name": name.as_str(), "signal": sig.as_str() }));
            return Ok(128 + sig as u8);
        }
    };
    let Some(term) = term else {
        let read = candidate.leader().await;
        if let Some(failure) = retries.gave_up(waiting_for(waiting), &read) {
            // The backend kept failing until --timeout ran out: say why.
            return Err(failure);
        }
        let leader = read.ok().flatten();
        report.event(
            "not-elected",
            &format!("not elected: {name} is {}", leader_text(leader.as_ref())),
            json!({ "name": name.as_str(), "leader": crate::report::leader_json(leader.as_ref()) }),
        );
        return Ok(args.conflict_exit_code);
    };
    report.event(
        "elected",
        &format!("elected: {name}, term {} as {identity}", term.epoch()),
        json!({ "name": name.as_str(), "identity": identity.as_str(), "epoch": term.epoch().get() }),
    );
    lead(&term, args, &mut signals, report).await
}

/// How long a campaign waited, for messages.
fn waiting_for(waiting: Waiting) -> Option<Duration> {
    match waiting {
        Waiting::AtMost(d) => Some(d),
        _ => None,
    }
}

/// Spawns the command with the term's environment; the kernel kills it if
/// `elect` dies (`PR_SET_PDEATHSIG`).
#[allow(unsafe_code)]
fn spawn<C: Claim>(term: &Term<C>, command: &[String]) -> Result<tokio::process::Child, Failure> {
    let (program, rest) = command
        .split_first()
        .ok_or_else(|| Failure::new(exit::USAGE, "no command to run"))?;
    let token =
        fencing::Token::issue(term).map_err(|e| Failure::new(exit::LOST, exit::chain(&e)))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(rest)
        .env("ELECTION_NAME", term.name().as_str())
        .env("ELECTION_EPOCH", term.epoch().to_string())
        .env("ELECTION_IDENTITY", term.identity().as_str())
        .env("ELECTION_TOKEN", token.to_string())
        .kill_on_drop(true);
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec; it only
    // makes two system calls (prctl, getppid) and builds errors from raw OS
    // codes, without allocating or taking locks.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            // elect died between fork and prctl: do not run unelected.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => exit::NOT_FOUND,
            std::io::ErrorKind::PermissionDenied => exit::CANNOT_EXECUTE,
            _ => exit::INTERNAL,
        };
        Failure::new(code, format!("cannot run {program:?}: {e}"))
    })
}

fn send(child: &tokio::process::Child, sig: Signal) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// Runs the command under the term.
async fn lead<C: Claim>(
    term: &Term<C>,
    args: &RunArgs,
    signals: &mut Signals,
    report: Reporter,
) -> Result<u8, Failure> {
    let name = term.name().as_str();
    let epoch = term.epoch().get();
    let mut child = match spawn(term, &args.command) {
        Ok(child) => child,
        Err(f) => {
            let _ = term.resign().await;
            return Err(f);
        }
    };
    report.event(
        "started",
        &format!(
            "started {:?} (pid {})",
            args.command.join(" "),
            child.id().unwrap_or(0)
        ),
        json!({ "name": name, "epoch": epoch, "pid": child.id() }),
    );
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(|e| Failure::new(exit::INTERNAL, format!("waiting for the command: {e}")))?;
                let code = code_of(status);
                report.event("exited", &format!("the command exited ({status})"), json!({ "name": name, "epoch": epoch, "exit_code": code }));
                match term.resign().await {
                    Ok(()) => report.event("resigned", &format!("resigned {name}, term {epoch}"), json!({ "name": name, "epoch": epoch })),
                    Err(e) => report.event("resign-failed", &format!("resigning failed: {} (the lease ends by itself)", exit::chain(&e)), json!({ "name": name, "epoch": epoch, "error": exit::chain(&e) })),
                }
                return Ok(code);
            }
            Received { signal: sig, from_terminal } = signals.next() => {
                if from_terminal && in_our_group(&child) {
                    // Ctrl-C and friends: the kernel sent it to the command
                    // too; forwarding it would deliver it twice.
                    report.event("not-forwarded", &format!("{sig} from the terminal reached the command too (same process group): not forwarding it"), json!({ "name": name, "signal": sig.as_str(), "from_terminal": true }));
                } else {
                    report.event("forwarded", &format!("forwarding {sig} to the command"), json!({ "name": name, "signal": sig.as_str() }));
                    send(&child, sig);
                }
            }
            lost = term.lost() => {
                report.event(
                    "lost",
                    &format!("lost {name}, term {epoch}: {}; stopping the command (SIGTERM, SIGKILL after {:?})", exit::chain(&lost), args.kill_grace),
                    json!({ "name": name, "epoch": epoch, "reason": exit::chain(&lost) }),
                );
                send(&child, Signal::SIGTERM);
                let status = match tokio::time::timeout(args.kill_grace, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        report.event("killed", "the command did not exit in time: SIGKILL", json!({ "name": name, "epoch": epoch }));
                        send(&child, Signal::SIGKILL);
                        child.wait().await
                    }
                };
                let code = status.map(code_of).unwrap_or(exit::INTERNAL);
                report.event("stopped", &format!("the command stopped (exit {code})"), json!({ "name": name, "epoch": epoch, "exit_code": code }));
                return Ok(args.lost_exit_code);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(code_of(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(code_of(ExitStatus::from_raw(15)), 143);
        assert_eq!(code_of(ExitStatus::from_raw(9)), 137);
    }
}
