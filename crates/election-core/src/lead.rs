//! Leading safely: run the leader's work under its term.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;

use crate::{Claim, ConfigError, Error, Lease, Term, TermLease};

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
    pub fn with_drain_timeout(mut self, drain_timeout: Duration) -> Result<Self, ConfigError> {
        if drain_timeout > Duration::from_secs(3600) {
            return Err(ConfigError::BadSetting {
                setting: "drain_timeout",
                reason: format!("{drain_timeout:?} is above 1h"),
            });
        }
        self.drain_timeout = drain_timeout;
        Ok(self)
    }
}

/// What the leader's work gets from [`Term::lead`]: the lease of its term
/// and a way to spawn tasks that are bound to it.
#[derive(Clone, Debug)]
pub struct Leadership {
    lease: TermLease,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl Leadership {
    /// The lease of the term (epoch, lost signal) for fencing.
    pub fn lease(&self) -> &TermLease {
        &self.lease
    }

    /// Spawns a task bound to the term: it is aborted the moment the term is
    /// lost, and the claim is not released before it has finished (or the
    /// drain timeout aborted it).
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks.spawn(task);
    }
}

impl<C: Claim> Term<C> {
    /// Runs the leader's `work` under this term, then resigns.
    ///
    /// - The moment the term is lost, `work` (and every task it spawned
    ///   through [`Leadership::spawn`]) is cancelled and
    ///   [`Error::Lost`] is returned; the claim is not released (rule 3).
    /// - When `work` returns, its spawned tasks are drained for at most the
    ///   drain timeout (then aborted and [`Error::DrainTimedOut`] returned),
    ///   and only then is the claim released. So no guarded work runs after
    ///   the release, and none outlives the leadership.
    ///
    /// Cancel safety: dropping the future drops `work` and aborts its tasks,
    /// then drops the term, which gives the claim up (see [`Term`]).
    ///
    /// Failure model: a failing release is returned as its error, after the
    /// work finished.
    ///
    /// ```
    /// use election_core::{memory::MemoryBackend, Candidate, LeadOptions, Lease};
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
    /// assert_eq!(processed, 10);
    /// # Ok(()) }
    /// ```
    pub async fn lead<F, Fut, T>(self, options: LeadOptions, work: F) -> Result<T, Error>
    where
        F: FnOnce(Leadership) -> Fut,
        Fut: Future<Output = T>,
    {
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        let leadership = Leadership {
            lease: self.lease(),
            tasks: tasks.clone(),
        };
        let take_tasks = || {
            let mut guard = tasks.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *guard)
        };
        let lease = self.lease();
        let output = tokio::select! {
            biased;
            lost = lease.lost() => {
                take_tasks().shutdown().await;
                let _ = self.resign().await;
                return Err(Error::Lost(lost));
            }
            output = work(leadership) => output,
        };
        // Drain: wait for spawned tasks (which may spawn more), bounded.
        let deadline = tokio::time::sleep(options.drain_timeout);
        tokio::pin!(deadline);
        let mut set = take_tasks();
        loop {
            if set.is_empty() {
                set = take_tasks();
                if set.is_empty() {
                    break;
                }
            }
            tokio::select! {
                biased;
                lost = lease.lost() => {
                    set.shutdown().await;
                    take_tasks().shutdown().await;
                    let _ = self.resign().await;
                    return Err(Error::Lost(lost));
                }
                _ = set.join_next() => {}
                () = &mut deadline => {
                    set.shutdown().await;
                    take_tasks().shutdown().await;
                    let name = self.name().clone();
                    self.resign().await?;
                    return Err(Error::DrainTimedOut { name, drain_timeout: options.drain_timeout });
                }
            }
        }
        self.resign().await?;
        Ok(output)
    }
}
