//! [`MemoryFence`]: high-water marks in memory, for the tasks of one process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::{Advance, Error, Fence, ResourceName, Token, WriteFn};

/// A [`Fence`] that keeps its high-water marks in memory, shared by the
/// tasks and threads of one process. Clones share the marks.
///
/// Each resource has its own asynchronous lock, held by
/// [`fenced`](Fence::fenced) across the write; writers of one resource take
/// turns in the order they asked, writers of different resources do not
/// wait for each other. The marks are lost when the last clone is dropped,
/// so this fences writers of one process only (tests, or an in-process
/// resource); use [`FileFence`](crate::FileFence) across processes.
///
/// It never returns [`Error::Unavailable`] or [`Error::Corrupt`]. It keeps
/// one small entry per resource it has seen.
///
/// ```
/// use election_core::Epoch;
/// use fencing::{Fence, MemoryFence, ResourceName, Token};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), fencing::Error> {
/// let fence = MemoryFence::new();
/// let other_handle = fence.clone();
/// let jobs = ResourceName::new("jobs")?;
/// fence.advance(&jobs, Token::from_epoch(Epoch::new(7).unwrap())).await?;
/// assert_eq!(other_handle.high_water_mark(&jobs).await?.unwrap().to_string(), "7");
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct MemoryFence {
    slots: Arc<Mutex<HashMap<ResourceName, Arc<Slot>>>>,
}

/// One resource: its turn lock and its mark. The mark is changed only by
/// the holder of the turn, and read by anyone.
#[derive(Default)]
struct Slot {
    turn: tokio::sync::Mutex<()>,
    mark: Mutex<Option<Token>>,
}

impl Slot {
    fn mark(&self) -> MutexGuard<'_, Option<Token>> {
        self.mark.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides and raises the mark; the caller holds the turn.
    fn advance(&self, resource: &ResourceName, token: Token) -> Result<Advance, Error> {
        let mut mark = self.mark();
        let advance = Advance::decide(resource, *mark, token)?;
        *mark = Some(advance.current);
        Ok(advance)
    }
}

impl MemoryFence {
    /// A new fence with no marks.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Fence, MemoryFence, ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), fencing::Error> {
    /// let fence = MemoryFence::new(); // shared by the tasks of one process
    /// let cache = ResourceName::new("cache")?;
    /// fence.fenced(&cache, Token::from_epoch(Epoch::FIRST), || async { /* the write */ }).await?;
    /// assert_eq!(fence.high_water_mark(&cache).await?, Some(Token::from_epoch(Epoch::FIRST)));
    /// # Ok(()) }
    /// ```
    pub fn new() -> MemoryFence {
        MemoryFence::default()
    }

    fn slot(&self, resource: &ResourceName) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.entry(resource.clone()).or_default().clone()
    }
}

impl std::fmt::Debug for MemoryFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let marks: HashMap<&ResourceName, Option<Token>> =
            slots.iter().map(|(r, s)| (r, *s.mark())).collect();
        f.debug_struct("MemoryFence")
            .field("marks", &marks)
            .finish()
    }
}

/// Cancel safety, beyond the trait's: the marks live in memory, so the
/// store finishes nothing in the background; a future dropped while waiting
/// for its turn has changed nothing.
impl Fence for MemoryFence {
    async fn advance(&self, resource: &ResourceName, token: Token) -> Result<Advance, Error> {
        let slot = self.slot(resource);
        let _turn = slot.turn.lock().await;
        slot.advance(resource, token)
    }

    async fn fenced<W>(
        &self,
        resource: &ResourceName,
        token: Token,
        write: W,
    ) -> Result<W::Outcome, Error>
    where
        W: WriteFn + FnOnce() -> <W as WriteFn>::Future,
    {
        let slot = self.slot(resource);
        let _turn = slot.turn.lock().await;
        slot.advance(resource, token)?;
        Ok(write().await)
    }

    async fn high_water_mark(&self, resource: &ResourceName) -> Result<Option<Token>, Error> {
        Ok(*self.slot(resource).mark())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{drop_during_the_write, res, t};
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn equal_tokens_pass_lower_ones_are_refused_with_both_values() {
        let fence = MemoryFence::new();
        let r = res("r");
        assert_eq!(fence.advance(&r, t(3)).await.unwrap().previous, None);
        let again = fence.advance(&r, t(3)).await.unwrap();
        assert_eq!((again.previous, again.raised()), (Some(t(3)), false));
        let err = fence.advance(&r, t(2)).await.unwrap_err();
        assert!(
            matches!(err, Error::Stale { presented, high_water_mark, ref resource }
                if presented == t(2) && high_water_mark == t(3) && *resource == r),
            "{err:?}"
        );
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(3)));
        // Resources have their own marks.
        assert_eq!(fence.high_water_mark(&res("other")).await.unwrap(), None);
        fence.advance(&res("other"), t(1)).await.unwrap();
    }

    #[tokio::test]
    async fn a_stale_write_never_runs_and_leaves_the_mark() {
        let fence = MemoryFence::new();
        let r = res("r");
        fence.advance(&r, t(5)).await.unwrap();
        let ran = AtomicBool::new(false);
        let out = fence
            .fenced(&r, t(4), || async { ran.store(true, Ordering::SeqCst) })
            .await;
        assert!(matches!(out, Err(Error::Stale { .. })));
        assert!(!ran.load(Ordering::SeqCst));
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(5)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_turn_is_held_across_the_write() {
        let fence = MemoryFence::new();
        let r = res("r");
        let fence2 = fence.clone();
        let r2 = r.clone();
        let mut rival = None;
        fence
            .fenced(&r, t(1), || async {
                // The mark is raised before the write runs.
                assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(1)));
                let handle =
                    tokio::spawn(
                        async move { fence2.advance(&r2, t(2)).await.map(|a| a.previous) },
                    );
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                assert!(!handle.is_finished(), "a rival got in during the write");
                assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(1)));
                // Another resource is not blocked.
                fence.advance(&res("free"), t(9)).await.unwrap();
                rival = Some(handle);
            })
            .await
            .unwrap();
        let previous = rival.unwrap().await.unwrap().unwrap();
        assert_eq!(previous, Some(t(1)));
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(2)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_fenced_during_the_write_releases_the_turn() {
        let fence = MemoryFence::new();
        let r = res("r");
        drop_during_the_write(&fence, &r, t(1)).await;
        // `run` is dropped: the turn is free again and the mark stayed raised.
        assert_eq!(fence.advance(&r, t(1)).await.unwrap().previous, Some(t(1)));
    }

    #[test]
    fn debug_shows_marks() {
        let fence = MemoryFence::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(fence.advance(&res("a"), t(2))).unwrap();
        assert_eq!(
            format!("{fence:?}"),
            r#"MemoryFence { marks: {"a": Some(Token(Epoch(2)))} }"#
        );
    }
}
