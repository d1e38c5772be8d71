//! Leading safely: run the leader's work under its term.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config_error::{HOUR, check_setting};
use crate::term_state::TermState;
use crate::{Claim, ConfigError, Error, Lease, LeaseLost, LossReason, Term, TermLease, lock};

/// The default bound on draining the leader's work before release.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings of [`Term::lead`].
#[derive(Clone, Copy, Debug)]
pub struct LeadOptions {
    drain_timeout: Duration,
}

impl Default for LeadOptions {
    fn default() -> Self {
        LeadOptions {
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

impl LeadOptions {
    /// How long, after the work returned, to wait for the tasks it spawned
    /// through [`Leadership::spawn`] before aborting them. At most 1 hour.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::LeadOptions;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let options = LeadOptions::default().with_drain_timeout(Duration::from_secs(30))?;
    /// # let _ = options;
    /// assert!(LeadOptions::default().with_drain_timeout(Duration::from_secs(7200)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn with_drain_timeout(mut self, drain_timeout: Duration) -> Result<Self, ConfigError> {
        let ok = drain_timeout <= HOUR;
        self.drain_timeout = check_setting("drain_timeout", drain_timeout, ok, "above 1h")?;
        Ok(self)
    }
}

/// The tasks of one term: their abort handles, and a count of those whose
/// futures still exist (a task counts until it has returned or its future
/// was dropped after an abort, which for a task in a synchronous section is
/// only once that section has ended).
#[derive(Debug)]
struct Tasks {
    set: Mutex<TaskSet>,
    running: Arc<watch::Sender<usize>>,
}

#[derive(Debug, Default)]
struct TaskSet {
    handles: JoinSet<()>,
    /// The term has ended: no task may start any more.
    closed: bool,
}

/// Counts one task as running until dropped (with the task's future).
struct Running(Arc<watch::Sender<usize>>);

impl Running {
    fn new(running: &Arc<watch::Sender<usize>>) -> Self {
        running.send_modify(|n| *n += 1);
        Running(running.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Tasks {
    fn new() -> Self {
        Tasks {
            set: Mutex::new(TaskSet::default()),
            running: Arc::new(watch::channel(0).0),
        }
    }

    /// Starts a task unless the term has ended; false if it did not.
    fn start(&self, start: impl FnOnce(&mut JoinSet<()>, Running)) -> bool {
        let mut set = lock(&self.set);
        if set.closed {
            return false;
        }
        while set.handles.try_join_next().is_some() {}
        start(&mut set.handles, Running::new(&self.running));
        true
    }

    /// Ends the term for its tasks: none may start any more, and the
    /// running ones are asked to stop (aborted). Returns how many still run.
    fn close(&self) -> usize {
        let mut set = lock(&self.set);
        set.closed = true;
        set.handles.abort_all();
        *self.running.borrow()
    }

    /// Resolves once no task of the term runs.
    async fn stopped(&self) {
        let mut rx = self.running.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Resolves with `None` once every task has stopped, or with the
    /// backend's loss of the term if that comes first.
    async fn stopped_or_lost(&self, state: &TermState) -> Option<LeaseLost> {
        tokio::select! {
            biased;
            () = self.stopped() => None,
            lost = state.backend_lost() => Some(lost),
        }
    }
}

/// What the leader's work gets from [`Term::lead`]: the lease of its term
/// and a way to spawn tasks that are bound to it.
#[derive(Clone, Debug)]
pub struct Leadership {
    lease: TermLease,
    tasks: Arc<Tasks>,
}

impl Leadership {
    /// The lease of the term (epoch, lost signal) for fencing. It reads lost
    /// once the term is lost or has ended (`lead` returned or was dropped).
    ///
    /// ```
    /// use election_core::{Candidate, LeadOptions, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let epoch = term
    ///     .lead(LeadOptions::default(), |leadership| async move {
    ///         // Fence the job's writes with this epoch.
    ///         leadership.lease().epoch()
    ///     })
    ///     .await?;
    /// println!("the job ran in term {epoch}");
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> &TermLease {
        &self.lease
    }

    /// Spawns a task bound to the term: it is aborted the moment the term is
    /// lost, and the claim is not given up (released, or closed when `lead`
    /// is dropped) before it has actually stopped. An abort takes effect at
    /// the task's next await point: a task in a synchronous section (blocking
    /// I/O, CPU work) keeps the claim held until that section ends.
    ///
    /// Once the term has ended (`lead` returned, was dropped, or the term was
    /// lost), the task is not run: it is dropped at once, unpolled.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use election_core::{Candidate, LeadOptions};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let flushed = Arc::new(AtomicBool::new(false));
    /// let flag = flushed.clone();
    /// term.lead(LeadOptions::default(), |leadership| async move {
    ///     leadership.spawn(async move {
    ///         // A background part of the job: aborted if the term is lost.
    ///         flag.store(true, Ordering::Release);
    ///     });
    /// })
    /// .await?; // returns once the spawned task has stopped, then resigns
    /// assert!(flushed.load(Ordering::Acquire));
    /// # Ok(()) }
    /// ```
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let started = self.tasks.start(|set, running| {
            set.spawn(async move {
                let _running = running;
                task.await
            });
        });
        self.warn_unless(started, "task");
    }

    /// Runs blocking work (`std::thread::sleep`, blocking I/O, long CPU
    /// work) on tokio's blocking pool, bound to the term like
    /// [`spawn`](Leadership::spawn): the claim is not given up before `work`
    /// has returned. Blocking work cannot be aborted: once started it runs
    /// to its end, so check [`lease`](Leadership::lease)`().is_lost()`
    /// between steps and return when it turns true.
    ///
    /// Once the term has ended, `work` is not run.
    ///
    /// ```
    /// use election_core::{Candidate, LeadOptions, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// term.lead(LeadOptions::default(), |leadership| async move {
    ///     let lease = leadership.lease().clone();
    ///     leadership.spawn_blocking(move || {
    ///         for file in ["a.csv", "b.csv"] {
    ///             if lease.is_lost() {
    ///                 return; // cannot be aborted: check between steps
    ///             }
    ///             println!("compressing {file}");
    ///         }
    ///     });
    /// })
    /// .await?; // the claim is held until the blocking work returned
    /// # Ok(()) }
    /// ```
    pub fn spawn_blocking<F>(&self, work: F)
    where
        F: FnOnce() + Send + 'static,
    {
        let started = self.tasks.start(|set, running| {
            set.spawn_blocking(move || {
                let _running = running;
                work()
            });
        });
        self.warn_unless(started, "blocking work");
    }

    fn warn_unless(&self, started: bool, what: &str) {
        if !started {
            tracing::warn!(name = %self.lease.name(), epoch = self.lease.epoch().get(), "{what} spawned after the term ended: not run");
        }
    }
}

/// Owns the term while `lead` runs; if `lead`'s future is dropped, ends the
/// term only once every task of it has stopped (or the term is lost).
struct LeadGuard<C: Claim> {
    term: Option<Term<C>>,
    tasks: Arc<Tasks>,
    runtime: Option<tokio::runtime::Handle>,
}

impl<C: Claim> LeadGuard<C> {
    fn term(&self) -> &Term<C> {
        self.term
            .as_ref()
            .expect("the term is kept until lead ends")
    }

    /// Stops every task (aborting them) and waits until they have stopped
    /// or the backend reports a loss (then the claim may be another's
    /// already: waiting longer protects nothing, the fence does).
    async fn stop_tasks(&self) -> Option<LeaseLost> {
        self.tasks.close();
        self.tasks.stopped_or_lost(self.term().state()).await
    }

    /// Resigns once every task has stopped; after a loss, closes the term
    /// at once (no release) and then waits for the tasks to stop.
    async fn finish(mut self) -> Result<(), Error> {
        let lost = self.stop_tasks().await;
        let term = self.term.take().expect("the term is kept until lead ends");
        let resigned = term.resign().await;
        match lost {
            Some(lost) => {
                self.tasks.stopped().await;
                Err(Error::Lost(lost))
            }
            None => resigned,
        }
    }
}

impl<C: Claim> Drop for LeadGuard<C> {
    fn drop(&mut self) {
        let Some(term) = self.term.take() else {
            return;
        };
        // The lease reads lost from now on; the claim stays held (renewed
        // and watched) until every task has stopped.
        term.state().retire(LossReason::Dropped);
        let running = self.tasks.close();
        let runtime = match (&self.runtime, running) {
            (Some(runtime), 1..) => runtime,
            // Nothing runs (or no runtime to wait on): end the term now.
            _ => return drop(term),
        };
        tracing::info!(name = %term.name(), identity = %term.identity(), epoch = term.epoch().get(), running, "lead dropped: the claim is held until the term's tasks have stopped");
        let tasks = self.tasks.clone();
        // If the runtime is shutting down, the cleanup is dropped unpolled
        // (and with it the term, which gives the claim up): the runtime
        // drops the term's tasks too.
        runtime.spawn(async move {
            tasks.stopped_or_lost(term.state()).await;
            // Closes with End::Dropped, or End::Lost after a loss.
            drop(term);
        });
    }
}

impl<C: Claim> Term<C> {
    /// Runs the leader's `work` under this term, then resigns.
    ///
    /// - The moment the term is lost, `work` is dropped and every task it
    ///   spawned through [`Leadership::spawn`] is aborted; [`Error::Lost`]
    ///   is returned once they have stopped; the claim is not released
    ///   (rule 3).
    /// - When `work` returns, its spawned tasks are drained for at most the
    ///   drain timeout (then aborted and [`Error::DrainTimedOut`] returned
    ///   once they have stopped), and only then is the claim released. So
    ///   no task of the term runs after the release, and none outlives the
    ///   leadership; [`Leadership::spawn`] runs nothing after that.
    /// - The lease ([`Leadership::lease`]) reads lost from the moment the
    ///   term ends (see [`Term::is_lost`]).
    ///
    /// Only [`Leadership::spawn`] and [`Leadership::spawn_blocking`] tasks
    /// are tracked: work started with `tokio::spawn`, `spawn_blocking` or a
    /// thread of its own is not, and may outlive the term.
    ///
    /// Cancel safety: dropping the future drops `work` at once, marks the
    /// term ended (its lease reads lost, [`LossReason::Dropped`]) and
    /// aborts every task; the claim stays held (renewed and watched) until
    /// every task has actually stopped — a task in a synchronous section
    /// runs on until that section ends — and only then is the term dropped,
    /// which gives the claim up (see [`Term`]). A background task on the
    /// runtime `lead` ran on does the waiting. A loss ends the term before
    /// that (the claim is then not released, rule 3): tasks still running
    /// then are stopped only by the fence (a deposed leader's late write is
    /// refused by the resource's high-water mark). If that runtime shuts
    /// down meanwhile, the term is dropped with its tasks.
    ///
    /// Failure model: a failing release is returned as its error, after the
    /// work finished. A term that had already ended (a resign whose future
    /// was dropped) runs nothing: [`Error::NotHeld`], and the resign is
    /// finished; a term already lost returns [`Error::Lost`] at once.
    ///
    /// ```
    /// use election_core::{Candidate, LeadOptions, Lease};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let processed = term
    ///     .lead(LeadOptions::default(), |leadership| async move {
    ///         let epoch = leadership.lease().epoch();
    ///         leadership.spawn(async move { /* a background job of this term */ });
    ///         epoch.get() * 10
    ///     })
    ///     .await?;
    /// assert_eq!(processed, 20);
    /// # Ok(()) }
    /// ```
    pub async fn lead<F, Fut, T>(self, options: LeadOptions, work: F) -> Result<T, Error>
    where
        F: FnOnce(Leadership) -> Fut,
        Fut: Future<Output = T>,
    {
        let tasks = Arc::new(Tasks::new());
        let leadership = Leadership {
            lease: self.lease(),
            tasks: tasks.clone(),
        };
        let guard = LeadGuard {
            term: Some(self),
            tasks: tasks.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        };
        let state = guard.term().state().clone();
        if state.backend_loss().is_none() && state.is_lost() {
            // Ended before it was led (a resign whose future was dropped):
            // run nothing; finish the resign.
            let name = guard.term().name().clone();
            let _ = guard.finish().await;
            return Err(Error::NotHeld { name });
        }
        let run = async {
            let output = work(leadership).await;
            // Drain: wait for spawned tasks (which may spawn more), bounded.
            let drained = tokio::time::timeout(options.drain_timeout, tasks.stopped()).await;
            (output, drained.is_ok())
        };
        let (output, drained) = tokio::select! {
            biased;
            lost = state.backend_lost() => {
                let _ = guard.finish().await;
                return Err(Error::Lost(lost));
            }
            done = run => done,
        };
        let name = guard.term().name().clone();
        // Closes the task set (a task spawned after the drain is aborted
        // and waited for), then resigns.
        guard.finish().await?;
        if !drained {
            return Err(Error::DrainTimedOut {
                name,
                drain_timeout: options.drain_timeout,
            });
        }
        Ok(output)
    }
}
