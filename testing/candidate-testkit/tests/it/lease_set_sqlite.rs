//! Lease-set processes over one SQLite database: a killed process's leases
//! are taken over once a contender has seen no renewal for a full TTL.

use crate::lease_set;

use std::time::Duration;

const TTL_MS: u64 = 3000;
const RENEW_MS: u64 = 1000;
const POLL_MS: u64 = 200;

fn bound() -> Duration {
    // The last renewal was at most a renew interval before the kill; a
    // contender notices it within a poll, waits a full TTL, and claims at
    // its next poll.
    Duration::from_millis(TTL_MS + RENEW_MS + 2 * POLL_MS) + lease_set::SLACK
}

/// One database for the processes of a test, and the flags every process
/// gets: (its directory, its path, its URL, the timing flags).
async fn database() -> (tempfile::TempDir, std::path::PathBuf, String, Vec<String>) {
    let dir = lease_set::disk_dir();
    let db = dir.path().join("leases.db");
    // Create the schema once, so that the processes do not all migrate at
    // once (they could; these tests are about the leases).
    election_sqlite::SqliteElection::open(&db, election_sqlite::SqliteOptions::default())
        .await
        .expect("open");
    let url = format!("sqlite://{}", db.display());
    let args = [
        ("--ttl-ms", TTL_MS),
        ("--renew-ms", RENEW_MS),
        ("--poll-ms", POLL_MS),
    ]
    .into_iter()
    .flat_map(|(flag, ms)| [flag.to_owned(), ms.to_string()])
    .collect();
    (dir, db, url, args)
}

/// A frozen holder's `held` answers false once its leases could have run
/// out, and its keys move during the freeze.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_never_answers_held_for_keys_taken_over() {
    let (_dir, db, url, args) = database().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lease_set::pause_past_the_ttl(&url, &args, bound(), async || write_lock_is_free(&db).await)
        .await;
}

/// Whether a writer can take the database's write lock within two seconds.
/// The running process holds it for a transaction at a time (well under a
/// second); a process stopped inside a transaction holds it until it runs
/// again.
async fn write_lock_is_free(db: &std::path::Path) -> bool {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .busy_timeout(Duration::from_secs(2));
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("connect");
    match sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await {
        Ok(_) => {
            sqlx::query("ROLLBACK")
                .execute(&mut conn)
                .await
                .expect("rollback");
            true
        }
        Err(sqlx::Error::Database(e)) if e.message().contains("locked") => false,
        Err(e) => panic!("BEGIN IMMEDIATE: {e}"),
    }
}

async fn run(count: usize) {
    let (_dir, _db, url, args) = database().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lease_set::share_and_fail_over(&url, &args, count, bound()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_a_thousand_keys_and_a_killed_ones_keys_move() {
    run(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_a_thousand_keys_and_two_are_killed_in_turn() {
    run(3).await;
}

/// Three balanced processes share the keys fairly; a killed one's keys
/// (and only those) go to the survivors, fairly, within the bound; a
/// newcomer gets its share from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_processes_share_fairly_and_take_over_a_killed_ones_keys() {
    let (_dir, _db, url, args) = database().await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lease_set::balance_and_fail_over(&url, &args, bound()).await;
}
