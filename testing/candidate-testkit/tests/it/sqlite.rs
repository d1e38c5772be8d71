//! Real candidate processes sharing one SQLite database file.

use std::time::Duration;

use candidate_testkit::{Proc, mono_ns};
use nix::sys::signal::Signal;

const BIN: &str = env!("CARGO_BIN_EXE_election-candidate");
const TTL_MS: u64 = 600;
const RENEW_MS: u64 = 150;

fn start(db: &std::path::Path, identity: &str, extra: &[&str]) -> Proc {
    let (ttl, renew) = (TTL_MS.to_string(), RENEW_MS.to_string());
    let url = format!("sqlite://{}", db.to_str().expect("utf-8"));
    let mut args = vec!["--backend", &url, "--identity", identity];
    args.extend(["--ttl-ms", &ttl, "--renew-ms", &renew, "--poll-ms", "20"]);
    args.extend(extra);
    Proc::spawn(BIN, &args, identity)
}

fn candidate(db: &std::path::Path, identity: &str) -> Proc {
    start(db, identity, &["--name", "jobs"])
}

#[tokio::test]
async fn sigkill_of_the_leader_hands_over_with_a_higher_epoch() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = candidate(&db, "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut b = candidate(&db, "b");
    b.expect("campaigning");
    a.signal(Signal::SIGKILL);
    let (e2, _) = b.elected();
    assert!(e2 > e1, "epoch {e2} after {e1}");
    // How soon: see a_killed_holder_is_replaced_before_its_ttl (same host,
    // ADR 0026); the full-TTL wait: a_stopped_holder_is_not_replaced_before_its_ttl.
}

#[tokio::test]
async fn a_stopped_holder_is_not_replaced_before_its_ttl() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = candidate(&db, "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut b = candidate(&db, "b");
    b.expect("campaigning");
    // A stopped process keeps its same-host lock: no shortcut.
    let stopped = mono_ns();
    a.signal(Signal::SIGSTOP);
    let (e2, at) = b.elected();
    a.signal(Signal::SIGKILL);
    assert!(e2 > e1, "epoch {e2} after {e1}");
    // B saw no renewal for a full TTL; the last renewal was at most one
    // renew interval before the stop.
    let waited = Duration::from_nanos(at - stopped);
    assert!(
        waited >= Duration::from_millis(TTL_MS - RENEW_MS),
        "took over after {waited:?}"
    );
}

