//! A lease set over a slow store makes progress (ADR 0058): a store whose
//! claim request costs time per key, bounded by a request timeout that
//! does not grow with the batch, so a large batch always times out (its
//! outcome unknown) while a small one gets through. The engine must not
//! ask for the same oversized batch again and again. Injected time:
//! tokio's paused clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use election_core::{
    Claimed, ElectionName, Epoch, Error, HeldKey, Identity, KeyedClaims, LeaseSet, Won,
};

/// What one key costs the store's claim request.
const PER_KEY: Duration = Duration::from_millis(2);
/// The request timeout: a claim of more than 250 keys never gets through.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// The wait between two claim rounds.
const POLL: Duration = Duration::from_millis(200);
const KEYS: usize = 1000;

#[derive(Debug)]
struct TimedOut;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the claim request timed out after {REQUEST_TIMEOUT:?}")
    }
}

impl std::error::Error for TimedOut {}

#[derive(Default)]
struct Store {
    /// Key -> (holder, epoch).
    rows: HashMap<ElectionName, (String, u64)>,
    next_epoch: u64,
    /// The size of every claim asked for, in order.
    asked: Vec<usize>,
}

struct SlowClaims {
    identity: Identity,
    store: Arc<Mutex<Store>>,
}

fn lock(store: &Mutex<Store>) -> std::sync::MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(PoisonError::into_inner)
}

impl KeyedClaims for SlowClaims {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<Claimed, Error>> {
        lock(&self.store).asked.push(keys.len());
        let cost = PER_KEY * u32::try_from(keys.len()).unwrap_or(u32::MAX);
        if cost > REQUEST_TIMEOUT {
            // Cut off at the timeout; what the request wrote is unknown to
            // the set (this store wrote nothing).
            tokio::time::sleep(REQUEST_TIMEOUT).await;
            return keys
                .iter()
                .map(|k| Err(Error::outcome_unknown(k, TimedOut)))
                .collect();
        }
        tokio::time::sleep(cost).await;
        let mut store = lock(&self.store);
        keys.iter()
            .map(|k| {
                if store.rows.contains_key(k) {
                    return Ok(Claimed::HeldBy(None));
                }
                store.next_epoch += 1;
                let epoch = store.next_epoch;
                store
                    .rows
                    .insert(k.clone(), (self.identity.as_str().to_owned(), epoch));
                Ok(Claimed::Won(Won {
                    epoch: Epoch::new(epoch).expect("epoch"),
                    valid_until: None,
                }))
            })
            .collect()
    }

    async fn confirm(&self, key: &ElectionName, _epoch: Epoch) -> Result<(), Error> {
        let store = lock(&self.store);
        match store.rows.get(key) {
            Some((holder, _)) if holder == self.identity.as_str() => Ok(()),
            _ => Err(Error::NotHeld { name: key.clone() }),
        }
    }

    async fn release(&self, held: &[HeldKey]) {
        let mut store = lock(&self.store);
        for (key, _) in held {
            store.rows.remove(key);
        }
    }

    async fn wait(&self) {
        tokio::time::sleep(POLL).await;
    }
}

/// 1,000 keys asked at once of a store where a claim of more than 250
/// keys times out: every key is held within a minute, and no claim after
/// one that timed out asks for as many keys again (before ADR 0058 every
/// claim asked for all 1,000 keys, timed out, and none was ever held).
#[tokio::test(start_paused = true)]
async fn a_batch_that_times_out_is_asked_smaller_until_every_key_is_held() {
    let store = Arc::new(Mutex::new(Store::default()));
    let set = LeaseSet::new(SlowClaims {
        identity: Identity::new("node-a").expect("identity"),
        store: store.clone(),
    });
    let keys: Vec<String> = (0..KEYS).map(|i| format!("key-{i}")).collect();
    for key in &keys {
        set.held(key); // asks about it
    }
    let all_held = async {
        while !keys.iter().all(|k| set.held(k)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let done = tokio::time::timeout(Duration::from_secs(60), all_held).await;
    let asked = lock(&store).asked.clone();
    let held = keys.iter().filter(|k| set.held(k)).count();
    assert!(
        done.is_ok(),
        "{held} of {KEYS} keys held after 60 s; {} claims were asked, {} of them for all {KEYS} keys; the first: {:?}",
        asked.len(),
        asked.iter().filter(|&&n| n == KEYS).count(),
        &asked[..asked.len().min(8)]
    );
    for pair in asked.windows(2) {
        let limit = REQUEST_TIMEOUT.as_millis() / PER_KEY.as_millis();
        if pair[0] as u128 > limit {
            assert!(
                pair[1] <= pair[0] / 2,
                "a claim of {} keys timed out, and the next asked for {}: {asked:?}",
                pair[0],
                pair[1]
            );
        }
    }
    set.close().await;
    assert!(lock(&store).rows.is_empty(), "close released every key");
}
