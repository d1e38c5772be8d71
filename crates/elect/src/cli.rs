//! The command line: `elect run`, `elect leader`, `elect observe`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

use crate::backend::{Timing, Url};
use crate::exit::Failure;
use crate::report::Style;

const ABOUT: &str = "Leader election from the shell: run a command as a singleton, see who leads";

const LONG_ABOUT: &str = "\
Leader election from the shell: run a command on exactly one host (or
process) at a time, like flock(1), consul lock or etcdctl elect, over a
directory (one host), a SQLite database, NATS JetStream, PostgreSQL or
etcd (many hosts).

Backends (--backend URL):
  file:///dir[?volatile_ok=1&unknown_fs_ok=1]
                              one host; a directory on a local disk
                              (ext4, xfs, btrfs, zfs, ...); volatile_ok=1
                              accepts tmpfs/ramfs (a reboot empties it and
                              tokens restart), unknown_fs_ok=1 a filesystem
                              type elect does not know to be local
  sqlite:///path/to/app.db    a lease row in a SQLite database
  nats://host:port[,host:port][?bucket=B&replicas=N&creds=FILE&token=T&single_replica_ok=1]
                              a lease in a NATS JetStream KV bucket
                              (without ?bucket=: elections, or for a TTL
                              other than its own, elections-ttl-3s, ...);
                              nats://user:password@host:port for passwords
  postgres://user@host:port/db[?schema=S&ttl=15s&renew=5s&passfile=FILE&sslmode=M]
                              a lease row in a PostgreSQL database (its own
                              schema); the password from PGPASSWORD,
                              ?passfile=, PGPASSFILE or ~/.pgpass
  etcd://[user@]host:port[,host:port][/prefix][?passfile=FILE]
                              a key with a lease in etcd v3, under the
                              prefix (default election); the password from
                              ETCDCTL_PASSWORD or ?passfile= (lines
                              host:port:user:password)
  (none)                      the file backend in $XDG_STATE_HOME/elect,
                              else /var/lib/elect for root, else
                              $HOME/.local/state/elect: zero setup, on a
                              disk so that epochs outlive a reboot
  Paths and values are percent-decoded (%20 is a space, %3F a '?', %25 a
  '%'); an unknown or repeated option, or any option on sqlite://, is
  refused. `leader`, `observe` and `repair-epoch` never
  create a directory, database or bucket.

A server that cannot be reached (also at start) is waited for, a line on
stderr per attempt with the cause; --timeout bounds the wait, --no-wait
tries once.

Exit codes: the command's own (128+N if killed by signal N); 64 usage;
69 backend unavailable, transient: try again later (server down, disk
full, database busy); 70 internal error; 75 not elected (--no-wait,
--timeout); 78 permanent: bad configuration or unusable state, the hint
names the fix; 79 term lost, command stopped; 126 command not executable;
127 command not found (both checked before campaigning).";

const EXAMPLES: &str = "\
Examples:
  # Run the nightly report on one host only; wait for the lease if another runs it
  elect run --name nightly-report -- ./report.sh

  # Like flock -n: give up at once (exit 75) if another candidate leads
  elect run --no-wait --name backup -- ./backup.sh

  # Many hosts: a lease in NATS, lost after 15 s without renewal
  elect run --backend nats://nats1:4222,nats2:4222 --ttl 15s --name dispatcher -- ./dispatch

  # Many hosts: a lease row in the PostgreSQL database the service already
  # uses (the password from PGPASSWORD or ~/.pgpass, never argv)
  elect run --backend postgres://app@db.internal/app --ttl 15s --name mailer -- ./mailer

  # Who leads, for people and for scripts
  elect leader --name dispatcher --backend nats://nats1:4222
  elect leader --name dispatcher --backend nats://nats1:4222 --json

  # Follow leadership changes as they happen
  elect observe --name dispatcher --backend nats://nats1:4222";

