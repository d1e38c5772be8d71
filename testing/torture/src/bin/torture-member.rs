//! One member of a balanced lease set in the torture suite's lease-set
//! mode (`torture run --lease-sets`): it offers every key, balances them
//! with the other members of the group, and while it holds a key writes
//! numbered records to that key's fenced resource, recording every step
//! in that key's history.
//!
//! ```text
//! torture-member --backend URL --writer ID --out DIR --keys N
//!     [--ttl-ms N] [--renew-ms N] [--grace-ms N] [--poll-ms N]
//!     [--every-ms N (default 200)] [--write-every-ms N (default 50)]
//!     [--hold-ms N (default 20)] [--unsafe]
//! ```
//!
//! Keys are `key-0000` ... (candidate-testkit's `key_name`); key `k`'s
//! history is `DIR/keys/<k>/candidate-<ID>.history` and its resource the
//! `FileLog` in `DIR/keys/<k>/resource`, so the single-election checker
//! runs per key unchanged (`torture::check::check_keys`).
//!
//! Per key, from the set's events (`LeaseSet::events`): `Won` records
//! `elected <epoch>` (stamped when read, and only if the set still holds
//! the key in that term at that moment: a `Won` read after a pause past
//! the lease is not recorded, nor is anything of that term) and starts a
//! worker that writes through `guard` every `--write-every-ms`; each
//! `write` line is stamped before `guard`'s commit-point check, and the
//! write waits `--hold-ms` between that line and the resource, so a
//! SIGSTOP often freezes a write under way (woken past the lease, it
//! reaches the fence with a deposed epoch). `Lost`
//! records `lost` and tells the worker to stop (a write already running
//! finishes: the fence refuses it if a later term wrote); `Released`
//! (balancing gave the key back, or the set closed, after its guards
//! drained) records `resigned`.
//!
//! With `--unsafe` the worker writes without `guard` or the fence and a
//! loss does not stop it (only to prove the checker can fail).
//!
//! Stdin: `leave` or end of input: leave the group (`Membership::stop`),
//! close the set, record what it gives back, exit 0.
//!
//! Errors: `error <message>` on stderr; exit code 64 for bad usage, 2 for
//! anything else.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use candidate_testkit::args::{self, Common, UsageError, keys, millis, word};
use candidate_testkit::lease_set::key_name;
use election_core::{KeyEvent, Membership};
use election_url::{AnyLeaseSet, BackendUrl, Settings};
use fencing::Token;
use tokio::io::AsyncBufReadExt;
use torture::history::{self, CandidateEvent, HistoryWriter, error_chain, mono_ns};
use torture::resource::{Mode, Resource, ResourceSpec};

/// Exit code for bad usage.
const USAGE: u8 = 64;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug)]
struct Args {
    backend: BackendUrl,
    writer: String,
    out: PathBuf,
    keys: usize,
    ttl: Option<Duration>,
    renew: Option<Duration>,
    grace: Option<Duration>,
    poll: Option<Duration>,
    every: Duration,
    write_every: Duration,
    hold: Duration,
    mode: Mode,
}

/// One member of a balanced lease set (see the module docs).
#[derive(Debug, clap::Parser)]
// The last of a repeated flag wins, as callers expect.
#[command(name = "torture-member", args_override_self = true)]
struct Cli {
    #[command(flatten)]
    common: Common,
    /// This writer's id: a non-empty word.
    #[arg(long, value_parser = word)]
    writer: String,
    /// The run directory (histories and resources per key).
    #[arg(long)]
    out: PathBuf,
    /// How many keys (key-0000, key-0001, ...).
    #[arg(long, value_parser = keys, default_value = "16")]
    keys: usize,
    /// How often the member rereads the group, in milliseconds.
    #[arg(long = "every-ms", value_parser = millis, default_value = "200")]
    every: Duration,
    /// Time between two writes of a key, in milliseconds.
    #[arg(long = "write-every-ms", value_parser = millis, default_value = "50")]
    write_every: Duration,
    /// The synchronous section of a write, in milliseconds.
    #[arg(long = "hold-ms", value_parser = millis, default_value = "20")]
    hold: Duration,
    /// Write without the guard or the fence (to prove the checker fails).
    #[arg(long = "unsafe")]
    unsafe_mode: bool,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, UsageError> {
    let cli: Cli = args::parse("torture-member", args)?;
    Ok(Args {
        backend: cli.common.backend,
        writer: cli.writer,
        out: cli.out,
        keys: cli.keys,
        ttl: cli.common.ttl,
        renew: cli.common.renew,
        grace: cli.common.grace,
        poll: cli.common.poll,
        every: cli.every,
        write_every: cli.write_every,
        hold: cli.hold,
        mode: if cli.unsafe_mode {
            Mode::Unsafe
        } else {
            Mode::Safe
        },
    })
}

/// The directory of key `key` in the run directory `out`.
fn key_dir(out: &Path, key: &str) -> PathBuf {
    out.join("keys").join(key)
}

/// What a member writes with: its histories and resources, per key.
struct Member {
    writer: String,
    set: Arc<AnyLeaseSet>,
    histories: HashMap<String, Arc<HistoryWriter>>,
    resources: HashMap<String, Resource>,
    seq: AtomicU64,
    write_every: Duration,
    hold: Duration,
    mode: Mode,
}

impl Member {
    fn history(&self, key: &str) -> &HistoryWriter {
        &self.histories[key]
    }

