//! One candidate process of the torture suite: it campaigns, and while it
//! leads it writes a numbered record to the fenced resource every few
//! milliseconds, recording every step in its history file.
//!
//! ```text
//! torture-candidate --backend URL --writer ID --history FILE
//!     --resource file:DIR|sqlite:PATH [--ttl-ms N] [--renew-ms N] [--grace-ms N]
//!     [--poll-ms N] [--write-every-ms N (default 20)] [--hold-ms N] [--unsafe]
//!     [--set-of-claims]
//! ```
//!
//! `URL` is any backend URL of `election-url` (`file:///dir`,
//! `sqlite:///path.db`, `nats://host:port,...?replicas=3`). A lease setting
//! the backend has no use for is ignored.
//!
//! The loop: campaign for the election `torture`; once elected, write one
//! record every `--write-every-ms` (history `write`, then `ok`, `stale` or
//! `error`); on a loss stop writing at once and campaign again (a lost term
//! is never released). With `--unsafe` the writes skip the fence and a loss
//! is recorded but otherwise ignored: the candidate keeps writing with its
//! old epoch until it ends (only to prove that the checker can fail).
//!
//! Stdout, one line each, flushed: `campaigning <mono_ns>`, `elected
//! <epoch> <mono_ns>`, `lost <epoch> <mono_ns>`, `resigned <epoch>
//! <mono_ns>` (the same `mono_ns` as the history line).
//!
//! Stdin: `resign` (resign the current term if any, then campaign again),
//! `clock <seconds>` (where the backend takes an injected wall clock,
//! `Backend::with_clock`: shift it by that many seconds, either sign), `cancel` (if leading: hand the term to
//! `Term::lead` with a task that writes through a slow synchronous section,
//! and drop the `lead()` future the moment a write begins; record
//! `resigned`, campaign again; with `--unsafe`: the old behaviour by hand,
//! the write in a detached task and the term resigned at once), `close` (if leading: start a lease set
//! for the election, resign the term, wait until the set wins the key
//! (`elected`), run a guarded write through the same slow synchronous
//! section, and close the set the moment the write has begun: `resigned`,
//! campaign again; with `--set-of-claims` the set is made of per-key
//! claims of the candidates' own elections, for a backend whose lease sets
//! keep their keys apart), `unguarded` (make one write with a token
//! from `election_core::unguarded`, history `unguarded`), `fdrop <ms>` (for
//! that long, drop each write's future right after the write ran, before
//! the fence returned: `Resource::write_then_drop`), `stall [ms]` (the
//! next write waits that long, 300 ms by default, between its `write` line
//! and the resource, so a SIGSTOP or a revoke then finds it mid-write),
//! `transfer <identity> <window_ms>` (if leading: `Term::transfer` to that
//! identity, recorded `resigned` like a resign, then campaign again; a
//! transfer the core refuses before anything changed leaves the term
//! going on), `priority <p>` (the priority of the next terms,
//! `Candidate::with_priority`; above 0, a waiting candidate tells the
//! holder with `Election::prefer` once it has waited half a TTL, and again
//! every TTL, and every leader yields to a preferred candidate's request,
//! `Term::transfer` to `Term::preferred().to` with a window of a TTL),
//! `exit` or end of input (resign if leading, exit 0).
//!
//! `--hold-ms` sets the synchronous section of those writes (default: a
//! quarter of the TTL).
//!
//! A `write` line is stamped before the writer's last check of its lease
//! (so the checker sees when it last believed it led).
//!
//! Errors: `error <message>` on stderr; exit code 64 for bad usage, 2 for
//! anything else. Transient backend failures (an unreachable server) are
//! retried, with a `note` on stderr.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use candidate_testkit::args::{self, Common, millis, word};
use election_core::{
    Candidate, Claim, ConfigError, Disposition, Election, ElectionName, Identity, LeadOptions,
    LeaseSet, PerKeyClaims, Term, TermLease, WriteToken,
};
use election_url::{AnyClaim, AnyLeaseSet, Backend, BackendUrl, Clock, Settings, SystemClock};
use fencing::Token;
use tokio::sync::{Notify, mpsc};
use torture::history::{CandidateEvent, HistoryWriter, error_chain, mono_ns, say};
use torture::resource::{Mode, Resource, ResourceError, ResourceSpec};

/// The election every candidate campaigns in.
use torture::orchestrate::ELECTION;
/// Exit code for bad usage.
const USAGE: u8 = 64;

#[derive(Debug)]
struct Args {
    backend: BackendUrl,
    writer: String,
    history: PathBuf,
    resource: ResourceSpec,
    ttl: Option<Duration>,
    renew: Option<Duration>,
    grace: Option<Duration>,
    poll: Duration,
    write_every: Duration,
    hold: Option<Duration>,
    mode: Mode,
    set_of_claims: bool,
}