/// `elect`: run any command as a singleton, and see who leads.
#[derive(Debug, Parser)]
#[command(
    name = "elect",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    after_long_help = format!(
        "{EXAMPLES}\n\n{}\n\n{}",
        crate::secrets::HELP,
        crate::cgroup::HELP
    )
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Campaign, then run COMMAND while elected; resign when it exits.
    #[command(
        long_about = "\
Campaign for the election NAME; once elected, run COMMAND with ELECTION_NAME,
ELECTION_EPOCH, ELECTION_IDENTITY and ELECTION_TOKEN (the fencing token: the
epoch) in its environment. SIGINT, SIGTERM and SIGHUP sent to elect are
forwarded to COMMAND, except those a terminal sent (Ctrl-C): the kernel
delivers them to COMMAND too, so COMMAND sees each once.

Nothing of COMMAND outlives its term: a supervisor process (a second elect
process, forked before the campaign, which starts COMMAND only once the term
is won, and becomes a child subreaper) owns COMMAND and every process it starts,
also those that leave with setsid or a double fork, and stops them all
(SIGTERM, SIGKILL after --kill-grace) before the term is given up. When
COMMAND exits, what it left running is stopped, then elect resigns (the
next candidate is elected at once) and exits with COMMAND's code. SIGINT or
SIGTERM to elect: if COMMAND has not exited --kill-grace later, it and every
process it started get SIGKILL. If the term is lost (the lease could not be
renewed), the tree is stopped before a successor can lead, and elect exits
with 79. If elect is killed, even by SIGKILL, the supervisor kills the tree
at once; if elect is stopped or hung (SIGSTOP, a debugger), the supervisor
stops the tree when the lease's known validity ends. If the supervisor is
killed or does not stop the tree by its deadline (stopped), elect kills the
tree itself before it gives the term up. On the file backend COMMAND's
processes also hold the lock, as with flock(1): it is freed when the last of
them exits.

Each term's COMMAND runs in a cgroup v2 of its own (under
<cgroup2 mount>/elect, or $ELECT_CGROUP_PARENT; needs root or a delegated
directory; ELECT_CGROUP_PARENT=none for none), and the next winner on the
same host kills what is left in an earlier term's cgroup before its
COMMAND starts: even with elect and its supervisor both killed or stopped
(kill -9 or SIGSTOP of the process group, Ctrl-Z, the OOM killer, a frozen
container), nothing of a deposed term runs once the next term's COMMAND
starts on this host. The cgroup belongs to the election however the
backend is written (a bind mount, localhost or 127.0.0.1, servers in
another order): it is keyed by the store the backend reports. An elect run
started by a term's COMMAND keeps its terms inside that term's cgroup, so
the outer term's end stops the inner job too. The tree then leaves elect's
own cgroup: limits set there (a systemd unit's MemoryMax=) do not cover it
unless ELECT_CGROUP_PARENT points inside it.

Not guaranteed: without a cgroup (elect warns at start, and why), a process
COMMAND started that left its tree (setsid and a double fork, closing its
descriptors) runs on if elect and its supervisor are both killed or
stopped. A winner without a cgroup that sees an earlier term's cgroup on
this host still holding processes it cannot end says so and starts
COMMAND only once they are gone. On other hosts nothing can stop it.
Resources that must refuse a deposed leader check ELECTION_TOKEN.

While waiting, a backend failure that may pass (a full disk, a server
down) is retried with a line on stderr saying why; one that cannot (a
directory where a file belongs, a file that is not a database) ends elect
with 78 and a hint.

With --slots N, elect holds any one of N slots of NAME instead (a
semaphore: at most N commands run at once, across every backend's hosts).
Each slot is an election of its own, NAME#slot-I, with its own epochs, loss
and cgroup: COMMAND gets ELECTION_SLOT=I too, ELECTION_NAME stays NAME, and
ELECTION_EPOCH/ELECTION_TOKEN are the slot's (a fenced resource keeps a
high-water mark per slot; tokens of two slots are not comparable). All of
the rules above hold per slot. Every candidate of NAME must give the same N:
a name seen held without slots, or a slot at or above N held, is refused
with 78 (a use holding nothing at that moment is not seen).

The file backend locks NAME.lock with an open file description lock
(fcntl F_OFD_SETLK), which does not conflict with flock(1) or flock(2)
on the same file: `flock DIR/NAME.lock cmd` does not exclude elect, nor
elect it. Use elect on both sides.",
        after_help = "\
Examples:
  elect run --name nightly-report -- ./report.sh
  elect run --no-wait --name backup -- ./backup.sh           # exit 75 if taken
  elect run --timeout 30s --name migrate -- ./migrate.sh     # exit 75 after 30 s
  elect run --backend sqlite:///srv/app.db --ttl 30s --name mailer -- ./mailer
  elect run --backend nats://n1:4222,n2:4222?replicas=3 --name dispatcher -- ./dispatch
  elect run --name nightly -c './extract && ./load'          # a shell string, like flock -c
  elect run --slots 3 --name encoders -- ./encode.sh         # at most 3 at once; ELECTION_SLOT=0..2
  elect run -v --nats-token-file /run/secrets/nats --backend nats://n1:4222 --name x -- ./x"
    )]
    Run(Box<RunArgs>),
    /// Print who leads NAME now (identity, epoch, since when), or "no leader".
    #[command(after_help = "\