    fn record(&self, key: &str, at: Option<u64>, event: &CandidateEvent) {
        if let Err(e) = self.history(key).record_at(at, event) {
            eprintln!("error cannot write the history of {key}: {e}");
            std::process::exit(2);
        }
    }

    /// Writes `key` in term `epoch` until told to stop or the set no
    /// longer holds it in that term.
    async fn work(self: Arc<Self>, key: String, epoch: u64, stop: Arc<AtomicBool>) {
        let resource = &self.resources[&key];
        loop {
            if stop.load(Ordering::Acquire) {
                return;
            }
            if self.mode == Mode::Unsafe {
                // No guard, no fence, no stop on a loss.
                let Some(e) = election_core::Epoch::new(epoch) else {
                    return;
                };
                let token = Token::from_epoch(e);
                let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
                self.record(&key, None, &CandidateEvent::Write { seq, epoch });
                tokio::time::sleep(self.hold).await;
                let outcome = resource.write(&self.writer, seq, token).await;
                self.record(&key, None, &outcome.event(seq, epoch));
            } else {
                if self.set.epoch(&key).map(|e| e.get()) != Some(epoch) {
                    return;
                }
                // Before the commit-point check inside `guard`.
                let checked = mono_ns();
                let wrote = self
                    .set
                    .guard(&key, async |write_token| {
                        let token = Token::from(&write_token);
                        if token.epoch().get() != epoch {
                            return false; // a later term: its own worker writes
                        }
                        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
                        self.record(&key, Some(checked), &CandidateEvent::Write { seq, epoch });
                        tokio::time::sleep(self.hold).await;
                        let outcome = resource.write(&self.writer, seq, token).await;
                        self.record(&key, None, &outcome.event(seq, epoch));
                        true
                    })
                    .await;
                if !matches!(wrote, Ok(true)) {
                    return;
                }
            }
            tokio::time::sleep(self.write_every).await;
        }
    }
}

async fn run(args: Args) -> Result<(), BoxError> {
    let keys: Vec<String> = (0..args.keys).map(key_name).collect();
    // The same flags for every backend: what it has no use for is left out.
    let given = Settings {
        ttl: args.ttl,
        renew: args.renew,
        grace: args.grace,
        ..Settings::default()
    };
    let (settings, _) = candidate_testkit::open::usable_settings(&args.backend, given);
    let backend = args.backend.open(&settings).await?;
    let (set, _) = candidate_testkit::open::lease_set(&backend, &args.writer, args.poll).await?;
    let set = Arc::new(set);
    let mut histories = HashMap::new();
    let mut resources = HashMap::new();
    for key in &keys {
        let dir = key_dir(&args.out, key);
        let path = dir.join(history::candidate_file_name(&args.writer));
        let writer =
            HistoryWriter::create(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
        writer.record(&CandidateEvent::Start {
            pid: std::process::id(),
        })?;
        histories.insert(key.clone(), Arc::new(writer));
        let spec = ResourceSpec::File(dir.join("resource"));
        resources.insert(key.clone(), Resource::open(&spec, args.mode).await?);
    }
    let member = Arc::new(Member {
        writer: args.writer.clone(),
        set: set.clone(),
        histories,
        resources,
        seq: AtomicU64::new(0),
        write_every: args.write_every,
        hold: args.hold,
        mode: args.mode,
    });
    let mut events = set.events();
    // Nothing claimed before the first view of the group (ADR 0061).
    let me = election_core::Identity::new(&args.writer)?;
    election_core::Balanced::balance_among(&*set, &[election_core::SetMember::new(me, 0)]);
    for key in &keys {
        member.record(key, None, &CandidateEvent::Campaigning);
        set.held(key); // offered: counted and asked
    }
    let membership = Membership::start(backend.clone(), "torture-group", set.clone(), args.every)?;
    let mut membership = Some(membership);

    let (tx, mut stdin) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The worker of each key's recorded term.
    let mut workers: HashMap<String, (u64, Arc<AtomicBool>)> = HashMap::new();
    // Terms won but not recorded (read after the term had ended).
    let mut unrecorded: HashSet<(String, u64)> = HashSet::new();
    let mut leaving = false;
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else { break };
                let key = event.key().as_str().to_owned();
                let epoch = event.epoch().get();
                if !member.histories.contains_key(&key) {
                    continue;
                }
                match event {
                    KeyEvent::Won { .. } => {
                        let at = mono_ns();
                        let safe = member.mode == Mode::Safe;
                        if safe && set.epoch(&key).map(|e| e.get()) != Some(epoch) {
                            unrecorded.insert((key, epoch));
                            continue;
                        }
                        member.record(&key, Some(at), &CandidateEvent::Elected { epoch });
                        let stop = Arc::new(AtomicBool::new(false));
                        if let Some((_, old)) = workers.insert(key.clone(), (epoch, stop.clone())) {
                            old.store(true, Ordering::Release);
                        }
                        tokio::spawn(member.clone().work(key, epoch, stop));
                    }
                    KeyEvent::Lost { reason, .. } => {
                        if unrecorded.remove(&(key.clone(), epoch)) {
                            continue;
                        }
                        if member.mode == Mode::Safe
                            && let Some((e, stop)) = workers.get(&key)
                            && *e == epoch
                        {
                            stop.store(true, Ordering::Release);
                        }
                        member.record(&key, None, &CandidateEvent::Lost { epoch, text: reason.to_string() });
                    }
                    KeyEvent::Released { .. } => {
                        if unrecorded.remove(&(key.clone(), epoch)) {
                            continue;
                        }
                        if let Some((e, stop)) = workers.get(&key)
                            && *e == epoch
                        {
                            stop.store(true, Ordering::Release);
                        }
                        member.record(&key, None, &CandidateEvent::Resigned { epoch });
                    }
                    _ => {}
                }
            }
            line = stdin.recv(), if !leaving => {
                match line.as_deref() {
                    Some("leave") | None => {
                        leaving = true;
                        // Closed in a task of its own: its Released events
                        // are read meanwhile; the stream ends once closed.
                        let m = membership.take();
                        let s = set.clone();
                        tokio::spawn(async move {
                            if let Some(m) = m {
                                m.stop().await;
                            }
                            s.close().await;
                        });
                    }
                    Some(other) => eprintln!("note unknown command {other:?}"),
                }
            }
        }
    }
    for (_, stop) in workers.values() {
        stop.store(true, Ordering::Release);
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error {e}");
            return ExitCode::from(USAGE);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error {}", error_chain(&*e));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, UsageError> {
        parse(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_its_flags_and_refuses_bad_ones() {
        let a = args(&[
            "--backend",
            "sqlite:///tmp/e.db",
            "--writer",
            "m1.2",
            "--out",
            "/tmp/run",
            "--keys",
            "8",
            "--every-ms",
            "100",
            "--unsafe",
        ])
        .unwrap();
        assert_eq!((a.writer.as_str(), a.keys), ("m1.2", 8));
        assert_eq!(a.every, Duration::from_millis(100));
        assert_eq!(a.mode, Mode::Unsafe);
        for bad in [
            &["--backend", "sqlite:///tmp/e.db", "--out", "/tmp/run"][..],
            &["--backend", "sqlite:///tmp/e.db", "--writer", "m1", "--out"],
            &[
                "--backend",
                "sqlite:///tmp/e.db",
                "--writer",
                "a b",
                "--out",
                "/x",
            ],
            &["--writer", "m1", "--out", "/x"],
        ] {
            assert!(args(bad).is_err(), "{bad:?}");
        }
    }
}
