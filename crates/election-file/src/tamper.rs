//! The tamper watch of held terms (ADR 0074): one per [`FileElection`]
//! (shared by its clones), for all the terms its claims hold, instead of
//! one timer per term that checked its claim file every interval.
//!
//! What it looks at:
//! - **inotify on the election directory** (`IN_DELETE`, `IN_MOVED_FROM`,
//!   `IN_MOVED_TO`, `IN_MODIFY`, and the directory's own deletion or move):
//!   an event naming a held term's claim file or epoch record makes it
//!   check that term at once (the same check as before: the claim file at
//!   the path is the locked one, the record shows no later epoch). A
//!   queue overflow, or the directory deleted or moved, checks every term.
//! - **the request to hand a term over** (ADR 0112, `store::transfer`):
//!   every check of a term that finds it still held also reads the
//!   election's `.transfer` file and reports a request for the term's
//!   epoch (`TermReporter::transfer_requested`); the request's rename is
//!   an event naming the file, so it is read at once. Not tampering: it
//!   touches neither the claim file nor the record.
//! - **every interval, the directory's identity** (one `stat` of its
//!   path against the watched inode): a directory replaced at its path
//!   (an ancestor renamed, a mount over it) checks every term, and from
//!   then on this watch checks every term every interval (the old cost)
//!   until its last term ends.
//! - **every interval, a slice of the terms** (each term once every
//!   [`SWEEP_TICKS`] intervals): the backstop for what no directory event
//!   shows (a mount over one claim file).
//!
//! A term is also checked once when it is registered, after the
//! directory is watched: a change between the win and the watch is found
//! there, every later one by its event.
//!
//! If inotify cannot be started (the per-user limit of instances), or
//! the election accepts FUSE (`allow_fuse`: a FUSE filesystem's own
//! changes reach no inotify watch), the term gets the old per-term poll
//! ([`poll`]).
//!
//! [`FileElection`]: crate::FileElection

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use election_core::{Epoch, LossReason, TermReporter, WatchGuard};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent};
use tokio::io::unix::AsyncFd;

use crate::store::claim_file::Paths;
use crate::store::record::Record;

/// Each held term is checked at least once every this many intervals by
/// the sweep, whatever the events say (60 s at the default interval).
pub(crate) const SWEEP_TICKS: usize = 60;

/// One check of a term: the claim file at its path is still the one the
/// term locked (`dev`, `ino`), and the epoch record shows no later term.
/// `Some(detail)` if the term is lost. A path that cannot be examined for
/// another reason than "not found", or a record that does not read, counts
/// as no change (only the term's holder writes its record).
pub(crate) fn check(paths: &Paths, dev: u64, ino: u64, epoch: Epoch) -> Option<String> {
    match std::fs::metadata(&paths.lock) {
        Ok(m) if m.dev() == dev && m.ino() == ino => match Record::read(&paths.record) {
            Ok(Some(r)) if r.epoch > epoch => {
                Some(format!("the epoch record shows a later term {}", r.epoch))
            }
            _ => None,
        },
        Ok(_) => Some("the claim file was replaced".to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some("the claim file was deleted".to_owned())
        }
        Err(_) => None,
    }
}

/// Reports to the term of `epoch` the request that it be handed over
/// (ADR 0112) stored beside it, if any: only a request for this very
/// epoch (one left over from an earlier term never is; the core ignores
/// other epochs too). The core reports each request once.
pub(crate) fn report_request(paths: &Paths, epoch: Epoch, reporter: &TermReporter) {
    if let Some(request) = crate::store::transfer::read_for(&paths.transfer, epoch) {
        reporter.transfer_requested(request);
    }
}

/// The per-term poll (the watch before ADR 0074): [`check`] every
/// `interval`, for a term whose election could not start inotify; and
/// the request to hand it over, if one was stored.
pub(crate) fn poll(
    paths: Arc<Paths>,
    dev: u64,
    ino: u64,
    epoch: Epoch,
    interval: Duration,
    reporter: TermReporter,
) -> WatchGuard {
    WatchGuard::task(tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Some(detail) = check(&paths, dev, ino, epoch) {
                reporter.lose(LossReason::Revoked { detail });
                return;
            }
            report_request(&paths, epoch, &reporter);
        }
    }))
}

/// The tamper watch of one election directory's held terms (see the
/// module). Cheap to clone.
#[derive(Clone)]
pub(crate) struct TamperWatch {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TamperWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TamperWatch")
            .field("dir", &self.shared.dir)
            .field("interval", &self.shared.interval)
            .finish_non_exhaustive()
    }
}