#[derive(Debug, thiserror::Error)]
enum CandidateError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot write the history {}", path.display())]
    History {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the resource")]
    Resource(#[from] ResourceError),
    /// Opening the backend, or a candidate on it (the error names the
    /// backend).
    #[error("the backend")]
    Backend(#[from] election_url::Error),
    #[error("the election")]
    Election(#[from] election_core::Error),
    #[error("bad configuration")]
    Config(#[from] ConfigError),
}

fn usage(message: impl Into<String>) -> CandidateError {
    CandidateError::Usage(message.into())
}

/// One candidate of the torture suite (see the module docs).
#[derive(Debug, clap::Parser)]
// The last of a repeated flag wins, as callers expect.
#[command(name = "torture-candidate", args_override_self = true)]
struct Cli {
    #[command(flatten)]
    common: Common,
    /// This writer's id: a non-empty word.
    #[arg(long, value_parser = word)]
    writer: String,
    /// Where to write the history.
    #[arg(long)]
    history: PathBuf,
    /// The fenced resource: file:DIR or sqlite:PATH.
    #[arg(long, value_parser = resource_spec)]
    resource: ResourceSpec,
    /// Time between two writes, in milliseconds.
    #[arg(long = "write-every-ms", value_parser = millis, default_value = "20")]
    write_every: Duration,
    /// The synchronous section of a write, in milliseconds (default: a
    /// quarter of the TTL).
    #[arg(long = "hold-ms", value_parser = millis)]
    hold: Option<Duration>,
    /// Write without the guard or the fence (to prove the checker fails).
    #[arg(long = "unsafe")]
    unsafe_mode: bool,
    /// Make the `close` command's lease set of per-key claims of the
    /// candidates' own elections (for a backend whose lease sets keep
    /// their keys apart from them).
    #[arg(long = "set-of-claims")]
    set_of_claims: bool,
}

/// A resource, as `--resource` takes it.
fn resource_spec(text: &str) -> Result<ResourceSpec, String> {
    text.parse::<ResourceSpec>().map_err(|e| e.to_string())
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, CandidateError> {
    let cli: Cli = args::parse("torture-candidate", args).map_err(|e| usage(e.to_string()))?;
    Ok(Args {
        backend: cli.common.backend,
        writer: cli.writer,
        history: cli.history,
        resource: cli.resource,
        ttl: cli.common.ttl,
        renew: cli.common.renew,
        grace: cli.common.grace,
        poll: cli
            .common
            .poll
            .unwrap_or(election_core::DEFAULT_POLL_INTERVAL),
        write_every: cli.write_every,
        hold: cli.hold,
        mode: if cli.unsafe_mode {
            Mode::Unsafe
        } else {
            Mode::Safe
        },
        set_of_claims: cli.set_of_claims,
    })
}

fn note(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "note {line}");
}

/// The system's clocks, with the wall clock shifted by an offset that
/// `clock <seconds>` changes. The monotonic clock is never shifted.
#[derive(Debug, Default)]
struct ShiftedClock {
    offset_ms: AtomicI64,
}

impl ShiftedClock {
    fn shift(&self, seconds: i64) {
        self.offset_ms
            .fetch_add(seconds.saturating_mul(1000), Ordering::Relaxed);
    }
}

/// The clock `Backend::with_clock` takes (the wall clock is written for
/// display only).
impl Clock for ShiftedClock {
    fn now(&self) -> tokio::time::Instant {
        SystemClock.now()
    }

    fn wall_unix_ms(&self) -> i64 {
        SystemClock
            .wall_unix_ms()
            .saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }
}

/// A line from stdin, understood.
#[derive(Debug)]
enum Command {
    Resign,
    Clock(i64),
    Cancel,
    Close,
    Unguarded,
    DropWrites(u64),
    Stall(Duration),
    Transfer(String, Duration),
    Priority(u32),
    /// `exit` or the end of input.
    Exit,
    Unknown(String),
}

fn command(line: Option<String>) -> Command {
    let Some(line) = line else {
        return Command::Exit;
    };
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("resign"), None, _) => Command::Resign,
        (Some("cancel"), None, _) => Command::Cancel,
        (Some("close"), None, _) => Command::Close,
        (Some("unguarded"), None, _) => Command::Unguarded,
        (Some("stall"), None, _) => Command::Stall(STALL),
        (Some("stall"), Some(ms), None) => match ms.parse() {
            Ok(ms) => Command::Stall(Duration::from_millis(ms)),
            Err(_) => Command::Unknown(line),
        },
        (Some("priority"), Some(p), None) => match p.parse() {
            Ok(p) => Command::Priority(p),
            Err(_) => Command::Unknown(line),
        },
        (Some("transfer"), Some(to), Some(ms)) if words.next().is_none() => match ms.parse() {
            Ok(ms) if ms > 0 => Command::Transfer(to.to_owned(), Duration::from_millis(ms)),
            _ => Command::Unknown(line),
        },
        (Some("fdrop"), Some(ms), None) => match ms.parse() {
            Ok(ms) => Command::DropWrites(ms),
            Err(_) => Command::Unknown(line),
        },
        (Some("exit"), None, _) => Command::Exit,
        (Some("clock"), Some(secs), None) => match secs.parse() {
            Ok(s) => Command::Clock(s),
            Err(_) => Command::Unknown(line),
        },
        _ => Command::Unknown(line),
    }
}

/// Reads stdin on a thread of its own (so no read blocks the runtime's
/// shutdown); the channel closes at the end of input.
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// How the `close` command makes a lease set that contends with the
/// candidates for the election.
struct Sets<'a> {
    backend: &'a Backend,
    identity: &'a str,
    poll: Duration,
    /// Per-key claims of the candidates' own elections, not the
    /// backend's lease set (`--set-of-claims`).
    of_claims: bool,
}

impl Sets<'_> {
    async fn make(&self) -> Result<CloseSet, CandidateError> {
        if !self.of_claims {
            return Ok(CloseSet::Backend(
                self.backend.lease_set_polling(self.identity, None).await?,
            ));
        }
        let backend = self.backend.clone();
        let id = self.identity.to_owned();
        let claims = PerKeyClaims::new(Identity::new(self.identity)?, move |key| {
            backend
                .claim(key.as_str(), &id)
                .map_err(|e| claim_error(key, e))
        })
        .with_poll_interval(self.poll)?;
        Ok(CloseSet::Claims(LeaseSet::new(claims)))
    }
}