Examples:
  elect leader --name nightly-report
  elect leader --name dispatcher --backend nats://n1:4222 --json
  elect leader --name encoders --slots 3                     # one line per slot")]
    Leader(LeaderArgs),
    /// Print each change of leadership of NAME as it happens, vacancy included.
    #[command(after_help = "\
Examples:
  elect observe --name dispatcher --backend nats://n1:4222
  elect observe --name nightly-report --json | jq .
  elect observe --name encoders --slots 3                    # changes of every slot")]
    Observe(ObserveArgs),
    /// End the current term of NAME from outside, fenced: the deposed
    /// holder's COMMAND is stopped and the next candidate leads after it.
    #[command(
        long_about = "\
End the current term of NAME on behalf of --identity (an operator's way to take
leadership away; ADR 0111). The revocation takes an epoch above the holder's,
drawn as a winning claim draws one, and is stored in the holder's place: the
holder's next renewal or check fails and it loses its term (elect run stops
COMMAND and exits with 79) within its TTL at the latest. Candidates treat the
revocation as a holder that stopped renewing: the next one leads once the
deposed holder's lease could have run out (a TTL; on the file backend, once
the deposed holder closed), with an epoch above the revocation's. Prints the
revocation's epoch: raise every fenced resource's high-water mark to it (a
fence's advance) and the deposed holder's next write is refused at once.
elect leader and elect observe show the revocation until the next term.
Exits 0 with \"nothing to revoke\" when nobody leads NAME.",
        after_help = "\
Examples:
  elect revoke --name mailer --identity ops/alice
  elect revoke --backend sqlite:///srv/app.db --name mailer --json
  elect revoke --backend sqlite:///srv/app.db --name mailer --fence orders"
    )]
    Revoke(RevokeArgs),
    /// Ask the leader of NAME to hand its term to the candidate --to: the
    /// name is then reserved for it, and nobody else leads in between.
    #[command(
        long_about = "\
Ask the holder of NAME's current term, on behalf of --identity, to hand it to
the candidate whose identity is --to (ADR 0112). The request is stored beside
the term in the backend (no side channel); the holder hears it at its next
renewal at the latest. elect run, as the holder, sends its COMMAND
--handover-signal (SIGTERM by default) and, once COMMAND exited, ends its term
handing the name to the successor: for --handover-window only the successor
may lead, so no other waiting candidate races it; its term's epoch is above
the old one, so a fence refuses the old leader from the successor's first
write. A successor that never campaigns holds the name up for the window
only. With --wait DUR, waits until --to leads (exit 0), else exits 75.
Exits 0 with \"nothing to transfer\" when nobody leads NAME.",
        after_help = "\
Examples:
  elect transfer --name mailer --to web-2
  elect transfer --backend sqlite:///srv/app.db --name mailer --to web-2 --wait 30s
  elect run --name mailer --identity web-2 --take-over -- ./mailer   # the successor asks itself"
    )]
    Transfer(TransferArgs),
    /// Set a damaged or lost epoch record (file backend) to EPOCH: the safe
    /// way out of "corrupt epoch record". Never delete the record instead.
    #[command(
        name = "repair-epoch",
        long_about = "\
Set the epoch record of the election NAME (file backend) to EPOCH, durably;
the next term gets a higher epoch. Give an epoch at least as high as any
fencing token (ELECTION_TOKEN) a resource of this election has seen, so the
next leader's tokens are higher than every earlier one. Refused, changing
nothing, while a candidate of NAME runs, and when EPOCH is lower than an
epoch that may have been handed out: one the record (or what is left of it)
still shows, or the epoch ceiling (NAME.epoch-ceiling) when the record
cannot be trusted (after an OS restart, or when it is damaged or missing).
The error names the lowest EPOCH accepted.

