//! The fixtures this crate's doc examples share (ADR 0101): a lease table
//! in memory and its error. Not part of the crate's API: hidden from its
//! docs and exempt from semver, public only because a doctest is a crate
//! of its own.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use election_core::{ElectionName, Epoch};

use crate::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};

/// The error of [`Rows`]: the database is down. Its group is
/// [`Classed::Unavailable`].
#[derive(Debug)]
pub struct Down;

impl fmt::Display for Down {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("down")
    }
}

impl std::error::Error for Down {}

impl IntoCore for Down {
    fn classify(self) -> Classed<Self> {
        Classed::Unavailable(self)
    }
}

/// A lease table in memory: name -> (nonce, epoch); a 15 s TTL renewed
/// every 5 s.
#[derive(Debug, Default)]
pub struct Rows(pub Mutex<HashMap<String, (i64, i64)>>);

impl LeaseRows for Rows {
    type Error = Down;

    fn times(&self) -> LeaseTimes {
        LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5))
    }

    async fn renew_one(&self, hold: HeldRow<'_>, _budget: Duration) -> Result<bool, Down> {
        Ok(self.0.lock().unwrap().get(hold.name) == Some(&(hold.nonce, hold.epoch)))
    }

    async fn renew_many(&self, holds: &[HeldRow<'_>]) -> Result<HashSet<String>, Down> {
        let rows = self.0.lock().unwrap();
        let mine = |h: &&HeldRow<'_>| rows.get(h.name) == Some(&(h.nonce, h.epoch));
        Ok(holds
            .iter()
            .filter(mine)
            .map(|h| h.name.to_owned())
            .collect())
    }

    async fn confirm(&self, hold: HeldRow<'_>) -> Result<bool, Down> {
        self.renew_one(hold, Duration::ZERO).await
    }

    async fn release_many(&self, holds: &[HeldRow<'_>]) -> Result<(), Down> {
        let mut rows = self.0.lock().unwrap();
        for h in holds {
            if rows.get(h.name).is_some_and(|r| r.0 == h.nonce) {
                rows.remove(h.name);
            }
        }
        Ok(())
    }
}

/// `state` wins `name` in term 1 with nonce 42, and the table shows it.
pub fn win(state: &KeyedState, rows: &Rows, name: &ElectionName) {
    let first = Epoch::FIRST.get_i64();
    rows.0
        .lock()
        .unwrap()
        .insert(name.as_str().to_owned(), (42, first));
    let until = tokio::time::Instant::now() + rows.times().validity();
    state.won(name, 42, first, Epoch::FIRST, until);
}
