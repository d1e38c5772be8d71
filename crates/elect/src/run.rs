//! `elect run`: campaign, run the command while elected, resign when it
//! exits; stop it when the term is lost.

use std::os::fd::OwnedFd;
use std::time::Duration;

use election_core::{Claim, ElectionName, Identity, Lease, Term};
use nix::sys::signal::Signal;
use serde_json::json;

use election_core::Election;

use crate::backend::{Backend, Opened};
use crate::cgroup;
use crate::cli::RunArgs;
use crate::exit::{self, Failure};
use crate::lead_loop::{At, Command, Event, Input, KillTiming, LeadLoop, Said, Shown};
use crate::report::{Reporter, leader_text};
use crate::slots::Campaigner;
use crate::supervisor;

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

/// Whether process `pid` (the command) is in `elect`'s own process group (a terminal's signal
/// to `elect`'s group then reached it too).
fn in_our_group(pid: i32) -> bool {
    nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))) == Ok(nix::unistd::getpgrp())
}

/// `elect run`.
pub(crate) async fn run(
    standby: supervisor::Standby,
    backend: &Opened,
    shown: &str,
    args: &RunArgs,
    deadline: Option<tokio::time::Instant>,
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
        // What is left of --timeout after the backend was opened.
        (false, Some(d)) => Waiting::AtMost(deadline.map_or(d, |at| {
            at.saturating_duration_since(tokio::time::Instant::now())
        })),
        (false, None) => Waiting::Forever,
    };
    let config = |e: &(dyn std::error::Error + 'static)| Failure::config(exit::chain(e));
    let kill = KillTiming::of(backend, args)?;
    // Bound before the campaign: a busy port fails at once, not after a
    // win.
    let metrics = match args.metrics {
        Some(addr) => Some((
            crate::exporter::Exporter::bind(addr).await?,
            health_bound(backend),
        )),
        None => None,
    };
    let Opened::Ready(backend) = backend else {
        return Err(Failure::new(
            exit::INTERNAL,
            "a candidate's backend was opened as an observer's",
        ));
    };
    let place = store_place(backend, shown, &report).await;
    let c = Campaigner::new(
        name,
        args.slots,
        |n| backend.claim(n, identity.as_str()),
        |e| config(&e),
        |e| exit::failure(&e),
    )?;
    for warning in backend.warnings() {
        let text = format!("warning: {}", warning.text);
        let mut fields = serde_json::Map::new();
        for (key, value) in warning.values {
            fields.insert(key.to_owned(), json!(value));
        }
        fields.insert("message".to_owned(), json!(text));
        report.event("warning", &text, serde_json::Value::Object(fields));
    }
    elected(
        standby, c, shown, args, waiting, kill, backend, metrics, report, &place,
    )
    .await
}