Never delete the record: epochs would start again and fenced resources would
accept a deposed leader's writes, or refuse the new leader's. elect refuses
to campaign on a missing record once the election has had terms.",
        after_help = "\
Examples:
  elect repair-epoch --name nightly-report --epoch 5000
  elect repair-epoch --backend file:///srv/elections --name mailer --epoch 120"
    )]
    RepairEpoch(RepairEpochArgs),
    /// Print the man page (roff) on stdout, or write every page into --dir.
    #[command(after_help = "\
Examples:
  elect man | man -l -
  elect man run | man -l -
  elect man --dir ~/.local/share/man/man1      # then: man elect, man elect-run")]
    Man(ManArgs),
    /// Print the completion script for SHELL on stdout.
    #[command(after_help = "\
Examples:
  elect completions bash > ~/.local/share/bash-completion/completions/elect
  elect completions zsh > ~/.zfunc/_elect          # with fpath+=(~/.zfunc)
  elect completions fish > ~/.config/fish/completions/elect.fish")]
    Completions(CompletionsArgs),
}

/// Flags every subcommand has.
#[derive(Debug, Args)]
pub(crate) struct Common {
    /// The backend: file:///dir, sqlite:///path/to/db, nats://host:port?bucket=B,
    /// postgres://user@host/db or etcd://host:port,host:port/prefix
    /// [default: the file backend in a per-user runtime directory]
    #[arg(long, value_name = "URL")]
    pub(crate) backend: Option<String>,
    /// The election's name (1-200 bytes, no '/' or control characters).
    #[arg(long, value_name = "NAME", value_parser = election_name)]
    pub(crate) name: String,
    /// JSON: `leader` and `observe` print their answer as JSON on stdout;
    /// progress and errors are JSON objects on stderr, one per line.
    #[arg(long, conflicts_with = "quiet")]
    pub(crate) json: bool,
    /// No progress on stderr, only errors.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// More on stderr: -v the campaign's progress, every renewal, losses
    /// and why; -vv also the NATS client's and SQLite driver's debug events.
    #[arg(long, short = 'v', action = ArgAction::Count, conflicts_with = "quiet")]
    pub(crate) verbose: u8,
    #[command(flatten)]
    pub(crate) secrets: crate::secrets::SecretFlags,
}

impl Common {
    pub(crate) fn style(&self) -> Style {
        if self.json {
            Style::Json
        } else if self.quiet {
            Style::Quiet
        } else {
            Style::Human
        }
    }

    pub(crate) fn url(&self) -> Result<Option<Url>, Failure> {
        let url = self
            .backend
            .as_deref()
            .map(crate::backend::parse_url)
            .transpose()?;
        crate::secrets::resolve(
            url,
            &self.secrets,
            crate::report::Reporter::new(self.style()),
        )
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s)
}

/// `--poll`: a look takes a query; zero would spin a core.
fn poll(s: &str) -> Result<Duration, String> {
    let d = crate::duration::parse(s)?;
    if d < Duration::from_millis(10) {
        return Err(format!("{s:?} is below 10ms: observe would spin a core"));
    }
    Ok(d)
}

/// `--name`: a bad name is a usage error (64), said by clap.
fn election_name(s: &str) -> Result<String, String> {
    election_core::ElectionName::new(s)
        .map(|n| n.as_str().to_owned())
        .map_err(|e| e.to_string())
}

/// `--slots`: 1 to election_core::MAX_SLOTS; else a usage error (64).
fn slots(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of slots"))?;
    election_core::Slots::new("x", n)
        .map(|_| n)
        .map_err(|e| e.to_string())
}

/// `--value`: a value too long or with a control character is a usage
/// error (64), said by clap.
fn leader_value(s: &str) -> Result<String, String> {
    election_core::LeaderValue::new(s)
        .map(|v| v.as_str().to_owned())
        .map_err(|e| e.to_string())
}

