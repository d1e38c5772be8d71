//! The election schema on a real server: created in its own schema (a
//! configurable name), never touching the application's tables, migrated
//! safely by many processes at once, and refused where unsafe.

use std::time::Duration;

use election_postgres::{Error, PostgresElection, PostgresOptions};
use postgres_testkit::Server;

fn server() -> Server {
    Server::start().expect("PostgreSQL must be installed: apt-get install -y postgresql")
}

/// What the epoch records' guards refuse: a delete, a truncate, a lowered
/// epoch, a renamed record.
const REFUSED_ON_EPOCHS: [&str; 4] = [
    "DELETE FROM election.epochs",
    "TRUNCATE election.epochs",
    "UPDATE election.epochs SET epoch = epoch - 1",
    "UPDATE election.epochs SET name = 'other'",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_its_own_schema_and_nothing_else() {
    let server = server();
    server
        .sql("CREATE TABLE public.leases (x int)")
        .expect("app table");
    server
        .sql("CREATE TABLE public.meta (x int)")
        .expect("app table");
    let options = PostgresOptions::default()
        .with_schema("jobs_election")
        .expect("name");
    PostgresElection::connect(&server.url(), options)
        .await
        .expect("open");
    let tables = server
        .sql("SELECT string_agg(table_schema || '.' || table_name, ',' ORDER BY table_schema, table_name) FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")
        .expect("list");
    assert_eq!(
        tables,
        "jobs_election.epochs,jobs_election.fences,jobs_election.heartbeats,jobs_election.leases,jobs_election.meta,jobs_election.waiters,public.leases,public.meta"
    );
    assert_eq!(
        server
            .sql("SELECT value FROM jobs_election.meta")
            .expect("version"),
        election_postgres::schema::SCHEMA_VERSION.to_string()
    );
    assert_eq!(
        server
            .sql("SELECT count(*) FROM public.leases")
            .expect("untouched"),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_opens_migrate_once() {
    let server = server();
    let url = server.url();
    let opens = (0..8).map(|_| {
        let url = url.clone();
        tokio::spawn(
            async move { PostgresElection::connect(&url, PostgresOptions::default()).await },
        )
    });
    for open in futures::future::join_all(opens).await {
        open.expect("task").expect("every concurrent open succeeds");
    }
    assert_eq!(
        server
            .sql("SELECT count(*) FROM election.meta")
            .expect("one version row"),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_a_newer_schema() {
    let server = server();
    PostgresElection::connect(&server.url(), PostgresOptions::default())
        .await
        .expect("open");
    server
        .sql("UPDATE election.meta SET value = 99")
        .expect("newer");
    let err = PostgresElection::connect(&server.url(), PostgresOptions::default())
        .await
        .expect_err("too new");
    assert!(
        matches!(
            err,
            Error::SchemaTooNew {
                found: 99,
                supported: election_postgres::schema::SCHEMA_VERSION
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_synchronous_commit_off() {
    let server = server();
    server
        .sql("ALTER ROLE postgres SET synchronous_commit = off")
        .expect("set");
    let err = PostgresElection::connect(&server.url(), PostgresOptions::default())
        .await
        .expect_err("unsafe");
    assert!(
        matches!(err, Error::UnsafeSetting { setting: "synchronous_commit", ref value } if value == "off"),
        "{err:?}"
    );
    assert!(matches!(
        err.into_core(&election_core::ElectionName::new("n").expect("name")),
        election_core::Error::Config(_)
    ));
    // The application's own pool with the setting off in its sessions.
    server
        .sql("ALTER ROLE postgres RESET synchronous_commit")
        .expect("reset");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query("SET synchronous_commit = off")
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect(&server.url())
        .await
        .expect("pool");
    let err = PostgresElection::with_pool(pool.clone(), PostgresOptions::default())
        .await
        .expect_err("unsafe");
    assert!(matches!(err, Error::UnsafeSetting { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_places_are_typed_errors() {
    let server = server();
    let fast = PostgresOptions::new(Duration::from_millis(900), Duration::from_millis(300))
        .expect("options");
    let no_db = server.url().replace("/postgres", "/no_such_db");
    let err = PostgresElection::connect(&no_db, fast.clone())
        .await
        .expect_err("no database");
    assert!(matches!(err, Error::Unusable { .. }), "{err:?}");
    server
        .sql("CREATE ROLE weak LOGIN; REVOKE CREATE ON DATABASE postgres FROM PUBLIC")
        .expect("role");
    let weak = server.url().replace("postgres@", "weak@");
    let err = PostgresElection::connect(&weak, fast.clone())
        .await
        .expect_err("no privilege to create the schema");
    assert!(matches!(err, Error::Unusable { .. }), "{err:?}");
    let bad_schema = PostgresOptions::default().with_schema("x; DROP");
    assert!(bad_schema.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_may_name_the_schema() {
    let server = server();
    let url = format!("{}?schema=from_url", server.url());
    let e = PostgresElection::connect(&url, PostgresOptions::default())
        .await
        .expect("open");
    assert_eq!(e.options().schema(), "from_url");
    let term = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    assert_eq!(
        server
            .sql("SELECT holder FROM from_url.leases WHERE name = 'jobs'")
            .expect("read"),
        "a"
    );
    term.resign().await.expect("resign");
    // Two elections in two schemas of one database are independent.
    let other = PostgresElection::connect(&server.url(), PostgresOptions::default())
        .await
        .expect("open");
    let t2 = other
        .candidate("jobs", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b");
    assert!(e.leader("jobs").await.expect("read").is_none());
    t2.resign().await.expect("resign");
}

/// The epoch records guard themselves: deleting, truncating or lowering one
/// is refused by the database (with the lease row also gone, a contender
/// could otherwise be elected beside a live holder); raising one is how a
/// claim records its epoch and stays allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epoch_records_refuse_to_be_deleted_or_lowered() {
    let server = server();
    let e = PostgresElection::connect(&server.url(), PostgresOptions::default())
        .await
        .expect("open");
    e.candidate("jobs", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("elected")
        .resign()
        .await
        .expect("resign");
    for sql in REFUSED_ON_EPOCHS {
        let err = server.sql(sql).expect_err(sql);
        assert!(err.to_string().contains("refused"), "{sql}: {err}");
    }
    server
        .sql("UPDATE election.epochs SET epoch = epoch + 1")
        .expect("raising is allowed");
    assert_eq!(
        server
            .sql("SELECT count(*) FROM election.epochs")
            .expect("count"),
        "1"
    );
}

/// Opens a fresh schema on `server`, sets it back to an older version with
/// `back` (which must set `meta`'s version), checks that each query of
/// `before` answers as given, then opens it again: that open must migrate
/// it to this crate's version. Returns the migrating election.
async fn migrated_from(
    server: &postgres_testkit::Server,
    back: &str,
    before: &[(&str, &str)],
) -> PostgresElection {
    let e = PostgresElection::connect(&server.url(), PostgresOptions::default())
        .await
        .expect("open");
    e.close().await;
    server.sql(back).expect("set back");
    for (query, answer) in before {
        assert_eq!(server.sql(query).expect(query), *answer, "{query}");
    }
    let e = PostgresElection::connect(&server.url(), PostgresOptions::default())
        .await
        .expect("open migrates");
    assert_eq!(
        server
            .sql("SELECT value FROM election.meta WHERE key = 'schema_version'")
            .expect("version"),
        election_postgres::schema::SCHEMA_VERSION.to_string()
    );
    e
}

/// A version-1 schema (one guard trigger for `UPDATE` and `DELETE`, whose
/// function ran for every claim) is migrated to version 2 at open: the
/// guards are replaced in one transaction and still refuse every delete,
/// truncate and lowering, and a claim still records its epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_schema_is_migrated_and_stays_guarded() {
    let server = server();
    // Back to version 1's objects, as an older release left them.
    let e = migrated_from(
        &server,
        "DROP TRIGGER epochs_never_deleted ON election.epochs; \
         CREATE OR REPLACE TRIGGER epochs_never_go_back BEFORE UPDATE OR DELETE ON election.epochs \
             FOR EACH ROW EXECUTE FUNCTION election.epochs_never_go_back(); \
         UPDATE election.meta SET value = 1",
        &[],
    )
    .await;
    assert_eq!(
        server
            .sql(
                "SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger \
                 WHERE tgrelid = 'election.epochs'::regclass AND NOT tgisinternal"
            )
            .expect("triggers"),
        "epochs_never_deleted,epochs_never_go_back,epochs_never_truncated"
    );
    for round in 0..2 {
        e.candidate("jobs", "a")
            .expect("candidate")
            .campaign()
            .await
            .unwrap_or_else(|err| panic!("claim {round} records its epoch: {err}"))
            .resign()
            .await
            .expect("resign");
    }
    for sql in REFUSED_ON_EPOCHS
        .into_iter()
        .chain(["UPDATE election.epochs SET epoch = NULL"])
    {
        let err = server.sql(sql).expect_err(sql);
        assert!(
            err.to_string().contains("refused") || err.to_string().contains("null value"),
            "{sql}: {err}"
        );
    }
    e.close().await;
}

/// A version-2 schema (no `fence_enter`, as the release before ADR 0044
/// left it, with a mark already stored) is migrated to version 3 at open:
/// the function is created in one transaction with the version, the
/// stored mark is kept and checked by it, and an open of the migrated
/// schema by a crate that only knows version 2 is refused (as
/// `refuses_a_newer_schema` shows for any newer version).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_schema_gets_the_fence_function() {
    let server = server();
    let fence_functions = "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
                           WHERE n.nspname = 'election' AND p.proname = 'fence_enter'";
    let e = migrated_from(
        &server,
        "DROP FUNCTION election.fence_enter(text, bigint); \
         INSERT INTO election.fences VALUES ('ledger', 5); \
         UPDATE election.meta SET value = 2",
        &[(fence_functions, "0")],
    )
    .await;
    const { assert!(election_postgres::schema::SCHEMA_VERSION >= 3) };
    assert_eq!(server.sql(fence_functions).expect("functions"), "1");
    let fence = e.fence();
    let r = fencing::ResourceName::new("ledger").expect("name");
    let t = |n| fencing::Token::from_epoch(election_core::Epoch::new(n).expect("epoch"));
    let stale = fence.begin_fenced(&r, t(4)).await;
    assert!(
        matches!(stale, Err(fencing::Error::Stale { high_water_mark, .. }) if high_water_mark == t(5)),
        "{stale:?}"
    );
    fence
        .begin_fenced(&r, t(6))
        .await
        .expect("raise")
        .commit()
        .await
        .expect("commit");
    assert_eq!(
        fencing::Fence::high_water_mark(&fence, &r)
            .await
            .expect("mark"),
        Some(t(6))
    );
    e.close().await;
}

/// What the marks' guards refuse (ADR 0047): a delete, a truncate, a
/// lowered mark, a renamed mark, a mark set to `NULL`.
const REFUSED_ON_FENCES: [&str; 5] = [
    "DELETE FROM election.fences",
    "TRUNCATE election.fences",
    "UPDATE election.fences SET mark = mark - 1",
    "UPDATE election.fences SET resource = 'other'",
    "UPDATE election.fences SET mark = NULL",
];

/// A version-3 schema (marks without guards, as the release before ADR
/// 0047 left it, with a mark already stored) is migrated to version 4 at
/// open: the guards are created in one transaction with the version, the
/// stored mark is kept, and deleting, truncating or lowering it is then
/// refused while the fence still raises it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_3_schema_gets_guarded_marks() {
    let server = server();
    let guards = "SELECT coalesce(string_agg(tgname, ',' ORDER BY tgname), '') FROM pg_trigger \
                  WHERE tgrelid = 'election.fences'::regclass AND NOT tgisinternal";
    let e = migrated_from(
        &server,
        "DROP TRIGGER fences_never_go_back ON election.fences; \
         DROP TRIGGER fences_never_deleted ON election.fences; \
         DROP TRIGGER fences_never_truncated ON election.fences; \
         DROP FUNCTION election.fences_never_go_back(); \
         INSERT INTO election.fences VALUES ('ledger', 5); \
         UPDATE election.meta SET value = 3",
        &[(guards, "")],
    )
    .await;
    const { assert!(election_postgres::schema::SCHEMA_VERSION >= 4) };
    assert_eq!(
        server.sql(guards).expect("triggers"),
        "fences_never_deleted,fences_never_go_back,fences_never_truncated"
    );
    for sql in REFUSED_ON_FENCES {
        let err = server.sql(sql).expect_err(sql);
        assert!(
            err.to_string().contains("refused") || err.to_string().contains("null value"),
            "{sql}: {err}"
        );
    }
    let fence = e.fence();
    let r = fencing::ResourceName::new("ledger").expect("name");
    let t = |n| fencing::Token::from_epoch(election_core::Epoch::new(n).expect("epoch"));
    assert!(matches!(
        fence.begin_fenced(&r, t(4)).await,
        Err(fencing::Error::Stale { .. })
    ));
    fence
        .begin_fenced(&r, t(6))
        .await
        .expect("raise")
        .commit()
        .await
        .expect("commit");
    assert_eq!(
        fencing::Fence::high_water_mark(&fence, &r)
            .await
            .expect("mark"),
        Some(t(6))
    );
    e.close().await;
}

/// A version-4 schema (no value columns) is migrated to version 5 at open
/// (ADR 0068): a term held across the migration shows no value, then
/// publishes one; a value left in the row by another term never shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_4_schema_gets_the_value_columns() {
    let server = server();
    let columns = "SELECT count(*) FROM information_schema.columns \
                   WHERE table_schema = 'election' AND table_name = 'leases' \
                   AND column_name IN ('value', 'value_epoch')";
    let e = migrated_from(
        &server,
        "ALTER TABLE election.leases DROP COLUMN value, DROP COLUMN value_epoch; \
         UPDATE election.meta SET value = 4",
        &[(columns, "0")],
    )
    .await;
    assert_eq!(server.sql(columns).expect("columns"), "2");
    let candidate = e.candidate("jobs", "a").expect("candidate");
    let term = candidate.campaign().await.expect("campaign");
    let shown = || async {
        candidate
            .leader()
            .await
            .expect("leader")
            .expect("a leads")
            .value
    };
    assert_eq!(shown().await, None);
    term.proclaim("10.0.3.17:8443").await.expect("proclaim");
    assert_eq!(
        shown().await.as_ref().map(|v| v.as_str()),
        Some("10.0.3.17:8443")
    );
    // A value of another epoch (a later term's row, or an older writer's)
    // is never shown with this term.
    server
        .sql("UPDATE election.leases SET value_epoch = value_epoch - 1")
        .expect("age the value");
    assert_eq!(shown().await, None);
    term.resign().await.expect("resign");
    e.close().await;
}

/// A version-6 schema (no waiters' queue) is migrated to version 7 at open
/// (ADR 0108): the queue's table, sequence and function appear, and a
/// waiter queues in it and is woken by the release (its poll is an hour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_6_schema_gets_the_waiters_queue() {
    let server = server();
    let objects = "SELECT (SELECT count(*) FROM information_schema.tables \
                   WHERE table_schema = 'election' AND table_name = 'waiters') \
                   + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
                   WHERE n.nspname = 'election' AND p.proname = 'waiter_head') \
                   + (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                   WHERE n.nspname = 'election' AND c.relname = 'waiter_seq')";
    let e = migrated_from(
        &server,
        "DROP FUNCTION election.waiter_head(text, bigint); DROP TABLE election.waiters; \
         DROP SEQUENCE election.waiter_seq; UPDATE election.meta SET value = 6",
        &[(objects, "0")],
    )
    .await;
    assert_eq!(server.sql(objects).expect("objects"), "3");
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .with_poll_interval(Duration::from_secs(3600))
        .expect("poll");
    let b = tokio::spawn(async move { b.campaign().await.expect("b wins") });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server
        .sql("SELECT count(*) FROM election.waiters WHERE name = 'jobs'")
        .expect("waiters")
        != "1"
    {
        assert!(std::time::Instant::now() < deadline, "b never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.resign().await.expect("resign");
    let b = tokio::time::timeout(Duration::from_secs(30), b)
        .await
        .expect("b woken by the release")
        .expect("task");
    assert!(b.epoch() > a.epoch());
    b.resign().await.expect("resign");
    e.close().await;
}

/// A version-7 schema (no transfer columns, no `waiters_all`) is migrated
/// to version 8 at open (ADR 0112): both appear, and a transfer request
/// reaches the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_7_schema_gets_the_transfer_columns() {
    let server = server();
    let objects = "SELECT (SELECT count(*) FROM information_schema.columns \
                   WHERE table_schema = 'election' AND table_name = 'leases' \
                   AND column_name LIKE 'transfer\\_%') \
                   + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
                   WHERE n.nspname = 'election' AND p.proname = 'waiters_all')";
    let e = migrated_from(
        &server,
        "DROP FUNCTION election.waiters_all(text, bigint); \
         ALTER TABLE election.leases DROP COLUMN transfer_to, DROP COLUMN transfer_by, \
         DROP COLUMN transfer_at, DROP COLUMN transfer_epoch; \
         UPDATE election.meta SET value = 7",
        &[(objects, "0")],
    )
    .await;
    assert_eq!(server.sql(objects).expect("objects"), "5");
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let (to, by) = (
        election_core::Identity::new("b").expect("identity"),
        election_core::Identity::new("ops").expect("identity"),
    );
    e.request_transfer("jobs", &to, &by)
        .await
        .expect("request")
        .expect("a holds it");
    let heard = tokio::time::timeout(Duration::from_secs(60), a.transfer_requested())
        .await
        .expect("a hears the request");
    assert_eq!(heard.to, to);
    a.resign().await.expect("resign");
    e.close().await;
}
