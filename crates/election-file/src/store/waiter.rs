//! Waiting for the claim without polling.
//!
//! One thread per claim file and process blocks in the kernel for the
//! exclusive lock (`F_OFD_SETLKW`), which the kernel grants the moment the
//! holder unlocks, closes the file or dies. Holding it, the thread wins the
//! claim (epoch record and all) for the first candidate of this process
//! still waiting, and hands it the locked file. So a handover costs one
//! kernel wake-up, the record write (a `pwrite` in place through the page
//! cache, ADR 0028; two fsyncs once per block of epochs, ADR 0025), and
//! one wake of the campaign.
//!
//! A handover (ADR 0112) frees the lock with the name reserved for its
//! successor: holding the lock, the thread answers every candidate that
//! is not the successor "reserved" (with the record as read; each then
//! waits out the window on its own, without this thread, see
//! `FileClaim::wait`) and wins the claim for the successor if it waits.
//! When nobody it serves may claim, it drops the lock and ends, so it
//! never spins on a free lock.
//!
//! A blocked lock call cannot be cancelled. A cancelled wait only leaves
//! the queue; the thread stays blocked until the next release, and then
//! drops the lock at once if nobody in the process waits any more (a
//! wasted epoch at worst, if the cancel races the hand-over). At most one
//! such thread exists per claim file and process, whatever the number of
//! cancelled waits. A process stopped with `SIGSTOP` while its thread waits
//! in the kernel takes nothing: the lock is acquired by the waiting thread
//! itself when it runs.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use election_core::{Epoch, Identity};
use tokio::sync::oneshot;

use crate::Error;
use crate::store::claim_file::{self, Locked, Paths};
use crate::store::lock::{self, Kind};
use crate::store::record::Record;

/// What a wait came to: a claim won for a waiting candidate (the locked
/// claim file and the epoch), or a handover that reserves the name for
/// another candidate (the record as read; nothing won).
pub(crate) type Claimed = Result<Waited, Error>;

/// See [`Claimed`].
#[derive(Debug)]
pub(crate) enum Waited {
    /// Won: the locked claim file and the epoch.
    Won(File, Epoch),
    /// Reserved for another candidate (ADR 0112): the record as read.
    Reserved(Box<Record>),
}

struct Subscriber {
    identity: Identity,
    /// The handover this candidate has seen for its window (see
    /// [`claim_file::claim_locked`]).
    waived: Option<Box<Record>>,
    tx: oneshot::Sender<Claimed>,
}

#[derive(Default)]
struct Queue {
    running: bool,
    waiting: VecDeque<Subscriber>,
}

struct Waiter {
    paths: Arc<Paths>,
    queue: Mutex<Queue>,
}

impl Waiter {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Arc<Waiter>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Arc<Waiter>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Queues `identity` for the claim at `paths`, with the handover it has
/// seen for its window (`waived`). The receiver resolves with the won
/// claim (or a reservation for another), or with an error (the sender
/// dropped) when the waiter gave up: then the caller simply tries again.
pub(crate) fn wait_for_claim(
    paths: &Arc<Paths>,
    identity: &Identity,
    waived: Option<Box<Record>>,
) -> oneshot::Receiver<Claimed> {
    let waiter = registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(paths.lock.clone())
        .or_insert_with(|| {
            Arc::new(Waiter {
                paths: paths.clone(),
                queue: Mutex::default(),
            })
        })
        .clone();
    let (tx, rx) = oneshot::channel();
    let mut queue = waiter.queue();
    queue.waiting.push_back(Subscriber {
        identity: identity.clone(),
        waived,
        tx,
    });
    if !queue.running {
        let w = waiter.clone();
        let spawned = std::thread::Builder::new()
            .name("election-file-wait".into())
            .spawn(move || run(&w));
        match spawned {
            Ok(_) => queue.running = true,
            // No thread: the caller wakes at once and polls instead.
            Err(_) => queue.waiting.clear(),
        }
    }
    rx
}

fn run(waiter: &Waiter) {
    loop {
        {
            let mut queue = waiter.queue();
            queue.waiting.retain(|s| !s.tx.is_closed());
            if queue.waiting.is_empty() {
                queue.running = false;
                return;
            }
        }
        let file = claim_file::open_claim_file(&waiter.paths.lock).and_then(|f| {
            lock::lock_blocking(&f, Kind::Exclusive)
                .map(|()| f)
                .map_err(|e| Error::io("lock", &waiter.paths.lock, e))
        });
        let file = match file {
            Ok(f) => f,
            Err(_) => {
                // Wake everyone; their own try reports the error.
                let mut queue = waiter.queue();
                queue.waiting.clear();
                queue.running = false;
                return;
            }
        };
        serve(waiter, file);
    }
}

/// Holding the claim's lock (`file`): wins the claim for the first waiting
/// candidate that may claim it, answering the candidates before it that
/// the name is reserved for another (ADR 0112). The lock is dropped if
/// nobody won it.
fn serve(waiter: &Waiter, file: File) {
    loop {
        let next = {
            let mut queue = waiter.queue();
            std::iter::from_fn(|| queue.waiting.pop_front()).find(|s| !s.tx.is_closed())
        };
        // Nobody waits any more: dropping `file` frees the lock at once.
        let Some(sub) = next else { return };
        let waived = sub.waived.as_deref();
        match claim_file::claim_locked(&waiter.paths, &sub.identity, waived, &file, true) {
            // If the candidate went away meanwhile, the value is dropped
            // with the channel, which closes the file and frees the lock.
            Ok(Locked::Won(epoch)) => return drop(sub.tx.send(Ok(Waited::Won(file, epoch)))),
            // Not this candidate's: it waits the window out on its own; the
            // lock is still held, for the next one.
            Ok(Locked::Reserved(record)) => drop(sub.tx.send(Ok(Waited::Reserved(record)))),
            // The claim file was replaced: the candidate retries on the new
            // one. (`NeedsDurable` only comes without durable writes.)
            Ok(Locked::Replaced | Locked::NeedsDurable) => return drop(sub),
            Err(e) => return drop(sub.tx.send(Err(e))),
        }
    }
}
