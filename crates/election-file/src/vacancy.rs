//! Waking waiting candidates the moment the claim is freed, without
//! polling.
//!
//! One thread per claim file and process blocks in the kernel on a *shared*
//! lock (`F_OFD_SETLKW`, `F_RDLCK`), which is granted the instant the holder
//! unlocks or dies. The thread drops the shared lock at once and wakes every
//! waiting campaign of this process, which then try the exclusive lock
//! without blocking. Shared locks do not conflict with each other, so the
//! waiters of many processes are woken together.
//!
//! A cancelled wait leaves the thread blocked until the next release; the
//! next wait on the same file reuses it, so there is at most one such
//! thread per claim file per process. A follower stopped with `SIGSTOP`
//! blocks nobody while it waits in the kernel; only between the grant of
//! the shared lock and its release (a few microseconds) would a stop delay
//! other candidates until `SIGCONT`.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;

use crate::lock::{self, Kind};

struct Watcher {
    running: Mutex<bool>,
    releases: watch::Sender<u64>,
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Arc<Watcher>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Arc<Watcher>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Subscribes to the next release of the claim file at `path` that happens
/// after this call (or to "the lock is free now"). The receiver's
/// `changed()` resolves then.
pub(crate) fn next_release(path: &Path) -> watch::Receiver<u64> {
    let watcher = {
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        reg.entry(path.to_owned())
            .or_insert_with(|| {
                Arc::new(Watcher {
                    running: Mutex::new(false),
                    releases: watch::channel(0).0,
                })
            })
            .clone()
    };
    let mut running = watcher.running.lock().unwrap_or_else(|p| p.into_inner());
    let rx = watcher.releases.subscribe();
    if !*running {
        *running = true;
        let (w, path) = (watcher.clone(), path.to_owned());
        let spawned = std::thread::Builder::new()
            .name("election-file-wait".into())
            .spawn(move || wait_for_release(&w, &path));
        if spawned.is_err() {
            // No thread: wake the caller at once; its poll interval is the
            // backstop.
            *running = false;
            watcher.releases.send_modify(|n| *n += 1);
        }
    }
    rx
}

fn wait_for_release(watcher: &Watcher, path: &Path) {
    // Any failure here (file gone, I/O error) simply wakes the waiters:
    // their next try reports the real error.
    if let Ok(file) = File::open(path)
        && lock::lock_blocking(&file, Kind::Shared).is_ok()
    {
        let _ = lock::unlock(&file);
    }
    let mut running = watcher.running.lock().unwrap_or_else(|p| p.into_inner());
    watcher.releases.send_modify(|n| *n += 1);
    *running = false;
}