/// `--handover-signal`: a signal by name (`TERM`, `SIGUSR1`) or number.
fn signal(s: &str) -> Result<nix::sys::signal::Signal, String> {
    use std::str::FromStr;
    let bad = || format!("{s:?} is not a signal (give a name such as TERM or USR1, or a number)");
    if let Ok(n) = s.parse::<i32>() {
        return nix::sys::signal::Signal::try_from(n).map_err(|_| bad());
    }
    let upper = s.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    match nix::sys::signal::Signal::from_str(&full) {
        Ok(nix::sys::signal::Signal::SIGKILL | nix::sys::signal::Signal::SIGSTOP) | Err(_) => {
            Err(bad())
        }
        Ok(sig) => Ok(sig),
    }
}

/// `--handover-window`: above zero, at most an hour.
fn window(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() || d > election_core::MAX_TRANSFER_WINDOW {
        return Err(format!(
            "a handover window is above zero and at most {:?}",
            election_core::MAX_TRANSFER_WINDOW
        ));
    }
    Ok(d)
}

/// `--identity`: a bad identity is a usage error (64), said by clap.
fn identity(s: &str) -> Result<String, String> {
    election_core::Identity::new(s)
        .map(|i| i.as_str().to_owned())
        .map_err(|e| e.to_string())
}