#[tokio::test]
async fn a_paused_leader_learns_its_loss_first_and_its_fenced_write_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = candidate(&db, "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    a.send("write ledger");
    assert_eq!(a.expect("wrote"), [e1.to_string()]);
    let mut b = candidate(&db, "b");
    b.expect("campaigning");
    a.signal(Signal::SIGSTOP);
    let (e2, _) = b.elected();
    assert!(e2 > e1);
    b.send("write ledger");
    assert_eq!(b.expect("wrote"), [e2.to_string()]);
    // The old leader wakes with a write already queued.
    a.send("write ledger");
    a.signal(Signal::SIGCONT);
    let first = a.line();
    assert!(
        first.starts_with("lost "),
        "the paused leader did something before learning its loss: {first:?}"
    );
    assert_eq!(a.expect("refused"), [e1.to_string(), e2.to_string()]);
    // The resource holds A's first write and B's write, nothing after B's.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
        .await
        .expect("connect");
    let writes: Vec<(i64, String)> =
        sqlx::query_as("SELECT epoch, identity FROM candidate_writes ORDER BY rowid")
            .fetch_all(&pool)
            .await
            .expect("select");
    assert_eq!(
        writes,
        [
            (i64::try_from(e1).unwrap(), "a".to_owned()),
            (i64::try_from(e2).unwrap(), "b".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_thousand_elections_in_one_database_from_three_processes() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    // Create the schema once so the three do not all migrate at once
    // (they could; this keeps the test about the elections).
    election_sqlite::SqliteElection::open(&db, election_sqlite::SqliteOptions::default())
        .await
        .expect("open");
    // A long TTL: this test is about 3,000 claims racing, not renewals.
    let args = ["--many", "1000", "--ttl-ms", "60000", "--renew-ms", "20000"];
    let mut procs: Vec<Proc> = (0..3)
        .map(|i| start(&db, &format!("p{i}"), &args))
        .collect();
    let mut total = 0;
    for p in &mut procs {
        total += p.expect("won")[0].parse::<usize>().expect("count");
    }
    assert_eq!(total, 1000, "every election has exactly one winner");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
        .await
        .expect("connect");
    let (rows, held, holders): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(holder), count(DISTINCT holder) FROM election_leases WHERE name LIKE 'e%'",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!((rows, held), (1000, 1000));
    assert!(holders >= 1);
    // One process resigns its terms at a time. Each resign is one write
    // transaction per term, and SQLite's busy wait is not fair: three
    // processes releasing hundreds of rows back to back can keep one of
    // them from the write lock past its busy timeout (the candidate's
    // default, 1 s; the binary has no setting for it) on a loaded machine,
    // and that release then fails with "database is locked" as it should.
    // That is not what this test is about.
    for p in &mut procs {
        p.send("resign");
        p.expect("resigned");
    }
    let still: i64 = sqlx::query_scalar("SELECT count(holder) FROM election_leases")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(still, 0);
}

/// A candidate polling once an hour, with a TTL of 30 s: every handover
/// it sees well within the test's patience came from the same-host lock's
/// wake-up (ADR 0026), not from a poll or an expired lease.
fn hourly_poller(db: &std::path::Path, identity: &str) -> Proc {
    let url = format!("sqlite://{}", db.to_str().expect("utf-8"));
    let args = [
        "--backend",
        &url,
        "--identity",
        identity,
        "--name",
        "jobs",
        "--ttl-ms",
        "30000",
        "--renew-ms",
        "5000",
        "--poll-ms",
        "3600000",
    ];
    Proc::spawn(BIN, &args, identity)
}

#[tokio::test]
async fn a_clean_resign_wakes_the_waiter_without_a_poll() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = hourly_poller(&db, "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut b = hourly_poller(&db, "b");
    b.expect("campaigning");
    let mut c = hourly_poller(&db, "c");
    c.expect("campaigning");
    a.send("resign");
    a.expect("resigning");
    a.expect("resigned");
    // One of the two waiters wins (well within the bound: its next poll is
    // an hour away, the TTL 30 s); the other keeps waiting.
    let deadline = std::time::Instant::now() + Duration::from_secs(25);
    let (mut winner, mut other) = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no waiter was elected within 25 s of the resign"
        );
        if let Some(line) = b.try_line() {
            assert!(line.starts_with("elected "), "b: {line:?}");
            break (b, c);
        }
        if let Some(line) = c.try_line() {
            assert!(line.starts_with("elected "), "c: {line:?}");
            break (c, b);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // Its resign wakes the last one too.
    winner.send("resign");
    winner.expect("resigning");
    winner.expect("resigned");
    let (e3, _) = other.elected();
    assert!(e3 > e1 + 1, "epoch {e3} after {e1} and one more term");
}

#[tokio::test]
async fn a_killed_holder_is_replaced_before_its_ttl() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = hourly_poller(&db, "a");
    a.expect("campaigning");
    let (e1, _) = a.elected();
    let mut b = hourly_poller(&db, "b").with_patience(Duration::from_secs(25));
    b.expect("campaigning");
    let killed = std::time::Instant::now();
    a.signal(Signal::SIGKILL);
    // The TTL is 30 s and b polls once an hour: only the kernel freeing
    // a's same-host lock can elect b within 25 s (ADR 0026).
    let (e2, _) = b.elected();
    let waited = killed.elapsed();
    assert!(e2 > e1, "epoch {e2} after {e1}");
    assert!(
        waited < Duration::from_secs(25),
        "took over after {waited:?}, as if it waited out the TTL"
    );
}

/// A lease set (`--set`) over `keys`, with a TTL of 30 s and an hourly
/// poll: every key it gets well within the test's patience came from the
/// same-host lock (ADR 0029), not from a poll or an expired lease.
fn hourly_set(db: &std::path::Path, identity: &str, keys: &str) -> Proc {
    let url = format!("sqlite://{}", db.to_str().expect("utf-8"));
    let args = [
        "--backend",
        &url,
        "--identity",
        identity,
        "--set",
        keys,
        "--ttl-ms",
        "30000",
        "--renew-ms",
        "5000",
        "--poll-ms",
        "3600000",
    ];
    Proc::spawn(BIN, &args, identity).with_patience(Duration::from_secs(25))
}

/// Reads `p`'s lines until it says it holds `n` keys (each line must be a
/// `won` count); panics after its patience.
/// How long after `since` `p` said it holds `n` keys, if it did within
/// `within` (its lines polled; each must be a `won` line).
async fn won_all(
    p: &mut Proc,
    n: usize,
    since: std::time::Instant,
    within: Duration,
) -> Option<Duration> {
    let want = format!("won {n}");
    while since.elapsed() < within {
        match p.try_line() {
            Some(line) => {
                assert!(line.starts_with("won "), "{}: {line:?}", p.label());
                if line == want {
                    return Some(since.elapsed());
                }
            }
            None => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    None
}

/// Whether a process holds the database's write lock now (a `BEGIN
/// IMMEDIATE` that may not wait is refused).
async fn write_locked(db: &std::path::Path) -> bool {
    use sqlx::Connection as _;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .busy_timeout(Duration::ZERO);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("open the database");
    let locked = sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut conn)
        .await
        .is_err();
    if !locked {
        sqlx::query("ROLLBACK")
            .execute(&mut conn)
            .await
            .expect("rollback");
    }
    let _ = conn.close().await;
    locked
}

fn holds(p: &mut Proc, n: usize) {
    let want = format!("won {n}");
    loop {
        let line = p.line();
        assert!(line.starts_with("won "), "{}: {line:?}", p.label());
        if line == want {
            return;
        }
    }
}

#[tokio::test]
async fn a_killed_lease_sets_keys_move_before_their_ttl() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = hourly_set(&db, "a", "k1,k2,k3");
    a.expect("campaigning");
    holds(&mut a, 3);
    let mut b = hourly_set(&db, "b", "k1,k2,k3");
    b.expect("campaigning");
    holds(&mut b, 0);
    let killed = std::time::Instant::now();
    a.signal(Signal::SIGKILL);
    // TTL 30 s, hourly polls: only the kernel freeing a's locks can move
    // the keys within 25 s (b's patience).
    holds(&mut b, 3);
    let waited = killed.elapsed();
    assert!(
        waited < Duration::from_secs(25),
        "took over after {waited:?}, as if it waited out the TTL"
    );
    b.send("resign");
    b.expect("resigning");
    b.expect("resigned");
}

#[tokio::test]
async fn a_closed_lease_set_wakes_the_waiting_set_without_a_poll() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let mut a = hourly_set(&db, "a", "k1,k2");
    a.expect("campaigning");
    holds(&mut a, 2);
    // A single candidate and a set want the same key: one lock per name.
    let mut c = hourly_poller(&db, "c");
    c.expect("campaigning");
    let mut b = hourly_set(&db, "b", "k1,k2,jobs");
    b.expect("campaigning");
    holds(&mut b, 0);
    a.send("resign");
    a.expect("resigning");
    a.expect("resigned");
    holds(&mut b, 2);
    // c holds `jobs`; its resign wakes b for it.
    let (e1, _) = c.elected();
    assert!(e1 > 0);
    c.send("resign");
    c.expect("resigning");
    c.expect("resigned");
    holds(&mut b, 3);
    b.send("resign");
    b.expect("resigning");
    b.expect("resigned");
}

#[tokio::test]
async fn a_stopped_lease_set_keeps_its_keys_for_a_ttl() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let set = |identity: &str| start(&db, identity, &["--set", "k1,k2"]);
    let mut a = set("a");
    a.expect("campaigning");
    holds(&mut a, 2);
    let mut b = set("b");
    b.expect("campaigning");
    holds(&mut b, 0);
    // A stopped process keeps its locks: no shortcut. A stop that lands
    // inside one of a's write transactions (a renewal every 150 ms) keeps
    // SQLite's write lock too, and then nobody can write until a runs
    // again: CI once saw b silent for 60 s. Such a stop is undone (SIGCONT,
    // a finishes its transaction) and made again.
    let mut retries = 0;
    let waited = loop {
        let stopped = std::time::Instant::now();
        a.signal(Signal::SIGSTOP);
        if let Some(waited) = won_all(&mut b, 2, stopped, Duration::from_millis(TTL_MS * 20)).await
        {
            break waited;
        }
        assert!(
            write_locked(&db).await,
            "b took nothing for 20 TTLs while the database was free"
        );
        retries += 1;
        assert!(
            retries < 5,
            "a was stopped inside a transaction {retries} times"
        );
        a.signal(Signal::SIGCONT);
        let free = tokio::time::Instant::now() + Duration::from_secs(30);
        while write_locked(&db).await {
            assert!(tokio::time::Instant::now() < free, "a kept the write lock");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    a.signal(Signal::SIGKILL);
    assert!(
        waited >= Duration::from_millis(TTL_MS - RENEW_MS),
        "took over after {waited:?}"
    );
}

/// `--many` with `--name` and `--at-once`: the names are the prefix's,
/// `held` answers with the terms held and a renewal age within the TTL,
/// and a term whose validity ran out while the process was stopped is
/// said as `lost <name>: <reason>`, after which `held` counts it out.
#[tokio::test]
async fn many_names_report_what_they_hold_and_each_loss() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("app.db");
    let many = ["--many", "3", "--name", "x-", "--at-once", "3"];
    let mut a = start(&db, "a", &many);
    assert_eq!(a.expect("won"), ["3"]);
    a.send("held");
    let held = a.expect("held");
    assert_eq!(held[0], "3");
    let age: u64 = held[1].parse().expect("age");
    assert!(age < TTL_MS * 1_000_000, "oldest renewal {age} ns ago");
    // Stopped past its TTL: no renewal landed, every term is lost.
    a.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_millis(TTL_MS * 2));
    a.signal(Signal::SIGCONT);
    let mut lost: Vec<String> = (0..3).map(|_| a.expect("lost")[0].clone()).collect();
    lost.sort();
    assert_eq!(lost, ["x-0:", "x-1:", "x-2:"]);
    a.send("held");
    assert_eq!(a.expect("held"), ["0", "0"]);
    a.send("resign");
    a.expect("resigned");
    a.wait_success().expect("exit 0");
}