/// A claim of `key` that could not be made, as the core's error, by what
/// the backend's error says to do.
fn claim_error(key: &ElectionName, e: election_url::Error) -> election_core::Error {
    let disposition = election_url::classify(&e).map(|class| class.disposition);
    match e {
        election_url::Error::Config(c) => election_core::Error::Config(c),
        e if disposition == Some(Disposition::OutcomeUnknown) => {
            election_core::Error::outcome_unknown(key, e)
        }
        e => election_core::Error::unavailable(key, e),
    }
}

/// The `close` command's lease set.
#[derive(Debug)]
enum CloseSet {
    /// The backend's own lease set.
    Backend(AnyLeaseSet),
    /// Per-key claims of the candidates' elections.
    Claims(LeaseSet<PerKeyClaims<AnyClaim>>),
}

impl CloseSet {
    fn held(&self, key: &str) -> bool {
        match self {
            CloseSet::Backend(s) => s.held(key),
            CloseSet::Claims(s) => s.held(key),
        }
    }

    fn epoch(&self, key: &str) -> Option<election_core::Epoch> {
        match self {
            CloseSet::Backend(s) => s.epoch(key),
            CloseSet::Claims(s) => s.epoch(key),
        }
    }

    async fn guard<R>(
        &self,
        key: &str,
        write: impl AsyncFnOnce(WriteToken<'_>) -> R,
    ) -> Result<R, election_core::Error> {
        match self {
            CloseSet::Backend(s) => s.guard(key, write).await,
            CloseSet::Claims(s) => s.guard(key, write).await,
        }
    }

    async fn close(&self) {
        match self {
            CloseSet::Backend(s) => s.close().await,
            CloseSet::Claims(s) => s.close().await,
        }
    }
}

/// How a campaign ended.
enum Campaigned<C: Claim> {
    Elected(Term<C>),
    /// Given another priority: campaign again with it.
    Reprioritize,
    /// Told to exit.
    Exit,
}

/// What follows a term.
enum Next {
    Campaign,
    Exit,
}

/// What a write needs: shared by the candidate's loop and the tasks of a
/// `lead()` term.
#[derive(Clone)]
struct Writes {
    writer: String,
    history: Arc<HistoryWriter>,
    resource: Resource,
    seq: Arc<AtomicU64>,
}

impl Writes {
    /// Records `event` (stamped `at` if given); returns its `mono_ns`.
    fn record_at(&self, at: Option<u64>, event: &CandidateEvent) -> Result<u64, CandidateError> {
        self.history
            .record_at(at, event)
            .map_err(|source| CandidateError::History {
                path: self.history.path().to_owned(),
                source,
            })
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// One write: `write` (stamped `checked`, when the lease was last
    /// checked), then its outcome.
    async fn write(&self, token: Token, checked: u64, how: How) -> Result<(), CandidateError> {
        let (seq, epoch) = (self.next_seq(), token.epoch().get());
        self.record_at(Some(checked), &CandidateEvent::Write { seq, epoch })?;
        let outcome = match how {
            How::Plain => self.resource.write(&self.writer, seq, token).await,
            How::Stall(d) => {
                tokio::time::sleep(d).await;
                self.resource.write(&self.writer, seq, token).await
            }
            How::Drop => {
                self.resource
                    .write_then_drop(&self.writer, seq, token)
                    .await
            }
        };
        self.record_at(None, &outcome.event(seq, epoch))?;
        Ok(())
    }

    /// One write with a token from `election_core::unguarded`.
    async fn unguarded(&self) -> Result<(), CandidateError> {
        election_core::unguarded(
            ELECTION,
            "torture: an unguarded write mixed with guarded ones",
            async |write_token| {
                let token = Token::from(&write_token);
                let (seq, epoch) = (self.next_seq(), token.epoch().get());
                self.record_at(None, &CandidateEvent::Unguarded { seq, epoch })?;
                let outcome = self.resource.write(&self.writer, seq, token).await;
                self.record_at(None, &outcome.event(seq, epoch))?;
                Ok(())
            },
        )
        .await?
    }

    /// The task of a `lead()` term under `cancel`: every `every`, issues a
    /// token from the lease (stops once that fails) and writes through a
    /// synchronous section of `hold` (a blocking client: an abort cannot
    /// stop it). `began` is told when the first write has begun.
    async fn slow_writes(
        self,
        lease: TermLease,
        every: Duration,
        hold: Duration,
        began: Arc<Notify>,
    ) {
        self.slow_writes_up_to(lease, every, hold, began, u64::MAX)
            .await;
    }

    /// [`slow_writes`](Writes::slow_writes), at most `max` writes.
    async fn slow_writes_up_to(
        self,
        lease: TermLease,
        every: Duration,
        hold: Duration,
        began: Arc<Notify>,
        max: u64,
    ) {
        for _ in 0..max {
            let checked = mono_ns();
            let Ok(token) = Token::issue(&lease) else {
                return;
            };
            let (seq, epoch) = (self.next_seq(), token.epoch().get());
            if self
                .record_at(Some(checked), &CandidateEvent::Write { seq, epoch })
                .is_err()
            {
                return;
            }
            began.notify_one();
            let handle = tokio::runtime::Handle::current();
            let outcome = tokio::task::block_in_place(|| {
                std::thread::sleep(hold);
                handle.block_on(self.resource.write(&self.writer, seq, token))
            });
            if self.record_at(None, &outcome.event(seq, epoch)).is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    }
}

/// How a write of the candidate's own loop goes.
#[derive(Clone, Copy, Debug)]
enum How {
    Plain,
    /// Waits this long between its `write` line and the resource.
    Stall(Duration),
    /// Its future is dropped right after the write ran.
    Drop,
}

/// The wait of a `stall`ed write.
const STALL: Duration = Duration::from_millis(300);

struct Ctx {
    writes: Writes,
    /// `fdrop`: drop each write's future after it ran, until then.
    drop_until: Option<tokio::time::Instant>,
    /// `stall`: the next write stalls this long.
    stall: Option<Duration>,
    /// `priority`: the priority of the next terms (0: none).
    priority: u32,
    /// The run's TTL (a yield's window; how often a waiting candidate of
    /// a priority says so).
    ttl: Duration,
    mode: Mode,
    poll: Duration,
    write_every: Duration,
    /// The synchronous section of a write under `cancel`.
    hold: Duration,
    clock: Arc<ShiftedClock>,
    stdin: mpsc::UnboundedReceiver<String>,
}

impl Ctx {
    /// Records `event` in the history; returns its `mono_ns`.
    fn record(&self, event: &CandidateEvent) -> Result<u64, CandidateError> {
        self.writes.record_at(None, event)
    }

    /// Records `event` and says it on stdout with its `mono_ns`.
    fn announce(&self, event: CandidateEvent) -> Result<(), CandidateError> {
        let mono = self.record(&event)?;
        let line = match event {
            CandidateEvent::Campaigning => format!("campaigning {mono}"),
            CandidateEvent::Elected { epoch } => format!("elected {epoch} {mono}"),
            CandidateEvent::Lost { epoch, .. } => format!("lost {epoch} {mono}"),
            CandidateEvent::Resigned { epoch } => format!("resigned {epoch} {mono}"),
            _ => return Ok(()),
        };
        say(&line);
        Ok(())
    }

    /// Handles a command that needs no term; true for `exit`.
    async fn idle_command(&mut self, cmd: Command) -> Result<bool, CandidateError> {
        match cmd {
            Command::Exit => return Ok(true),
            Command::Clock(s) => self.clock.shift(s),
            Command::DropWrites(ms) => {
                self.drop_until = Some(tokio::time::Instant::now() + Duration::from_millis(ms));
            }
            Command::Stall(d) => self.stall = Some(d),
            Command::Priority(p) => self.priority = p,
            Command::Unguarded => self.writes.unguarded().await?,
            // No term.
            Command::Resign | Command::Cancel | Command::Close | Command::Transfer(..) => {}
            Command::Unknown(line) => note(&format!("unknown command {line:?}")),
        }
        Ok(false)
    }

    /// Waits `d` while answering stdin; true if told to exit.
    async fn pause(&mut self, d: Duration) -> Result<bool, CandidateError> {
        let sleep = tokio::time::sleep(d);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => return Ok(false),
                line = self.stdin.recv() => if self.idle_command(command(line)).await? {
                    return Ok(true);
                },
            }
        }
    }