/// `elect run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Who this candidate is, as `leader` shows it (1-200 bytes, no control
    /// characters) [default: HOST/PID].
    #[arg(long, value_name = "ID", value_parser = identity)]
    pub(crate) identity: Option<String>,
    /// Lease TTL (sqlite, postgres, nats): the term is lost if it cannot be renewed
    /// for this long [default: 15s].
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) ttl: Option<Duration>,
    /// Renew interval (sqlite, postgres, nats) [default: a third of the TTL].
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) renew: Option<Duration>,
    /// Failover grace (nats): wait this long before leading after a crashed
    /// leader [default: a third of the TTL].
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) grace: Option<Duration>,
    /// Wait until elected (the default).
    #[arg(long, conflicts_with_all = ["no_wait", "timeout"])]
    pub(crate) wait: bool,
    /// Do not wait: exit at once (75) if another candidate leads.
    #[arg(long, short = 'n', conflicts_with = "timeout")]
    pub(crate) no_wait: bool,
    /// Wait at most DUR, then exit (75).
    #[arg(long, short = 'w', value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) timeout: Option<Duration>,
    /// How long COMMAND and the processes it started have between SIGTERM
    /// and SIGKILL when the term ends under them (lost, or COMMAND exited
    /// and left processes behind), and COMMAND has after a SIGINT or
    /// SIGTERM forwarded to it [default: half the time between the end
    /// of the lease's known validity and the earliest moment a successor
    /// can lead: TTL/20 on sqlite and postgres, TTL/20 + grace/2 on nats; 10s on the
    /// file backend, whose lock COMMAND's processes hold]. A value longer
    /// than that whole time (twice the default) is refused unless
    /// --allow-late-kill.
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) kill_grace: Option<Duration>,
    /// Accept a --kill-grace so long that COMMAND's processes may still run
    /// when the next leader starts.
    #[arg(long, requires = "kill_grace")]
    pub(crate) allow_late_kill: bool,
    /// Serve metrics in the Prometheus text format at
    /// http://ADDR/metrics, /healthz (liveness: 200, or 503 while this
    /// process leads but its renewals have not landed for longer than
    /// halfway from the renew interval to the lease's validity) and
    /// /leader (readiness: 200 while this process leads, 503 otherwise),
    /// from the start of the campaign until elect exits. Port 0 picks a free port; the
    /// address is said on stderr.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<std::net::SocketAddr>,
    /// Hold any one of N slots of NAME instead of NAME itself (a
    /// semaphore: at most N commands run at once, 1 to 64). Each slot is
    /// an election of its own (NAME#slot-I) with its own epochs: COMMAND
    /// also gets ELECTION_SLOT (the slot, 0 to N-1), and ELECTION_TOKEN
    /// fences the slot's resource only (keep a high-water mark per slot).
    /// Every candidate of NAME must give the same N; a name seen held
    /// without slots, or a slot at or above N held, is refused (78).
    #[arg(long, value_name = "N", value_parser = slots)]
    pub(crate) slots: Option<u32>,
    /// Publish VALUE with the term once elected, before COMMAND starts
    /// (its address, a config version): `elect leader` and `elect
    /// observe` show it with the term, and a new term begins without it.
    /// One line of text, at most 1024 bytes. To change it while leading,
    /// use the library (`Term::proclaim`).
    #[arg(long, value_name = "VALUE", value_parser = leader_value)]
    pub(crate) value: Option<String>,
    /// While waiting, ask the leader to hand the term to this candidate
    /// (`elect transfer --to` this candidate's identity), again for each
    /// new term of another holder: a rolling deploy's new replica takes
    /// over from the old one once it runs, with no race against other
    /// candidates (the name is reserved for it).
    #[arg(long, conflicts_with_all = ["no_wait", "slots"])]
    pub(crate) take_over: bool,
    /// This candidate's priority (0 by default): while it waits, after
    /// --prefer-after, it tells each new term of another holder that it
    /// waits with this priority; a leader run with --yield-to-preferred and
    /// a lower priority hands the term to it (equal priorities: no yield).
    #[arg(long, value_name = "P", conflicts_with_all = ["no_wait", "slots"])]
    pub(crate) priority: Option<u32>,
    /// How long a candidate with --priority waits before it asks a leader
    /// to yield to it (no flapping: a restarted preferred candidate does
    /// not move the term at once).
    #[arg(long, value_name = "DUR", value_parser = duration, default_value = "10s", allow_hyphen_values = true, requires = "priority")]
    pub(crate) prefer_after: Duration,
    /// While leading, hand the term to a waiting candidate whose --priority
    /// is above this run's (as to an `elect transfer` request: COMMAND gets
    /// --handover-signal, and --kill-grace to finish its work). A term
    /// yields at most once.
    #[arg(long, conflicts_with = "slots")]
    pub(crate) yield_to_preferred: bool,
    /// The signal COMMAND gets when the leader is asked to hand its term
    /// over (`elect transfer`, `--take-over`): once COMMAND exited, the
    /// term goes to the successor asked for instead of being released.
    /// COMMAND is killed after --kill-grace if it has not exited.
    #[arg(long, value_name = "SIG", value_parser = signal, default_value = "TERM")]
    pub(crate) handover_signal: nix::sys::signal::Signal,
    /// How long a handover reserves the name for the successor: if it does
    /// not lead by then (it died), anyone may [default: the TTL; 15s on
    /// the file backend].
    #[arg(long, value_name = "DUR", value_parser = window, allow_hyphen_values = true)]
    pub(crate) handover_window: Option<Duration>,
    /// Exit code when not elected (--no-wait, --timeout).
    #[arg(long, short = 'E', value_name = "N", default_value_t = crate::exit::NOT_ELECTED)]
    pub(crate) conflict_exit_code: u8,
    /// Exit code when the term is lost while COMMAND runs.
    #[arg(long, value_name = "N", default_value_t = crate::exit::LOST)]
    pub(crate) lost_exit_code: u8,
    /// Run SHELL_COMMAND with /bin/sh -c instead of COMMAND [ARGS...]
    /// (like flock -c).
    #[arg(
        long = "command",
        short = 'c',
        value_name = "SHELL_COMMAND",
        conflicts_with = "command"
    )]
    pub(crate) shell: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, required_unless_present = "shell", value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

impl RunArgs {
    /// `-c SHELL_COMMAND` becomes the command `/bin/sh -c SHELL_COMMAND`.
    pub(crate) fn take_shell(&mut self) {
        if let Some(shell) = self.shell.take() {
            self.command = vec!["/bin/sh".into(), "-c".into(), shell];
        }
    }

    pub(crate) fn timing(&self) -> Timing {
        Timing {
            ttl: self.ttl,
            renew: self.renew,
            grace: self.grace,
            observer: false,
            operator: false,
        }
    }
}

