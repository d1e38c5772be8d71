//! Time as a backend sees it, injectable for tests.

use std::fmt::Debug;

use tokio::time::Instant;

/// The clocks a backend reads (the SQLite and PostgreSQL backends re-export
/// this as `election_sqlite::Clock` and `election_postgres::Clock`).
///
/// Every lease decision uses [`now`](Clock::now), a monotonic clock: the
/// holder's validity and a contender's "no renewal seen for a full TTL"
/// (`election_sql::lease_row::may_claim`). The wall clock
/// ([`wall_unix_ms`](Clock::wall_unix_ms)) is only written to the lease row
/// for people to read (`acquired_unix_ms`, `renewed_unix_ms`), and no
/// server's clock is read: a jump of any wall clock cannot change who
/// leads. Tests inject clocks to show it.
///
/// A clock for a test: the system's, with a wall clock a day ahead. Given
/// to a backend's façade (`SqliteElection::with_clock`,
/// `PostgresElection::with_clock`), it moves the times shown for people
/// (a leader's `since`), never who leads.
///
/// ```
/// use election_core::{Clock, SystemClock};
///
/// /// The system's clocks, with a wall clock a day ahead (display only).
/// #[derive(Debug)]
/// struct WallClockAhead;
///
/// impl Clock for WallClockAhead {
///     fn now(&self) -> tokio::time::Instant {
///         SystemClock.now()
///     }
///     fn wall_unix_ms(&self) -> i64 {
///         SystemClock.wall_unix_ms() + 24 * 3600 * 1000
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert!(WallClockAhead.wall_unix_ms() > SystemClock.wall_unix_ms());
/// # }
/// ```
pub trait Clock: Send + Sync + Debug + 'static {
    /// The monotonic now.
    ///
    /// ```
    /// use election_core::{Clock, SystemClock};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let clock = SystemClock;
    /// let renewed_at = clock.now();
    /// // ... later: how long since the last renewal, on the monotonic clock
    /// let since = clock.now() - renewed_at;
    /// # let _ = since;
    /// # }
    /// ```
    fn now(&self) -> Instant;
    /// Milliseconds since the Unix epoch, for display only (negative
    /// before 1970, saturating at the ends of `i64`).
    ///
    /// ```
    /// use election_core::{Clock, SystemClock};
    ///
    /// let acquired_unix_ms = SystemClock.wall_unix_ms(); // for people to read, never to decide
    /// assert!(acquired_unix_ms > 1_577_836_800_000); // after 2020
    /// ```
    fn wall_unix_ms(&self) -> i64;
}

/// The system's clocks: tokio's monotonic `Instant` and `SystemTime`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_unix_ms(&self) -> i64 {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_wall_clock_is_after_2020() {
        // 2020-01-01T00:00:00Z in Unix ms.
        assert!(SystemClock.wall_unix_ms() > 1_577_836_800_000);
    }
}