    /// `close`: hands the election from `term` to a lease set, runs one
    /// guarded write with a slow synchronous section, and closes the set
    /// the moment the write has begun.
    async fn close<C: Claim>(
        &mut self,
        term: Term<C>,
        sets: &Sets<'_>,
    ) -> Result<Next, CandidateError> {
        let set = Arc::new(sets.make().await?);
        let _ = set.held(ELECTION); // starts asking for the key
        self.resign(&term).await?;
        drop(term);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
        while !set.held(ELECTION) {
            if tokio::time::Instant::now() >= deadline {
                set.close().await;
                return Ok(Next::Campaign);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let Some(epoch) = set.epoch(ELECTION).map(|e| e.get()) else {
            set.close().await;
            return Ok(Next::Campaign);
        };
        self.announce(CandidateEvent::Elected { epoch })?;
        let began = Arc::new(Notify::new());
        let mut guarded = tokio::spawn({
            let (set, writes, hold, began) =
                (set.clone(), self.writes.clone(), self.hold, began.clone());
            async move {
                let checked = mono_ns();
                set.guard(ELECTION, async |write_token| {
                    let token = Token::from(&write_token);
                    let (seq, epoch) = (writes.next_seq(), token.epoch().get());
                    let _ = writes.record_at(Some(checked), &CandidateEvent::Write { seq, epoch });
                    began.notify_one();
                    let handle = tokio::runtime::Handle::current();
                    let outcome = tokio::task::block_in_place(|| {
                        std::thread::sleep(hold);
                        handle.block_on(writes.resource.write(&writes.writer, seq, token))
                    });
                    let _ = writes.record_at(None, &outcome.event(seq, epoch));
                })
                .await
            }
        });
        tokio::select! {
            () = began.notified() => {
                // Closed while the guarded write runs.
                self.announce(CandidateEvent::Resigned { epoch })?;
            }
            ended = &mut guarded => {
                let text = match ended {
                    Ok(Err(e)) => format!("guard refused: {}", error_chain(&e)),
                    _ => "guard ended".to_owned(),
                };
                self.announce(CandidateEvent::Lost { epoch, text })?;
            }
        }
        set.close().await;
        Ok(Next::Campaign)
    }

    /// `cancel` with `--unsafe`: what a dropped `lead()` did before issue
    /// 11 (the claim given up while the term's task still ran), done by
    /// hand: one slow write in a detached task, and the term resigned the
    /// moment it has begun. Only to prove that check 6 can fail.
    async fn cancel_unsafe<C: Claim>(&mut self, term: Term<C>) -> Result<Next, CandidateError> {
        let began = Arc::new(Notify::new());
        tokio::spawn(self.writes.clone().slow_writes_up_to(
            term.lease(),
            self.write_every,
            self.hold,
            began.clone(),
            1,
        ));
        began.notified().await;
        self.resign(&term).await?;
        Ok(Next::Campaign)
    }

    /// `cancel`: leads `term` through `Term::lead` with a task of slow
    /// writes, and drops the `lead()` future the moment the first write
    /// has begun (the task is then inside its synchronous section).
    async fn cancel<C: Claim>(&mut self, term: Term<C>) -> Result<Next, CandidateError> {
        let epoch = term.epoch().get();
        let began = Arc::new(Notify::new());
        let (writes, every, hold) = (self.writes.clone(), self.write_every, self.hold);
        let task_began = began.clone();
        let lead = term.lead(LeadOptions::default(), move |leadership| async move {
            let lease = leadership.lease().clone();
            leadership.spawn(writes.slow_writes(lease, every, hold, task_began));
            std::future::pending::<()>().await
        });
        tokio::select! {
            ended = lead => {
                // Ended before a write began: the term was lost.
                let text = match ended {
                    Err(election_core::Error::Lost(lost)) => error_chain(&lost),
                    Err(e) => format!("lead failed: {}", error_chain(&e)),
                    Ok(()) => "lead returned".to_owned(),
                };
                self.announce(CandidateEvent::Lost { epoch, text })?;
            }
            () = began.notified() => {
                // The `lead()` future is dropped here, mid-write.
                self.announce(CandidateEvent::Resigned { epoch })?;
            }
        }
        Ok(Next::Campaign)
    }

    /// Resigns `term`; records how it ended.
    async fn resign<C: Claim>(&self, term: &Term<C>) -> Result<(), CandidateError> {
        let epoch = term.epoch().get();
        self.announce(match term.resign().await {
            Ok(()) => CandidateEvent::Resigned { epoch },
            Err(election_core::Error::Lost(lost)) => CandidateEvent::Lost {
                epoch,
                text: error_chain(&lost),
            },
            // The term is over either way (the attempt was closed).
            Err(e) => CandidateEvent::Lost {
                epoch,
                text: format!("resign failed: {}", error_chain(&e)),
            },
        })
    }

    /// Hands `term` to `to` for `window` (`Term::transfer`); records how
    /// it ended like a resign. False if the core refused before anything
    /// changed (the term goes on).
    async fn transfer<C: Claim>(
        &self,
        term: &Term<C>,
        to: &str,
        window: Duration,
    ) -> Result<bool, CandidateError> {
        let epoch = term.epoch().get();
        let to = match Identity::new(to) {
            Ok(to) => to,
            Err(e) => {
                note(&format!("transfer to {to:?} refused: {e}"));
                return Ok(false);
            }
        };
        self.announce(match term.transfer(&to, window).await {
            Ok(()) => CandidateEvent::Resigned { epoch },
            Err(election_core::Error::Config(e)) => {
                note(&format!("transfer to {to} refused: {e}"));
                return Ok(false);
            }
            Err(election_core::Error::Lost(lost)) => CandidateEvent::Lost {
                epoch,
                text: error_chain(&lost),
            },
            // The term is over either way (the attempt was closed).
            Err(e) => CandidateEvent::Lost {
                epoch,
                text: format!("transfer failed: {}", error_chain(&e)),
            },
        })?;
        Ok(true)
    }

    /// Campaigns until elected (retrying transient failures), told to
    /// exit, or given another priority (the campaign is dropped, to begin
    /// again with it).
    async fn campaign<C: Claim>(
        &mut self,
        candidate: &Candidate<C>,
        election: &Backend,
    ) -> Result<Campaigned<C>, CandidateError> {
        let me = Identity::new(self.writes.writer.as_str())?;
        loop {
            self.announce(CandidateEvent::Campaigning)?;
            let campaign = candidate.campaign();
            tokio::pin!(campaign);
            // A candidate of a priority says so once it has waited half a
            // TTL, then every TTL (the holder may have changed).
            let prefer = tokio::time::sleep(self.ttl / 2);
            tokio::pin!(prefer);
            let outcome = loop {
                tokio::select! {
                    outcome = &mut campaign => break outcome,
                    line = self.stdin.recv() => match command(line) {
                        Command::Priority(p) => {
                            self.priority = p;
                            if p != candidate.priority() {
                                return Ok(Campaigned::Reprioritize);
                            }
                        }
                        other => if self.idle_command(other).await? {
                            return Ok(Campaigned::Exit);
                        },
                    },
                    () = &mut prefer => {
                        if candidate.priority() > 0
                            && let Err(e) =
                                election.prefer(ELECTION, &me, candidate.priority()).await
                        {
                            note(&format!("prefer failed: {}", error_chain(&e)));
                        }
                        prefer.as_mut().reset(tokio::time::Instant::now() + self.ttl);
                    }
                }
            };
            match outcome {
                Ok(term) => return Ok(Campaigned::Elected(term)),
                Err(e) if !e.is_permanent() => {
                    note(&format!("campaign failed, retrying: {}", error_chain(&e)));
                    if self.pause(self.poll).await? {
                        return Ok(Campaigned::Exit);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Leads `term` until it ends.
    async fn lead<C: Claim>(
        &mut self,
        term: Term<C>,
        sets: &Sets<'_>,
    ) -> Result<Next, CandidateError> {
        let epoch = term.epoch().get();
        self.announce(CandidateEvent::Elected { epoch })?;
        // Taken once: every write of the term presents it, also (unsafe
        // mode) after a loss.
        let token = Token::from_epoch(term.epoch());
        let mut ticks = tokio::time::interval(self.write_every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut lost = false;
        // A yield the core refused (the term goes on): not tried again.
        let mut refused = false;
        loop {
            tokio::select! {
                biased;
                request = term.preferred(), if !lost && !refused => {
                    // A preferred candidate waits: yield to it.
                    if self.transfer(&term, request.to.as_str(), self.ttl).await? {
                        return Ok(Next::Campaign);
                    }
                    // Refused before anything changed: not asked again.
                    refused = true;
                }
                loss = term.lost(), if !lost => {
                    self.announce(CandidateEvent::Lost { epoch, text: error_chain(&loss) })?;
                    if self.mode == Mode::Safe {
                        // Dropped without release: a lost claim may be
                        // another candidate's (the core never releases it).
                        return Ok(Next::Campaign);
                    }
                    lost = true;
                }
                line = self.stdin.recv() => match command(line) {
                    // Unsafe, after a loss: keep writing until the end.
                    Command::Resign if lost => {}
                    Command::Resign => {
                        self.resign(&term).await?;
                        return Ok(Next::Campaign);
                    }
                    Command::Exit => {
                        if !lost {
                            self.resign(&term).await?;
                        }
                        return Ok(Next::Exit);
                    }
                    Command::Cancel if !lost && self.mode == Mode::Safe => {
                        return self.cancel(term).await;
                    }
                    Command::Close if !lost && self.mode == Mode::Safe => {
                        return self.close(term, sets).await;
                    }
                    Command::Cancel if !lost => {
                        return self.cancel_unsafe(term).await;
                    }
                    Command::Transfer(to, window) if !lost => {
                        if self.transfer(&term, &to, window).await? {
                            return Ok(Next::Campaign);
                        }
                    }
                    other => {
                        self.idle_command(other).await?;
                    }
                },
                _ = ticks.tick() => {
                    // Safe: not one write once the term's validity ran out
                    // (the loss is reported on the next turn). The write is
                    // stamped before this check.
                    let checked = mono_ns();
                    if self.mode == Mode::Safe && term.is_lost() {
                        continue;
                    }
                    let how = if let Some(d) = self.stall.take() {
                        How::Stall(d)
                    } else if self
                        .drop_until
                        .is_some_and(|until| tokio::time::Instant::now() < until)
                    {
                        How::Drop
                    } else {
                        How::Plain
                    };
                    self.writes.write(token, checked, how).await?;
                }
            }
        }
    }

    /// The whole life of the candidate on one backend.
    async fn drive<C: Claim>(
        &mut self,
        mut candidate: Candidate<C>,
        sets: &Sets<'_>,
    ) -> Result<(), CandidateError> {
        loop {
            // `priority`: the next terms' priority.
            if candidate.priority() != self.priority {
                candidate = candidate.with_priority(self.priority);
            }
            let term = match self.campaign(&candidate, sets.backend).await? {
                Campaigned::Elected(term) => term,
                Campaigned::Reprioritize => continue,
                Campaigned::Exit => return Ok(()),
            };
            match self.lead(term, sets).await? {
                Next::Campaign => {}
                Next::Exit => return Ok(()),
            }
        }
    }
}

/// The lease settings given, less those the backend has no use for
/// (the orchestrator gives every candidate the same flags).
fn settings(args: &Args) -> Settings {
    candidate_testkit::open::usable_settings(
        &args.backend,
        Settings {
            ttl: args.ttl,
            renew: args.renew,
            grace: args.grace,
            ..Settings::default()
        },
    )
    .0
}

async fn run(args: Args) -> Result<(), CandidateError> {
    let history =
        HistoryWriter::create(&args.history).map_err(|source| CandidateError::History {
            path: args.history.clone(),
            source,
        })?;
    let mut ctx = Ctx {
        writes: Writes {
            writer: args.writer.clone(),
            history: Arc::new(history),
            resource: Resource::open(&args.resource, args.mode).await?,
            seq: Arc::new(AtomicU64::new(0)),
        },
        drop_until: None,
        stall: None,
        priority: 0,
        ttl: args.ttl.unwrap_or(Duration::from_millis(1500)),
        mode: args.mode,
        poll: args.poll,
        write_every: args.write_every,
        // A synchronous section long enough for the next term to begin
        // while it runs (on today's code), short against the TTL.
        hold: args
            .hold
            .unwrap_or_else(|| args.ttl.map_or(Duration::from_millis(400), |ttl| ttl / 4)),
        clock: Arc::new(ShiftedClock::default()),
        stdin: stdin_lines(),
    };
    ctx.record(&CandidateEvent::Start {
        pid: std::process::id(),
    })?;
    let identity = args.writer.as_str();
    let settings = settings(&args);
    let election = loop {
        match args.backend.open(&settings).await {
            Ok(election) => break election,
            Err(e) if candidate_testkit::open::transient(&e) => {
                note(&format!(
                    "cannot connect yet, retrying: {}",
                    error_chain(&e)
                ));
                if ctx.pause(args.poll.max(Duration::from_millis(100))).await? {
                    return Ok(());
                }
            }
            Err(e) => return Err(e.into()),
        }
    };
    // The torture clock where the backend takes one: `clock` jumps its
    // wall clock; expiry is judged on the monotonic clock, never shifted.
    // Elsewhere `clock` shifts nothing (the orchestrator sends it only
    // where there is one).
    let election = match election.with_clock(ctx.clock.clone()) {
        Ok(with_clock) => with_clock,
        Err(election_url::Error::Config(_)) => election,
        Err(e) => return Err(e.into()),
    };
    let candidate = election
        .candidate(ELECTION, identity)?
        .with_poll_interval(args.poll)?;
    let sets = Sets {
        backend: &election,
        identity,
        poll: args.poll,
        of_claims: args.set_of_claims,
    };
    ctx.drive(candidate, &sets).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error {}", error_chain(&e));
            return ExitCode::from(USAGE);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error {}", error_chain(&e));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, CandidateError> {
        parse(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_a_full_command_line() {
        let a = args(&[
            "--backend",
            "sqlite:///tmp/e.db",
            "--writer",
            "c1.2",
            "--history",
            "/tmp/h",
            "--resource",
            "sqlite:/tmp/r.db",
            "--ttl-ms",
            "1000",
            "--renew-ms",
            "300",
            "--poll-ms",
            "50",
            "--unsafe",
        ])
        .unwrap();
        assert_eq!(
            a.backend,
            "sqlite:///tmp/e.db".parse::<BackendUrl>().unwrap()
        );
        assert_eq!(a.writer, "c1.2");
        assert_eq!(a.ttl, Some(Duration::from_millis(1000)));
        assert_eq!(a.write_every, Duration::from_millis(20));
        assert_eq!(a.mode, Mode::Unsafe);
    }

    #[test]
    fn refuses_bad_command_lines() {
        let base = ["--writer", "c0.1", "--history", "h", "--resource", "file:r"];
        assert!(args(&base).is_err(), "--backend is missing");
        let mut ok = base.to_vec();
        ok.extend(["--backend", "file:///d"]);
        assert!(args(&ok).is_ok());
        for bad in [
            &["--backend", "zookeeper"][..],
            &["--backend", "file://relative"],
            &["--backend", "nats://h:1?colour=red"],
            &["--dir", "d"],
            &["--ttl-ms", "soon"],
            &["--ttl-ms"],
            &["--write-every-ms", "0"],
            &["--frobnicate"],
            &["--resource", "s3:x"],
            &["--writer", "c 1"],
        ] {
            let mut line = ok.clone();
            line.extend(bad);
            assert!(
                matches!(args(&line), Err(CandidateError::Usage(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn settings_a_backend_has_no_use_for_are_dropped() {
        let line = |backend: &str| {
            args(&[
                "--backend",
                backend,
                "--writer",
                "c0.1",
                "--history",
                "h",
                "--resource",
                "file:r",
                "--ttl-ms",
                "3000",
                "--renew-ms",
                "500",
                "--grace-ms",
                "200",
            ])
            .unwrap()
        };
        let ms = |n| Some(Duration::from_millis(n));
        let file = settings(&line("file:///d"));
        assert_eq!((file.ttl, file.renew, file.grace), (None, None, None));
        let sqlite = settings(&line("sqlite:///d.db"));
        assert_eq!(
            (sqlite.ttl, sqlite.renew, sqlite.grace),
            (ms(3000), ms(500), None)
        );
        let nats = settings(&line("nats://127.0.0.1:4222"));
        assert_eq!(
            (nats.ttl, nats.renew, nats.grace),
            (ms(3000), ms(500), ms(200))
        );
    }

    #[test]
    fn commands() {
        assert!(matches!(command(None), Command::Exit));
        assert!(matches!(command(Some("exit".into())), Command::Exit));
        assert!(matches!(command(Some(" resign ".into())), Command::Resign));
        assert!(matches!(
            command(Some("clock -3600".into())),
            Command::Clock(-3600)
        ));
        assert!(matches!(
            command(Some("clock soon".into())),
            Command::Unknown(_)
        ));
        assert!(matches!(command(Some("cancel".into())), Command::Cancel));
        assert!(matches!(command(Some("close".into())), Command::Close));
        assert!(matches!(
            command(Some("unguarded".into())),
            Command::Unguarded
        ));
        assert!(matches!(
            command(Some("stall".into())),
            Command::Stall(STALL)
        ));
        assert!(matches!(
            command(Some("stall 900".into())),
            Command::Stall(d) if d == Duration::from_millis(900)
        ));
        assert!(matches!(
            command(Some("transfer c2.1 1500".into())),
            Command::Transfer(to, d) if to == "c2.1" && d == Duration::from_millis(1500)
        ));
        assert!(matches!(
            command(Some("transfer c2.1 0".into())),
            Command::Unknown(_)
        ));
        assert!(matches!(
            command(Some("transfer c2.1 5 6".into())),
            Command::Unknown(_)
        ));
        assert!(matches!(
            command(Some("priority 3".into())),
            Command::Priority(3)
        ));
        assert!(matches!(
            command(Some("fdrop 4500".into())),
            Command::DropWrites(4500)
        ));
        assert!(matches!(
            command(Some("fdrop -1".into())),
            Command::Unknown(_)
        ));
    }

    #[test]
    fn the_clock_shifts_the_wall_only() {
        let clock = ShiftedClock::default();
        let before = clock.wall_unix_ms();
        clock.shift(-7200);
        let after = clock.wall_unix_ms();
        assert!(before - after > 7_100_000, "{before} {after}");
    }
}