/// What keys this election's cgroups on this host: the store that keeps
/// it, as the backend identifies it ([`election_core::StoreId`]), the same
/// for every spelling of the backend (a bind mount, `localhost` and
/// `127.0.0.1`, servers in another order). Where the backend cannot say,
/// the backend as written, with a warning: candidates that reach the
/// election another way then do not find this one's groups.
async fn store_place(backend: &Backend, shown: &str, report: &Reporter) -> String {
    match backend.store_id().await {
        Ok(id) => id.to_string(),
        Err(e) => {
            let text = format!(
                "warning: cannot identify the store of {shown} ({}): the command's cgroup is \
                 keyed by the backend as written, so a candidate that reaches this election \
                 another way (another path, host name or server order) does not end this \
                 term's leftover processes",
                exit::chain(&e)
            );
            report.event("warning", &text, json!({ "message": text, "store": null }));
            shown.to_owned()
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn elected<C: Claim>(
    standby: supervisor::Standby,
    candidate: Campaigner<C>,
    shown: &str,
    args: &RunArgs,
    waiting: Waiting,
    kill: KillTiming,
    backend: &Backend,
    metrics: Option<(crate::exporter::Exporter, Duration)>,
    report: Reporter,
    place: &str,
) -> Result<u8, Failure> {
    let name = candidate.name();
    let identity = candidate.identity();
    let retries = crate::retry::Retries::new(name.as_str(), report);
    // Said once, when the campaign first finds the name held: whom it waits for.
    let first_wait = std::sync::Arc::new(tokio::sync::Notify::new());
    let candidate = candidate
        .with_priority(args.priority.unwrap_or(0))
        .on_retry(retries.reporter())
        .on_wait({
            let first_wait = first_wait.clone();
            move || first_wait.notify_one()
        });
    // Served until elect exits (the runtime's end drops the task).
    if let Some((exporter, bound)) = metrics {
        let addr = exporter.local_addr();
        let shown = addr.map_or_else(|| "?".to_owned(), |a| a.to_string());
        report.event(
            "metrics",
            &format!("serving metrics on http://{shown}/metrics, /healthz and /leader"),
            json!({ "address": shown, "health_bound_ms": crate::report::duration_ms(bound) }),
        );
        exporter.serve(candidate.health_check(bound));
    }
    let mut signals = Signals::install()?;
    // With slots, a cgroup place per slot: each slot's terms end only
    // that slot's earlier terms on this host.
    let group_names = match candidate.slots() {
        None => vec![name.clone()],
        Some(n) => election_core::Slots::new(name.as_str(), n)
            .map(|s| s.slot_names())
            .unwrap_or_default(),
    };
    let mut opened = Vec::new();
    let mut unavailable = None;
    // Per slot: where the election's groups are, to look at them when
    // this run has no cgroup of its own.
    let mut seen = Vec::new();
    for n in &group_names {
        match cgroup::Election::open(None, place, n.as_str()) {
            Ok(g) => {
                seen.push(Some(g.seen()));
                opened.push(g);
            }
            Err(u) => {
                seen.push(u.seen);
                unavailable.get_or_insert(u.why);
            }
        }
    }
    let groups = match unavailable {
        None => Some(opened),
        Some(why) => {
            let text = format!(
                "warning: the command's processes get no cgroup ({why}): if elect and its \
                 supervisor are both killed or stopped (kill -9 of the process group, the OOM \
                 killer, Ctrl-Z, a frozen container), a process the command started that left \
                 its tree (setsid and a double fork, as daemons do) is not stopped before the \
                 next term on this host begins; only ELECTION_TOKEN, checked by the resource, \
                 refuses its writes. Run elect as root, or set {} to a writable cgroup v2 \
                 directory",
                cgroup::PARENT_ENV
            );
            report.event("warning", &text, json!({ "message": text, "cgroup": null }));
            None
        }
    };
    report.event(
        "campaigning",
        &format!("campaigning for {name} as {identity} on {shown}"),
        json!({ "name": name.as_str(), "identity": identity.as_str(), "backend": shown }),
    );
    let campaign = async {
        match waiting {
            Waiting::Forever => candidate.campaign(backend, false, None).await,
            Waiting::No => candidate.campaign(backend, true, None).await,
            Waiting::AtMost(d) => candidate.campaign(backend, false, Some(d)).await,
        }
    };
    // A run that waits says whom it waits for, once, when the campaign
    // first finds the name held (as --no-wait says it when it gives up).
    // Its read runs beside the campaign, never instead of polling it: a
    // campaign not polled holds up what it asked its backend (PostgreSQL:
    // its first wait's queue write, a request of the process's session)
    // and can make the read wait behind it. The read is dropped with the
    // loop: one not polled any more must not hold up what follows (the
    // term's renewals, the reads after a failure).
    let mut asked_waiting = false;
    let mut said_waiting = false;
    // A backend whose new terms may wait out a failover grace (NATS): once
    // a second while the campaign runs, a look whether this candidate won
    // the name and waits out the grace, said once.
    let mut grace_look = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut said_grace = !backend.may_be_pending();
    // --take-over: a look at once, then once a second, asking each new
    // term of another holder to hand the name to this candidate.
    let mut take_over = TakeOver {
        on: args.take_over || args.priority.is_some(),
        priority: args.priority.filter(|_| !args.take_over),
        asked: None,
        next: tokio::time::Instant::now()
            + if args.take_over {
                Duration::ZERO
            } else {
                args.prefer_after
            },
    };
    let mut campaign = Box::pin(campaign);
    let mut saying = Box::pin(say_waiting(&candidate, &report));
    let term = loop {
        tokio::select! {
            term = &mut campaign => break match term {
                Ok(term) => term,
                Err(e) => {
                    drop(saying);
                    // A failed step may have left a claim that the backend
                    // gives up in the background.
                    given_up(&candidate, &report).await;
                    return Err(crate::exit::campaign_failure(e));
                }
            },
            () = first_wait.notified(), if !asked_waiting => asked_waiting = true,
            () = &mut saying, if asked_waiting && !said_waiting => said_waiting = true,
            // Awaited here: the campaign is not polled meanwhile (a
            // PostgreSQL session takes back a connection it offered the
            // campaign after 2 ms, so the read is not held up).
            () = tokio::time::sleep_until(take_over.next), if take_over.on => {
                take_over.look(backend, &name, &identity, &report).await;
            }
            () = tokio::time::sleep_until(grace_look), if !said_grace => {
                said_grace = say_grace(backend, &name, &identity, &report).await;
                grace_look += Duration::from_secs(1);
            }
            Received { signal: sig, .. } = signals.next() => {
                report.event("interrupted", &format!("{sig} while campaigning: giving up"), json!({ "name": name.as_str(), "signal": sig.as_str() }));
                // The campaign is dropped: a claim it may have won (a NATS key
                // in its failover grace) is given up in the background; wait
                // for that before exiting, which would cut it off.
                drop(campaign);
                drop(saying);
                given_up(&candidate, &report).await;
                return Ok(128 + sig as u8);
            }
        }
    };
    drop(saying);
    let Some(won) = term else {
        given_up(&candidate, &report).await;
        let read = candidate.holders().await;
        let first = read
            .as_ref()
            .map(|h| h.first().cloned().flatten())
            .map_err(Clone::clone);
        if let Some(failure) = retries.gave_up(waiting_for(waiting).and(args.timeout), &first) {
            // The backend kept failing until --timeout ran out: say why.
            return Err(failure);
        }
        if let Some(n) = candidate.slots() {
            let held = read.as_ref().map_or(0, |h| h.iter().flatten().count());
            report.event(
                "not-elected",
                &format!("not elected: {held} of the {n} slots of {name} are held"),
                json!({ "name": name.as_str(), "slots": n, "held": held }),
            );
            return Ok(args.conflict_exit_code);
        }
        let leader = first.ok().flatten();
        report.event(
            "not-elected",
            &format!("not elected: {name} is {}", leader_text(leader.as_ref())),
            json!({ "name": name.as_str(), "leader": crate::report::leader_json(leader.as_ref()) }),
        );
        return Ok(args.conflict_exit_code);
    };
    let term = won.term;
    let slot = won.slot.map(|s| (name.clone(), s));
    match won.slot {
        None => report.event(
            "elected",
            &format!("elected: {name}, term {} as {identity}", term.epoch()),
            json!({ "name": name.as_str(), "identity": identity.as_str(), "epoch": term.epoch().get() }),
        ),
        Some(s) => report.event(
            "elected",
            &format!("elected: {name}, slot {s} ({}), term {} as {identity}", term.name(), term.epoch()),
            json!({ "name": name.as_str(), "slot": s, "identity": identity.as_str(), "epoch": term.epoch().get() }),
        ),
    }
    if let Some(value) = &args.value {
        // Published before COMMAND starts, conditional on the term (ADR
        // 0068); a term that cannot publish it is given up (dropped).
        if let Err(e) = term.proclaim(value).await {
            return Err(crate::exit::campaign_failure(e));
        }
        report.event(
            "proclaimed",
            &format!("proclaimed: {name}, term {}, value {value:?}", term.epoch()),
            json!({ "name": name.as_str(), "epoch": term.epoch().get(), "value": value }),
        );
    }
    let slot_index = won.slot.unwrap_or(0) as usize;
    if groups.is_none()
        && let Some(Some(seen)) = seen.get(slot_index)
        && let Some(code) = wait_out_leftovers(seen, &term, args, &report).await
    {
        return Ok(code);
    }
    // The file backend's lock, SQLite's same-host lock (ADR 0026): the
    // tree inherits it, so a successor on this host skips the TTL only
    // once the whole tree is gone, not when `elect` alone is killed.
    let lock = backend
        .inheritable_lock(term.name().as_str())
        .and_then(|p| locked_claim_file(&p));
    let group = groups.as_ref().and_then(|g| g.get(slot_index));
    lead(
        standby,
        &term,
        slot.as_ref(),
        args,
        kill,
        lock,
        &mut signals,
        report,
        group,
    )
    .await
}

/// For a winner without a cgroup of its own (not root, or
/// `ELECT_CGROUP_PARENT=none`), before its command starts: the processes
/// of an earlier term of the election that still run on this host in
/// that term's group (its `elect` was killed with them out of reach, the
/// group being another user's or this run having none) cannot be ended by
/// this run, so the command waits until they are gone, said on stderr
/// with the fix, rather than starting beside them. `Some(code)`: the term
/// ended meanwhile (lost, or a later term's group appeared), and elect
/// exits with it.
async fn wait_out_leftovers<C: Claim>(
    seen: &cgroup::Seen,
    term: &Term<C>,
    args: &RunArgs,
    report: &Reporter,
) -> Option<u8> {
    let name = term.name().as_str();
    let epoch = term.epoch().get();
    let mut told = false;
    loop {
        let beside = seen.beside(epoch);
        if let Some(later) = beside.later {
            report.event(
                "lost",
                &format!("lost {name}, term {epoch}: the later term {later} of {name} began on this host (its cgroup exists under {}), so this term is already over; the command is not started", seen.root().display()),
                json!({ "name": name, "epoch": epoch, "later_epoch": later }),
            );
            return Some(args.lost_exit_code);
        }
        let Some((old, group)) = beside.earlier.first() else {
            if told {
                report.event(
                    "leftover-gone",
                    &format!(
                        "the processes of the earlier term of {name} are gone: starting the command"
                    ),
                    json!({ "name": name, "epoch": epoch }),
                );
            }
            return None;
        };
        if !told {
            told = true;
            let text = format!(
                "processes of the earlier term {old} of {name} still run on this host in {},                  which this elect cannot end (it has no cgroup of its own): the command starts                  when they are gone. End them as their owner (echo 1 > {}/cgroup.kill), or run                  every candidate with the same cgroup setup (as root)",
                group.dir().display(),
                group.dir().display()
            );
            report.event(
                "leftover-waiting",
                &text,
                json!({ "name": name, "epoch": epoch, "leftover_epoch": old, "cgroup": group.dir().display().to_string() }),
            );
        }
        tokio::select! {
            l = term.lost() => {
                report.event(
                    "lost",
                    &format!("lost {name}, term {epoch}: {} (while waiting for the earlier term's processes); the command was not started", exit::chain(&l)),
                    json!({ "name": name, "epoch": epoch, "reason": exit::chain(&l) }),
                );
                return Some(args.lost_exit_code);
            }
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

/// The health check's bound for `backend`: halfway from the renew
/// interval to the lease's validity (TTL minus the margin), so one late
/// renewal is fine and a leader whose renewals stopped reads unhealthy
/// before its term is lost. The file backend's lock has no renewals
/// (always healthy while held).
fn health_bound(backend: &Opened) -> Duration {
    let timing = match backend {
        Opened::Ready(b) => b.lease_timing(),
        Opened::Pending(..) | Opened::Absent(..) => None,
    };
    let Some(t) = timing else {
        return Duration::from_secs(3600);
    };
    let validity = t.ttl.saturating_sub(t.margin);
    t.renew + validity.saturating_sub(t.renew) / 2
}

/// How long a campaign waited, for messages.
fn waiting_for(waiting: Waiting) -> Option<Duration> {
    match waiting {
        Waiting::AtMost(d) => Some(d),
        _ => None,
    }
}

/// Says that this candidate won `name` but waits out the backend's
/// failover grace before its term begins (NATS, after a vacancy that was
/// no clean release: the last holder may still act), if `holder` shows
/// it so (then `true`). Nothing otherwise, or if the read fails.
async fn say_grace(
    backend: &Backend,
    name: &ElectionName,
    identity: &Identity,
    report: &Reporter,
) -> bool {
    let Ok(Some(h)) = backend.holder(name.as_str()).await else {
        return false;
    };
    if !h.pending || &h.leader.identity != identity {
        return false;
    }
    let grace = backend.lease_timing().map_or(Duration::ZERO, |t| t.grace);
    report.event(
        "grace",
        &format!(
            "waiting out the failover grace ({grace:?}) before term {}: {name} had no clean \
             release, so its last holder may still be acting; the command starts after it",
            h.leader.epoch
        ),
        json!({ "name": name.as_str(), "epoch": h.leader.epoch.get(), "grace_ms": crate::report::duration_ms(grace) }),
    );
    true
}

/// Says whom a run that waits waits for, as `--no-wait` says it when it
/// gives up: the holder the backend shows (with `--slots`, how many slots
/// are held). Nothing if the read fails (the campaign says what fails) or
/// shows nobody (the name was freed meanwhile: the campaign takes it).
async fn say_waiting<C: Claim>(candidate: &Campaigner<C>, report: &Reporter) {
    let name = candidate.name();
    let Ok(holders) = candidate.holders().await else {
        return;
    };
    match candidate.slots() {
        Some(n) => {
            let held = holders.iter().flatten().count();
            report.event(
                "waiting",
                &format!("waiting: {held} of the {n} slots of {name} are held"),
                json!({ "name": name.as_str(), "slots": n, "held": held }),
            );
        }
        None => {
            let Some(leader) = holders.first().cloned().flatten() else {
                return;
            };
            let leader = Some(leader);
            report.event(
                "waiting",
                &format!("waiting: {name} is {}", leader_text(leader.as_ref())),
                json!({ "name": name.as_str(), "leader": crate::report::leader_json(leader.as_ref()) }),
            );
        }
    }
}

/// After a campaign that ended without a term (cancelled by a signal,
/// failed, timed out): waits (at most 5 s) until the backend no longer
/// shows this candidate holding the claim, so that a claim won an instant
/// before (and given up by the backend's `close`, in the background) is
/// free before `elect` exits.
async fn given_up<C: Claim>(candidate: &Campaigner<C>, report: &Reporter) {
    let me = candidate.identity();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    for one in candidate.candidates() {
        loop {
            match one.leader().await {
                Ok(Some(l)) if l.identity == me => {}
                Ok(_) => break,
                // The backend cannot answer: nothing to wait for that can be
                // seen (a claim left behind ends with its lease).
                Err(_) => break,
            }
            if tokio::time::Instant::now() >= deadline {
                report.event(
                    "not-given-up",
                    "could not see the claim given up; it ends by itself after the lease's TTL",
                    json!({ "name": one.claim().name().as_str() }),
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// `KillTiming`'s constructor from `elect run`'s arguments (its
/// arithmetic is the lead loop's, pure: see [`crate::lead_loop`]).
impl KillTiming {
    /// The kill grace and its bound for `backend`: `--kill-grace` if given
    /// (refused above the bound unless `--allow-late-kill`), else half the
    /// bound (10 s on the file backend).
    pub(crate) fn of(backend: &Opened, args: &RunArgs) -> Result<KillTiming, Failure> {
        let bound = match backend {
            Opened::Ready(b) => b.lease_timing().map(|t| t.overlap_bound()),
            Opened::Pending(..) | Opened::Absent(..) => None,
        };
        let grace = match (args.kill_grace, bound) {
            (Some(g), Some(b)) if g > b && !args.allow_late_kill => {
                return Err(Failure::config(format!(
                    "--kill-grace {g:?} is longer than the {b:?} between the end of this \
                     lease's known validity and the earliest moment another candidate can \
                     lead: COMMAND could run beside the next leader"
                ))
                .hint(format!(
                    "give --kill-grace {b:?} or less, raise --ttl (the bound is a tenth of the \
                     TTL, plus --grace on NATS), or accept the overlap with --allow-late-kill"
                )));
            }
            (Some(g), _) => g,
            (None, Some(b)) => b / 2,
            (None, None) => Duration::from_secs(10),
        };
        Ok(KillTiming::new(bound, grace, args.allow_late_kill))
    }
}

/// The supervisor process (see [`supervisor`]) and its socket.
struct Supervised {
    pid: nix::unistd::Pid,
    ctrl: std::fs::File,
    said: tokio::sync::mpsc::UnboundedReceiver<Said>,
    /// Lines not yet taken by the socket (a stopped supervisor does not
    /// read): sent before the next line.
    unsent: Vec<u8>,
}

impl Supervised {
    /// Tells the standby supervisor that the term is won: it starts
    /// COMMAND with the term's environment; `lock` (file backend: the
    /// locked claim file; SQLite: the same-host lock file) travels with
    /// the message and is inherited by the supervisor and COMMAND.
    fn start<C: Claim>(
        standby: supervisor::Standby,
        term: &Term<C>,
        slot: Option<&(ElectionName, u32)>,
        lock: Option<&OwnedFd>,
        group: Option<&cgroup::TermGroup>,
    ) -> Result<Supervised, Failure> {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let internal = |what: &str, e: &dyn std::fmt::Display| {
            Failure::new(
                exit::INTERNAL,
                format!("cannot start the command's supervisor: {what}: {e}"),
            )
        };
        let token =
            fencing::Token::issue(term).map_err(|e| Failure::new(exit::LOST, exit::chain(&e)))?;
        let (pid, sock) = standby.into_parts();
        let mut line = String::from("G ");
        match group {
            Some(g) => {
                use std::os::unix::ffi::OsStrExt;
                line.push_str(&supervisor::hex(g.dir().as_os_str().as_bytes()));
            }
            None => line.push('-'),
        }
        // With slots: the name given, and the slot held (the epoch and
        // token are the slot's election's).
        let shown_name = slot.map_or(term.name(), |(n, _)| n);
        let slot_var = slot.map(|(_, s)| ("ELECTION_SLOT", s.to_string()));
        for (key, value) in [
            ("ELECTION_NAME", shown_name.as_str().to_owned()),
            ("ELECTION_EPOCH", term.epoch().to_string()),
            ("ELECTION_IDENTITY", term.identity().as_str().to_owned()),
            ("ELECTION_TOKEN", token.to_string()),
        ]
        .into_iter()
        .chain(slot_var)
        {
            line.push(' ');
            line.push_str(&supervisor::hex(format!("{key}={value}").as_bytes()));
        }
        line.push('\n');
        let fds = lock.map(|l| [l.as_raw_fd()]);
        let rights: Vec<ControlMessage<'_>> =
            fds.iter().map(|f| ControlMessage::ScmRights(f)).collect();
        let mut ctrl = std::fs::File::from(sock);
        // The supervisor may be gone (killed while elect campaigned): then
        // this fails, or its end of file comes first on the reader below.
        let sent = loop {
            match sendmsg::<()>(
                ctrl.as_raw_fd(),
                &[std::io::IoSlice::new(line.as_bytes())],
                &rights,
                MsgFlags::MSG_NOSIGNAL,
                None,
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other,
            }
        };
        let sent = sent.map_err(|e| internal("send", &e))?;
        // The rest of a short write (the descriptor went with the first).
        ctrl.write_all(&line.as_bytes()[sent..])
            .map_err(|e| internal("send", &e))?;
        let reader = ctrl.try_clone().map_err(|e| internal("socket", &e))?;
        let (tx, said) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("elect-supervisor".into())
            .spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(reader).lines() {
                    let Ok(line) = line else { return };
                    let mut w = line.split_whitespace();
                    let (kind, n) = (w.next(), w.next().and_then(|n| n.parse::<i32>().ok()));
                    if kind == Some("U") {
                        let pids = line.trim_start_matches('U').trim().to_owned();
                        if tx.send(Said::Unkillable(pids)).is_err() {
                            return;
                        }
                        continue;
                    }
                    let said = match (kind, n) {
                        (Some("P"), Some(pid)) => Said::Started(pid),
                        (Some("F"), Some(errno)) => Said::CannotStart(errno),
                        (Some("W"), _) => Said::Watchdog,
                        (Some("Z"), _) => Said::Killed,
                        (Some("X"), Some(code)) => Said::Exited(code.to_le_bytes()[0]),
                        (Some("E"), _) => Said::Empty,
                        _ => continue,
                    };
                    if tx.send(said).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| internal("thread", &e))?;
        Ok(Supervised {
            pid,
            ctrl,
            said,
            unsent: Vec::new(),
        })
    }

    /// Waits for the supervisor to exit: after it said the tree is empty
    /// (it exits right after), or after its socket reached end of file.
    fn wait(&self) {
        supervisor::reap_one(self.pid);
    }

    /// Tells the supervisor `line` (short: one write to the socket).
    /// Never blocks: a supervisor that is stopped (or hung) stops reading,
    /// and a blocking write would then stop `elect` too once the socket's
    /// buffer is full. What the socket does not take waits in `unsent`
    /// (whole lines, in order) and goes first at the next line; `elect`
    /// acts on its own deadlines meanwhile (see `take_over`).
    fn tell(&mut self, line: &str) {
        self.unsent
            .extend_from_slice(format!("{line}\n").as_bytes());
        self.flush();
    }

    /// Whether every line told was taken by the socket (after sending
    /// what it takes now): a watchdog line (`V`) is told only then, so
    /// that lines queue up only from the few other messages (the lead
    /// loop tries again at its next tick).
    fn caught_up(&mut self) -> bool {
        self.flush();
        self.unsent.is_empty()
    }

    /// Sends what the socket takes now of `unsent`.
    fn flush(&mut self) {
        use nix::sys::socket::{MsgFlags, send};
        use std::os::fd::AsRawFd;
        while !self.unsent.is_empty() {
            match send(
                self.ctrl.as_raw_fd(),
                &self.unsent,
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            ) {
                Ok(n) => {
                    self.unsent.drain(..n);
                }
                Err(nix::errno::Errno::EINTR) => {}
                // Full (EAGAIN), or the supervisor is gone (its end of
                // file reaches the reader).
                Err(_) => return,
            }
        }
    }

    /// The next message; `None` once the supervisor is gone.
    async fn next(&mut self) -> Option<Said> {
        self.said.recv().await
    }
}

/// The claim file's locked descriptor of this process (file backend): the
/// descriptor open on `path` that holds an OFD write lock, duplicated.
///
/// The backend locks the whole file, so at most one open file description
/// holds that write lock, and every descriptor of it will do. They are
/// looked at from the highest number down: the claim file was opened
/// last, so this usually stats one or two descriptors, not all of them
/// (ADR 0091).
fn locked_claim_file(path: &std::path::Path) -> Option<OwnedFd> {
    use std::os::unix::fs::MetadataExt;
    let want = std::fs::metadata(path).ok()?;
    let mut fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect();
    fds.sort_unstable_by(|a, b| b.cmp(a));
    for fd in fds {
        let same = std::fs::metadata(format!("/proc/self/fd/{fd}"))
            .is_ok_and(|m| m.dev() == want.dev() && m.ino() == want.ino());
        if !same {
            continue;
        }
        // `lock:` lines in fdinfo are the locks this open file description
        // owns.
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
        if info
            .lines()
            .any(|l| l.starts_with("lock:") && l.contains("OFDLCK") && l.contains("WRITE"))
        {
            #[allow(unsafe_code)]
            // SAFETY: fd is open in this process for the duration of the
            // call (the term holds it); it is only duplicated.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            return borrowed.try_clone_to_owned().ok();
        }
    }
    None
}

/// Runs the command under the term, through the supervisor: COMMAND's
/// whole tree is stopped before the term is given up, on every path.
#[allow(clippy::too_many_arguments)]
async fn lead<C: Claim>(
    standby: supervisor::Standby,
    term: &Term<C>,
    slot: Option<&(ElectionName, u32)>,
    args: &RunArgs,
    kill: KillTiming,
    lock: Option<OwnedFd>,
    signals: &mut Signals,
    report: Reporter,
    groups: Option<&cgroup::Election>,
) -> Result<u8, Failure> {
    // With slots, the slot's election (`NAME#slot-I`): its terms, its
    // cgroups.
    let name = term.name().as_str();
    let epoch = term.epoch().get();
    let program = &args.command[0];
    // From now on COMMAND's tree becomes elect's if the supervisor dies
    // (ADR 0049): elect can then stop it itself before giving the term up.
    if let Err(e) = supervisor::become_subreaper() {
        let _ = term.resign().await;
        return Err(Failure::new(
            exit::INTERNAL,
            format!("cannot become a child subreaper: {e}"),
        ));
    }
    // Before COMMAND starts: this term's cgroup, and every earlier term's
    // group on this host ended (its processes killed, also stopped and
    // escaped ones).
    let group = match groups {
        None => None,
        Some(groups) => {
            let begun = groups
                .begin(epoch, |old, populated| {
                    if populated {
                        report.event(
                            "leftover",
                            &format!("processes of the earlier term {old} of {name} still ran on this host: killed them before starting the command"),
                            json!({ "name": name, "epoch": epoch, "leftover_epoch": old }),
                        );
                    }
                })
                .await;
            match begun {
                Ok(g) => Some(g),
                Err(cgroup::Begin::Later(later)) => {
                    report.event(
                        "lost",
                        &format!("lost {name}, term {epoch}: the later term {later} of {name} began on this host (its cgroup exists), so this term is already over; the command is not started. If nothing runs term {later}, the election's epochs went back (its state deleted, or restored from a backup): on the file backend, `elect repair-epoch` above {later} ends this"),
                        json!({ "name": name, "epoch": epoch, "later_epoch": later }),
                    );
                    drop(standby);
                    return Ok(args.lost_exit_code);
                }
                Err(cgroup::Begin::Io(e)) => {
                    drop(standby);
                    let _ = term.resign().await;
                    return Err(Failure::new(
                        exit::INTERNAL,
                        format!(
                            "cannot set up the command's cgroup in {}: {e}",
                            groups.dir().display()
                        ),
                    )
                    .hint(format!(
                        "fix the directory's permissions, or set {}=none to run without a cgroup",
                        cgroup::PARENT_ENV
                    )));
                }
            }
        }
    };
    let mut sup = match Supervised::start(standby, term, slot, lock.as_ref(), group.as_ref()) {
        Ok(s) => s,
        Err(f) => {
            if let Some(g) = &group {
                let _ = g.end().await;
            }
            let _ = term.resign().await;
            return Err(f);
        }
    };
    drop(lock);
    // The loop decides nothing: the machine does (`lead_loop`); this turns
    // what happens into its inputs, and carries out its commands.
    let lease = term.lease();
    let clock = MonoClock::new();
    let line = args.command.join(" ");
    let shown = Shown {
        name,
        epoch,
        command: &line,
    };
    let say = |event: &Event| {
        let (kind, text, fields) = event.render(&shown);
        report.event(kind, &text, fields);
    };
    let mut machine =
        LeadLoop::new(kill, args.lost_exit_code).with_handover_signal(args.handover_signal);
    // How often the watchdog's deadline follows the renewals (from the
    // command's start: its first tick is at once).
    let mut tick: Option<tokio::time::Interval> = None;
    // The answer to the last command, when it asked for one.
    let mut answer: Option<(At, Input)> = None;
    loop {
        let (at, input) = match answer.take() {
            Some(answered) => answered,
            None => {
                let listen = machine.listen();
                if listen.term && tick.is_none() {
                    tick = Some(tokio::time::interval(Duration::from_millis(25)));
                }
                let far = || tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
                let escalation = listen.escalation.map_or_else(far, |at| clock.instant(at));
                let backstop = listen.backstop.map_or_else(far, |at| clock.instant(at));
                let input = tokio::select! {
                    said = sup.next() => match said {
                        Some(said) => Input::Said(said),
                        None => Input::SupervisorGone,
                    },
                    Received { signal, from_terminal } = signals.next(), if listen.signals => Input::Signal {
                        signal,
                        from_terminal,
                        same_group: from_terminal && machine.command().is_some_and(in_our_group),
                    },
                    _ = tokio::time::sleep_until(escalation), if listen.escalation.is_some() => Input::Escalate,
                    _ = tokio::time::sleep_until(backstop), if listen.backstop.is_some() => Input::Backstop,
                    l = term.lost(), if listen.term => Input::Lost {
                        revoked: matches!(l.reason, election_core::LossReason::Revoked { .. }),
                        reason: exit::chain(&l),
                    },
                    _ = next_tick(&mut tick), if listen.term => Input::Tick { caught_up: sup.caught_up() },
                    r = term.transfer_requested(), if listen.transfer => Input::TransferRequested {
                        to: r.to.as_str().to_owned(),
                    },
                    r = term.preferred(), if listen.transfer && args.yield_to_preferred => Input::TransferRequested {
                        to: r.to.as_str().to_owned(),
                    },
                };
                (clock.at(&lease), input)
            }
        };
        for command in machine.step(at, input) {
            match command {
                Command::Tell(line) => sup.tell(&line.to_string()),
                Command::Report(event) => say(&event),
                Command::WaitSupervisor => sup.wait(),
                Command::TakeOver { command } => {
                    let mut exited = None;
                    take_over(group.as_ref(), command, &mut exited, &say).await;
                    answer = Some((clock.at(&lease), Input::TakenOver { exited }));
                }
                Command::EndGroup { quiet } => {
                    // The supervisor is reaped after the release, not
                    // before: it said the tree is empty (or elect ended the
                    // tree itself) and exits by itself; it acts for no one,
                    // and the file backend's release unlocks the lock it
                    // shares explicitly. Its exit (a fork of elect tearing
                    // its memory down) is then beside the successor's start,
                    // not before the release (ADR 0087).
                    if let Some(g) = &group
                        && let Err(e) = g.end().await
                        && !quiet
                    {
                        // The tree was seen empty (the supervisor's, or
                        // elect's own count of its children); only the
                        // group's removal failed.
                        report.event(
                            "cgroup",
                            &format!("cannot remove the term's cgroup {}: {e}", g.dir().display()),
                            json!({ "name": name, "epoch": epoch, "error": e.to_string() }),
                        );
                    }
                    // The clock before the loss: a validity run out by
                    // `at.now` reads lost.
                    let at = clock.at(&lease);
                    let loss = lease
                        .loss()
                        .filter(|l| !l.reason.is_end())
                        .map(|l| exit::chain(&l));
                    answer = Some((at, Input::Ended { loss }));
                }
                Command::Resign => {
                    let error = term.resign().await.err().map(|e| exit::chain(&e));
                    answer = Some((clock.at(&lease), Input::Resigned { error }));
                }
                Command::HandOver { to } => {
                    let handed = match Identity::new(&to) {
                        Ok(to) => term.transfer(&to, handover_window(args)).await,
                        Err(e) => Err(e.into()),
                    };
                    let error = match handed {
                        Ok(()) => None,
                        // Refused before anything changed (a backend that
                        // cannot transfer): the term is resigned instead.
                        Err(election_core::Error::Config(e)) => {
                            report.event(
                                "handover-refused",
                                &format!("cannot hand {name} to {to}: {}; resigning instead", exit::chain(&e)),
                                json!({ "name": name, "epoch": epoch, "to": to, "error": exit::chain(&e) }),
                            );
                            term.resign().await.err().map(|e| exit::chain(&e))
                        }
                        Err(e) => Some(exit::chain(&e)),
                    };
                    answer = Some((clock.at(&lease), Input::Resigned { error }));
                }
                Command::Finish(finish) => return finish.into_result(program),
            }
        }
    }
}

/// `--take-over`'s state while campaigning.
struct TakeOver {
    /// Still asking.
    on: bool,
    /// `--priority` without `--take-over`: says it waits with this
    /// priority (`Election::prefer`) instead of asking for the term.
    priority: Option<u32>,
    /// The epoch of the term asked last.
    asked: Option<election_core::Epoch>,
    /// The next look.
    next: tokio::time::Instant,
}

impl TakeOver {
    /// Reads who leads `name`; asks a term of another holder not asked yet
    /// to hand the name to `me`, and says so. A backend that cannot carry
    /// requests is said once, and not asked again.
    async fn look(
        &mut self,
        backend: &Backend,
        name: &ElectionName,
        me: &Identity,
        report: &Reporter,
    ) {
        self.next = tokio::time::Instant::now() + Duration::from_secs(1);
        let Ok(Some(holder)) = backend.leader(name.as_str()).await else {
            return;
        };
        if &holder.identity == me || self.asked == Some(holder.epoch) {
            return;
        }
        let asked = match self.priority {
            None => backend.request_transfer(name.as_str(), me, me).await,
            Some(p) => backend.prefer(name.as_str(), me, p).await,
        };
        match asked {
            Ok(Some(r)) => {
                self.asked = Some(r.epoch);
                let (kind, text) = match r.priority {
                    None => (
                        "take-over",
                        format!(
                            "asked {} (term {}) to hand {name} to {me}",
                            holder.identity, r.epoch
                        ),
                    ),
                    Some(p) => (
                        "preferred",
                        format!(
                            "told {} (term {}) that {me} waits for {name} with priority {p}",
                            holder.identity, r.epoch
                        ),
                    ),
                };
                report.event(
                    kind,
                    &text,
                    json!({ "name": name.as_str(), "holder": holder.identity.as_str(), "epoch": r.epoch.get(), "to": me.as_str(), "priority": r.priority }),
                );
            }
            Ok(None) => {}
            Err(election_core::Error::Config(e)) => {
                self.on = false;
                report.event(
                    "warning",
                    &format!("warning: --take-over: {}", exit::chain(&e)),
                    json!({ "name": name.as_str(), "message": exit::chain(&e) }),
                );
            }
            // Asked again at the next look.
            Err(_) => {}
        }
    }
}

/// How long a handover reserves the name (`--handover-window`): the TTL
/// by default, 15 s where the backend has none (the file backend).
fn handover_window(args: &RunArgs) -> Duration {
    args.handover_window
        .or(args.ttl)
        .unwrap_or(Duration::from_secs(15))
}

/// The next tick of the watchdog's interval (never, without one).
async fn next_tick(tick: &mut Option<tokio::time::Interval>) {
    match tick {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Tokio instants as `CLOCK_MONOTONIC` nanoseconds (the lead loop's time,
/// and the supervisor's), and back, through one offset read once: the
/// same instant always gives the same nanoseconds (a validity told as `V`
/// is told again only when it moved). Both clocks are the kernel's
/// monotonic clock; the offset is read kernel clock first, so it errs
/// earlier, never later (as [`supervisor::mono_ns_at`]).
struct MonoClock {
    /// An instant of the run's start.
    origin: tokio::time::Instant,
    /// `origin` in nanoseconds.
    origin_ns: u64,
}

impl MonoClock {
    /// The offset, read now.
    fn new() -> MonoClock {
        let origin = tokio::time::Instant::now();
        MonoClock {
            origin,
            origin_ns: supervisor::mono_ns_at(origin),
        }
    }

    /// `at` in nanoseconds.
    fn ns(&self, at: tokio::time::Instant) -> u64 {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if at >= self.origin {
            self.origin_ns.saturating_add(nanos(at - self.origin))
        } else {
            self.origin_ns.saturating_sub(nanos(self.origin - at))
        }
    }

    /// The instant of `ns` (at the earliest, the start of the run).
    fn instant(&self, ns: u64) -> tokio::time::Instant {
        match ns.checked_sub(self.origin_ns) {
            Some(after) => self.origin + Duration::from_nanos(after),
            None => self
                .origin
                .checked_sub(Duration::from_nanos(self.origin_ns - ns))
                .unwrap_or(self.origin),
        }
    }

    /// Now, and the lease's known validity.
    fn at(&self, lease: &impl Lease) -> At {
        At {
            now: self.ns(tokio::time::Instant::now()),
            valid_until: lease.valid_until().map(|v| self.ns(v)),
        }
    }
}

/// `elect`'s own end of COMMAND's tree, when the supervisor died or did
/// not stop the tree by its deadline (ADR 0049): SIGKILL to the term's
/// cgroup and to every descendant of `elect` (the supervisor included;
/// `elect` is a child subreaper, so the tree re-parents to it), until
/// `elect` has no child left and the cgroup is empty. COMMAND's exit code
/// is kept if `elect` collects it. Waits as long as a process of the tree
/// lives (one that is another user's: said after 2 s, as the supervisor
/// does).
async fn take_over(
    group: Option<&cgroup::TermGroup>,
    command: Option<i32>,
    exited: &mut Option<u8>,
    say: &impl Fn(&Event),
) {
    let began = tokio::time::Instant::now();
    let mut told = false;
    loop {
        if let Some(g) = group {
            let _ = g.kill();
        }
        let (left, no_child) = supervisor::kill_descendants(|pid, code| {
            if Some(pid) == command {
                *exited = Some(code);
            }
        });
        let group_empty = group.is_none_or(|g| !g.populated().unwrap_or(false));
        if no_child && group_empty {
            return;
        }
        if !told && began.elapsed() > Duration::from_secs(2) {
            told = true;
            let pids: Vec<String> = left.iter().map(|p| p.to_string()).collect();
            say(&Event::Unkillable {
                pids: pids.join(" "),
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole-file OFD lock, as the file backend takes its claim.
    #[allow(
        clippy::cast_possible_truncation,
        reason = "fcntl's lock types and SEEK_SET are 0 to 2, flock's fields c_short"
    )]
    fn ofd_lock(file: &std::fs::File, kind: nix::libc::c_int) -> bool {
        let lock = nix::libc::flock {
            l_type: kind as nix::libc::c_short,
            l_whence: nix::libc::SEEK_SET as nix::libc::c_short,
            l_start: 0,
            l_len: 0,
            l_pid: 0,
        };
        nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_OFD_SETLK(&lock)).is_ok()
    }

    /// `locked_claim_file` finds the one description that holds the write
    /// lock whatever its descriptor's number: not an unlocked open of the
    /// same file above or below it, not another file's locked open. The
    /// duplicate it returns keeps the lock once the original is closed.
    #[test]
    fn the_locked_claim_file_is_the_locked_description_whatever_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.lock");
        let other = dir.path().join("other.lock");
        let open = |p: &std::path::Path| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(p)
                .unwrap()
        };
        assert!(locked_claim_file(&path).is_none(), "no file yet");
        for locked_at in 0..3 {
            let mut opens: Vec<std::fs::File> = (0..3).map(|_| open(&path)).collect();
            let elsewhere = open(&other);
            assert!(ofd_lock(&elsewhere, nix::libc::F_WRLCK));
            assert!(locked_claim_file(&path).is_none(), "nothing locked yet");
            assert!(ofd_lock(&opens[locked_at], nix::libc::F_WRLCK));
            let found = locked_claim_file(&path).expect("the locked description");
            let info = std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                std::os::fd::AsRawFd::as_raw_fd(&found)
            ))
            .unwrap();
            assert!(info.contains("OFDLCK") && info.contains("WRITE"), "{info}");
            let original = opens.remove(locked_at);
            drop(original);
            let probe = open(&path);
            assert!(
                !ofd_lock(&probe, nix::libc::F_WRLCK),
                "the duplicate still holds the lock (locked open {locked_at} of 3)"
            );
            drop(found);
            assert!(
                ofd_lock(&probe, nix::libc::F_WRLCK),
                "the lock went with the last descriptor"
            );
        }
    }

    #[test]
    fn instants_become_monotonic_nanoseconds_of_the_kernel_clock() {
        let now = tokio::time::Instant::now();
        let later = now + Duration::from_secs(3);
        let (a, b) = (supervisor::mono_ns_at(now), supervisor::mono_ns_at(later));
        let diff = b - a;
        // The two conversions read the clocks at slightly different times.
        assert!(
            diff.abs_diff(3_000_000_000) < 100_000_000,
            "{diff} ns apart"
        );
        assert!(a <= supervisor::mono_ns());
    }
}