struct Shared {
    dir: PathBuf,
    /// False: every term polls on its own ([`poll`]).
    events: bool,
    interval: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next: u64,
    /// The watched terms, by registration number (ordered, for the sweep).
    terms: BTreeMap<u64, Watched>,
    /// File name (claim file, record or transfer request) → the terms it
    /// belongs to.
    by_name: HashMap<OsString, Vec<u64>>,
    /// A task watches the directory.
    running: bool,
    /// The number of the task that watches it (or watched it last).
    task: u64,
    /// Where the sweep goes on.
    sweep_from: u64,
}

#[derive(Clone)]
struct Watched {
    paths: Arc<Paths>,
    dev: u64,
    ino: u64,
    epoch: Epoch,
    reporter: TermReporter,
}

/// The inotify instance, as tokio's `AsyncFd` wants it.
struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

fn names(paths: &Paths) -> [OsString; 3] {
    let name = |p: &Path| p.file_name().unwrap_or_default().to_owned();
    [
        name(&paths.lock),
        name(&paths.record),
        name(&paths.transfer),
    ]
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl TamperWatch {
    /// The watch of the terms held in `dir`; nothing runs until a term is
    /// watched.
    /// Without `events` (an election that accepts FUSE), every term polls.
    pub(crate) fn new(dir: PathBuf, interval: Duration, events: bool) -> Self {
        TamperWatch {
            shared: Arc::new(Shared {
                dir,
                events,
                interval,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Watches one term (its claim file locked as `dev`/`ino`, won with
    /// `epoch`) until the returned guard is dropped; reports its loss to
    /// `reporter`. `Err` if the directory's watch could not be started
    /// (then use [`poll`]). Must be called inside a tokio runtime.
    pub(crate) fn watch(
        &self,
        paths: Arc<Paths>,
        dev: u64,
        ino: u64,
        epoch: Epoch,
        reporter: TermReporter,
    ) -> std::io::Result<WatchGuard> {
        let watched = Watched {
            paths,
            dev,
            ino,
            epoch,
            reporter,
        };
        let id = {
            let mut st = self.shared.lock();
            if !self.shared.events {
                return Err(std::io::Error::other(
                    "the election accepts FUSE: every term polls",
                ));
            }
            if !st.running {
                let (fd, dir) = self.shared.start()?;
                st.task += 1;
                let running = Running(self.shared.clone(), st.task);
                tokio::spawn(run(running, fd, dir));
                st.running = true;
            }
            let id = st.next;
            st.next += 1;
            for n in names(&watched.paths) {
                st.by_name.entry(n).or_default().push(id);
            }
            st.terms.insert(id, watched.clone());
            id
        };
        // After the directory is watched: finds what changed before.
        self.shared.check(id, &watched);
        Ok(WatchGuard::new(Registration {
            shared: self.shared.clone(),
            id,
        }))
    }
}

/// Stops watching one term when dropped.
struct Registration {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.lock().remove(self.id);
    }
}

impl State {
    fn remove(&mut self, id: u64) {
        if let Some(w) = self.terms.remove(&id) {
            for n in names(&w.paths) {
                if let Some(ids) = self.by_name.get_mut(&n) {
                    ids.retain(|&i| i != id);
                    if ids.is_empty() {
                        self.by_name.remove(&n);
                    }
                }
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts inotify on the directory; returns it with the directory's
    /// identity, read after the watch was added.
    fn start(&self) -> std::io::Result<(AsyncFd<Fd>, (u64, u64))> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        inotify.add_watch(
            &self.dir,
            AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_MOVE_SELF
                | AddWatchFlags::IN_ONLYDIR,
        )?;
        let dir = identity(&self.dir).ok_or_else(|| std::io::Error::other("directory gone"))?;
        #[allow(unsafe_code)]
        // SAFETY: `Fd` owns the inotify descriptor (an `OwnedFd` inside
        // `Inotify`): it stays open, and the same, for as long as the
        // `AsyncFd` holds it, which closes it only when dropped.
        let fd = unsafe { AsyncFd::register(Fd(inotify)) }?;
        Ok((fd, dir))
    }

    /// Checks one term; reports and forgets it if lost, else reports the
    /// request to hand it over if one is stored.
    fn check(&self, id: u64, w: &Watched) {
        if let Some(detail) = check(&w.paths, w.dev, w.ino, w.epoch) {
            w.reporter.lose(LossReason::Revoked { detail });
            self.lock().remove(id);
        } else {
            report_request(&w.paths, w.epoch, &w.reporter);
        }
    }

    fn check_ids(&self, ids: impl IntoIterator<Item = u64>) {
        let terms: Vec<(u64, Watched)> = {
            let st = self.lock();
            ids.into_iter()
                .filter_map(|id| st.terms.get(&id).map(|w| (id, w.clone())))
                .collect()
        };
        for (id, w) in terms {
            self.check(id, &w);
        }
    }

    fn check_all(&self) {
        let ids: Vec<u64> = self.lock().terms.keys().copied().collect();
        self.check_ids(ids);
    }

    /// Handles one batch of events; true if the directory's watch ended
    /// (the directory was deleted, or the watch removed).
    fn on_events(&self, events: &[InotifyEvent]) -> bool {
        let everything = AddWatchFlags::IN_Q_OVERFLOW
            | AddWatchFlags::IN_IGNORED
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_UNMOUNT;
        let mut all = false;
        let mut ended = false;
        let mut ids = Vec::new();
        {
            let st = self.lock();
            for e in events {
                all |= e.mask.intersects(everything);
                ended |= e.mask.intersects(AddWatchFlags::IN_IGNORED);
                if let Some(these) = e.name.as_ref().and_then(|n| st.by_name.get(n)) {
                    ids.extend_from_slice(these);
                }
            }
        }
        if all {
            self.check_all();
        } else {
            ids.sort_unstable();
            ids.dedup();
            self.check_ids(ids);
        }
        ended
    }

    /// The sweep: the next slice of terms, so each is checked once every
    /// [`SWEEP_TICKS`] intervals.
    fn sweep(&self) {
        let ids = {
            let mut st = self.lock();
            let (ids, next) = sweep_slice(st.terms.keys().copied(), st.sweep_from, st.terms.len());
            st.sweep_from = next;
            ids
        };
        self.check_ids(ids);
    }

    /// True (and marks this task stopped) if no term is watched.
    fn stop_if_idle(&self) -> bool {
        let mut st = self.lock();
        if st.terms.is_empty() {
            st.running = false;
            true
        } else {
            false
        }
    }
}

/// One tick's slice of the sweep: of the `len` terms `ids` (ascending),
/// the next `ceil(len / SWEEP_TICKS)` from `from` on, wrapping around;
/// with where the next tick goes on. So [`SWEEP_TICKS`] ticks in a row
/// check every term that stayed watched through them.
fn sweep_slice(ids: impl Iterator<Item = u64> + Clone, from: u64, len: usize) -> (Vec<u64>, u64) {
    let n = len.div_ceil(SWEEP_TICKS);
    let mut slice: Vec<u64> = ids.clone().filter(|&id| id >= from).take(n).collect();
    if slice.len() < n {
        let more = n - slice.len();
        slice.extend(ids.filter(|&id| id < from).take(more));
    }
    let next = slice.last().map_or(0, |&id| id + 1);
    (slice, next)
}

/// Marks the directory unwatched when its task ends (also when its
/// runtime shuts down and drops it), so the next term starts another.
struct Running(Arc<Shared>, u64);

impl Drop for Running {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if st.task == self.1 {
            st.running = false;
        }
    }
}

/// The directory's task: events as they come, the directory's identity
/// and the sweep every interval; ends when no term is watched.
async fn run(running: Running, fd: AsyncFd<Fd>, dir: (u64, u64)) {
    let shared = running.0.clone();
    let mut tick = tokio::time::interval(shared.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    // Once the directory's events can no longer be trusted (it was
    // replaced at its path, deleted, or inotify failed): every term,
    // every interval.
    let mut blind = false;
    loop {
        let readable = async {
            if blind {
                std::future::pending().await
            } else {
                fd.readable().await
            }
        };
        tokio::select! {
            r = readable => {
                let read = match r {
                    Ok(mut guard) => match guard.try_io(|f| f.get_ref().0.read_events().map_err(Into::into)) {
                        Ok(read) => read,
                        Err(_would_block) => continue,
                    },
                    Err(e) => Err(e),
                };
                match read {
                    Ok(events) => {
                        if shared.on_events(&events) {
                            blind = true;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(dir = %shared.dir.display(), error = %e,
                            "tamper watch: inotify failed; checking every held claim file every interval");
                        blind = true;
                        shared.check_all();
                    }
                }
            }
            _ = tick.tick() => {
                if shared.stop_if_idle() {
                    return;
                }
                if blind {
                    shared.check_all();
                } else if identity(&shared.dir) != Some(dir) {
                    blind = true;
                    shared.check_all();
                } else {
                    shared.sweep();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::{SWEEP_TICKS, sweep_slice};

    proptest! {
        /// The sweep's backstop: whatever the terms and wherever the
        /// sweep stands, `SWEEP_TICKS` ticks in a row check each term.
        #[test]
        fn every_term_is_swept_within_sweep_ticks(
            ids in proptest::collection::btree_set(0u64..10_000, 0..400),
            from in 0u64..10_001,
        ) {
            let mut seen = BTreeSet::new();
            let mut at = from;
            for _ in 0..SWEEP_TICKS {
                let (slice, next) = sweep_slice(ids.iter().copied(), at, ids.len());
                prop_assert!(slice.len() <= ids.len().div_ceil(SWEEP_TICKS));
                seen.extend(slice);
                at = next;
            }
            prop_assert_eq!(seen, ids);
        }
    }
}
