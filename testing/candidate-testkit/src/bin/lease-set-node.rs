//! One lease set in a process of its own, reporting what it holds line by
//! line; see `candidate_testkit::lease_set` for the protocol.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use candidate_testkit::lease_set::{Args, Event, Sweep, key_name};
use candidate_testkit::mono_ns;
use std::collections::HashMap;
use std::sync::Arc;

use election_core::{KeyEvent, KeyEvents, Membership};
use election_url::{AnyLeaseSet, BackendUrl, Settings};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Writes whole lines to stdout at once and flushes them.
fn say(lines: &str) {
    if lines.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(lines.as_bytes());
    let _ = out.flush();
}

fn say_event(event: Event) {
    say(&format!("{event}\n"));
}

fn note(text: String) {
    say_event(Event::Note(text));
}

/// The error and its sources, on one line.
fn message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    msg.replace('\n', " ")
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            say_event(Event::Error(e.to_string()));
            return ExitCode::from(2);
        }
    };
    // The library's own diagnostics (a membership round leaving a
    // suspected member out of the view, a slot it could not read), on
    // stderr, when RUST_LOG asks for them.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say_event(Event::Error(format!("cannot start tokio: {e}")));
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(run(args));
    // The stdin reader may be blocked in a read: do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say_event(Event::Error(message(&*e)));
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> Result<(), BoxError> {
    let keys: Vec<String> = (0..args.keys).map(key_name).collect();
    let url = &args.backend;
    // A setting the backend has no use for is noted and left out: the
    // processes of a driver all get the same flags, whatever the backend.
    let given = Settings {
        ttl: args.ttl,
        renew: args.renew,
        grace: args.grace,
        ..Settings::default()
    };
    let (settings, unused) = candidate_testkit::open::usable_settings(url, given);
    for setting in unused {
        note(format!(
            "ignored --{setting}-ms: the {} backend has no such setting",
            url.scheme()
        ));
    }
    let (backend, set) = open_waiting(url, &settings, &args.identity, args.poll).await?;
    let set = Arc::new(set);
    let workers = tokio::spawn(workers(set.events()));
    let membership = match &args.balance {
        Some(group) => {
            // Nothing is claimed before the first view of the group (else
            // the first process up would take every key, then give most
            // back): a share of zero until the membership's first round.
            let me = election_core::Identity::new(&args.identity)?;
            set.balance_among(&[election_core::SetMember::new(me, 0)]);
            for key in &keys {
                set.held(key); // asked before the first view: counted as offered
            }
            Some(Membership::start(
                backend.clone(),
                group,
                set.clone(),
                args.every,
            )?)
        }
        None => None,
    };
    let result = drive(&set, &keys, args.sweep, membership).await;
    let _ = workers.await;
    result
}

/// Opens the backend and the lease set, waiting for a server that cannot
/// be reached as `elect` and a service do (a note per failed attempt,
/// backing off), for at most a minute; any other failure at once.
async fn open_waiting(
    url: &BackendUrl,
    settings: &Settings,
    identity: &str,
    poll: Option<Duration>,
) -> Result<(election_url::Backend, AnyLeaseSet), BoxError> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        let opened = match url.open(settings).await {
            Ok(backend) => match candidate_testkit::open::lease_set(&backend, identity, poll).await
            {
                Ok((set, poll_refused)) => {
                    if poll_refused {
                        note(format!(
                            "ignored --poll-ms: the {} backend has no such setting",
                            url.scheme()
                        ));
                    }
                    return Ok((backend, set));
                }
                Err(e) => e,
            },
            Err(e) => e,
        };
        if !candidate_testkit::open::transient(&opened) || tokio::time::Instant::now() >= give_up {
            return Err(opened.into());
        }
        let pause = election_core::retry_pause(election_core::DEFAULT_POLL_INTERVAL, attempt);
        note(format!(
            "cannot open the backend (attempt {attempt}, next in {pause:?}): {}",
            message(&opened)
        ));
        tokio::time::sleep(pause).await;
    }
}

/// One worker per held key, started on `Won` and stopped on `Lost` or
/// `Released` (a sharded service's shape: no polling of `held`). Each
/// says when it starts and stops; the stream ends once the set closed.
async fn workers(mut events: KeyEvents) {
    let mut running: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    while let Some(event) = events.next().await {
        let key = event.key().as_str().to_owned();
        match event {
            KeyEvent::Won { epoch, .. } => {
                let worker = tokio::spawn(async move {
                    // The shard's work would run here, its writes fenced
                    // with `epoch`.
                    std::future::pending::<()>().await;
                });
                if let Some(old) = running.insert(key.clone(), worker) {
                    old.abort();
                }
                note(format!("worker {key} started in term {epoch}"));
            }
            KeyEvent::Lost { epoch, reason, .. } => {
                if let Some(worker) = running.remove(&key) {
                    worker.abort();
                }
                note(format!(
                    "worker {key} stopped (term {epoch}, lost: {reason})"
                ));
            }
            KeyEvent::Released { epoch, .. } => {
                if let Some(worker) = running.remove(&key) {
                    worker.abort();
                }
                note(format!("worker {key} stopped (term {epoch}, released)"));
            }
            _ => {}
        }
    }
    for (_, worker) in running {
        worker.abort();
    }
}

/// Lines from stdin; the channel closes at end of input.
fn commands() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Asks about every key, reports every change of what the set holds, and
/// closes the set on `close` or at the end of input.
async fn drive(
    set: &AnyLeaseSet,
    keys: &[String],
    sweep: Duration,
    membership: Option<Membership>,
) -> Result<(), BoxError> {
    let mut commands = commands();
    for key in keys {
        set.held(key); // asks about it: every key's campaign starts now
    }
    let asks = async {
        let mut failed = Vec::new();
        for key in keys {
            if let Err(e) = set.ask(key).await {
                failed.push(format!("{key}: {}", message(&e)));
            }
        }
        failed
    };
    tokio::pin!(asks);
    let mut ready = false;
    let mut seen = Sweep::new(keys.len());
    let mut events = Vec::new();
    let mut out = String::new();
    loop {
        // `epoch` is `Some` exactly while `held` is true (one lookup
        // instead of two; every key is asked already). One clock read per
        // answer (ADR 0079), and an answer asked again if the process was
        // stopped between it and the read after it.
        seen.run(
            keys,
            mono_ns,
            |key| set.epoch(key).map(|e| e.get()),
            &mut events,
        );
        for event in events.drain(..) {
            let _ = writeln!(out, "{event}");
        }
        say(&out);
        out.clear();
        tokio::select! {
            biased;
            command = commands.recv() => match command.as_deref() {
                Some("close") | None => break,
                Some("") => {}
                Some(other) => note(format!("unknown command {other:?}")),
            },
            failed = &mut asks, if !ready => {
                ready = true;
                if !failed.is_empty() {
                    note(format!(
                        "the first ask failed for {} keys (the set keeps trying); first: {}",
                        failed.len(),
                        failed[0]
                    ));
                }
                say_event(Event::Ready { at: mono_ns() });
            }
            () = tokio::time::sleep(sweep) => {}
        }
    }
    // Every hold seen so far was seen before this stamp; `held` is false
    // from the moment `close` starts.
    say_event(Event::Closing { at: mono_ns() });
    if let Some(membership) = membership {
        membership.stop().await; // the others see this member leave
    }
    set.close().await;
    say_event(Event::Closed { at: mono_ns() });
    Ok(())
}