/// `elect leader`.
#[derive(Debug, Args)]
pub(crate) struct LeaderArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// NAME has N slots (`elect run --slots N`): print each slot's holder.
    #[arg(long, value_name = "N", value_parser = slots)]
    pub(crate) slots: Option<u32>,
    /// NATS: the lease TTL the election's candidates run with (their
    /// `elect run --ttl`); without ?bucket= it finds their bucket
    /// (elections-ttl-TTL if it exists, else elections) [default: 15s].
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) ttl: Option<Duration>,
}

/// `elect observe`.
#[derive(Debug, Args)]
pub(crate) struct ObserveArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// NATS: the lease TTL the election's candidates run with (their
    /// `elect run --ttl`); without ?bucket= it finds their bucket
    /// (elections-ttl-TTL if it exists, else elections) [default: 15s].
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) ttl: Option<Duration>,
    /// How often to look (at least 10ms). NATS and file: every change
    /// wakes observe (a file term that ended before the look is still
    /// printed), this is only a backstop. SQLite: a term that begins and
    /// ends between two looks is not printed; the jump in the epoch is said
    /// on stderr instead.
    #[arg(long, value_name = "DUR", value_parser = poll, default_value = "250ms", allow_hyphen_values = true)]
    pub(crate) poll: Duration,
    /// NAME has N slots (`elect run --slots N`): print each change of any
    /// slot's holder.
    #[arg(long, value_name = "N", value_parser = slots)]
    pub(crate) slots: Option<u32>,
}

/// `elect revoke`.
#[derive(Debug, Args)]
pub(crate) struct RevokeArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Who asks, as `leader` shows it (1-200 bytes, no control characters)
    /// [default: HOST/PID].
    #[arg(long, value_name = "ID", value_parser = identity)]
    pub(crate) identity: Option<String>,
    /// Also raise these fenced resources' high-water marks to the
    /// revocation's epoch, in the backend's own fence store (SQLite,
    /// PostgreSQL): each refuses the deposed holder's tokens from then on.
    #[arg(long, value_name = "RESOURCE", num_args = 1..)]
    pub(crate) fence: Vec<String>,
}

/// `elect transfer`.
#[derive(Debug, Args)]
pub(crate) struct TransferArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// The successor's identity, as it campaigns (`elect run --identity`).
    #[arg(long, value_name = "ID", value_parser = identity)]
    pub(crate) to: String,
    /// Who asks, as the holder's log shows it (1-200 bytes, no control
    /// characters) [default: HOST/PID].
    #[arg(long, value_name = "ID", value_parser = identity)]
    pub(crate) identity: Option<String>,
    /// Wait until the successor leads, at most DUR (exit 75 if it does
    /// not).
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) wait: Option<Duration>,
}

/// `elect repair-epoch`.
#[derive(Debug, Args)]
pub(crate) struct RepairEpochArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// The epoch the record is set to (at least the highest token seen).
    #[arg(long, value_name = "EPOCH")]
    pub(crate) epoch: election_core::Epoch,
}

/// `elect man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// The page: elect (the default), or a subcommand's (run, leader,
    /// observe, repair-epoch, ...), printed on stdout.
    #[arg(value_name = "SUBCOMMAND")]
    pub(crate) page: Option<String>,
    /// Write every page (elect.1, elect-run.1, ...) into DIR instead.
    #[arg(long, value_name = "DIR", conflicts_with = "page")]
    pub(crate) dir: Option<PathBuf>,
}

/// `elect completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_needs_a_command_and_one_waiting_mode() {
        let ok = Cli::try_parse_from(["elect", "run", "--name", "j", "--", "sh", "-c", "x"]);
        assert!(ok.is_ok());
        assert!(Cli::try_parse_from(["elect", "run", "--name", "j"]).is_err());
        assert!(
            Cli::try_parse_from([
                "elect",
                "run",
                "--name",
                "j",
                "--no-wait",
                "--timeout",
                "1s",
                "--",
                "x"
            ])
            .is_err()
        );
        assert!(
            Cli::try_parse_from(["elect", "run", "--name", "j", "--ttl", "15", "--", "x"]).is_err()
        );
        // --allow-late-kill only qualifies an explicit --kill-grace.
        assert!(
            Cli::try_parse_from([
                "elect",
                "run",
                "--name",
                "j",
                "--allow-late-kill",
                "--",
                "x"
            ])
            .is_err()
        );
    }
}
