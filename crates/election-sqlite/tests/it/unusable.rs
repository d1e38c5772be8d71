//! Files that are not usable election databases are refused as such
//! (permanent: fix the path), never as "busy, try again"; and reading who
//! leads creates nothing.

use election_sqlite::{Error, SqliteElection, SqliteOptions};

fn assert_unusable(e: &Error) {
    assert!(matches!(e, Error::Unusable(_)), "{e:?}");
    let core = match e {
        Error::Unusable(s) => Error::Unusable(sqlx::Error::Protocol(s.to_string())),
        _ => unreachable!(),
    }
    .into_core(&election_core::ElectionName::new("j").unwrap());
    assert!(matches!(core, election_core::Error::Config(_)), "{core:?}");
}

#[tokio::test]
async fn a_text_file_or_a_damaged_one_is_unusable() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "these are my notes, not a database\n".repeat(200)).unwrap();
    let e = SqliteElection::open(&text, SqliteOptions::default())
        .await
        .expect_err("a text file opened as a database");
    assert_unusable(&e);
    let e = SqliteElection::open_read_only(&text, SqliteOptions::default())
        .await
        .expect_err("a text file opened as a database");
    assert_unusable(&e);
}

#[tokio::test]
async fn election_tables_of_another_shape_are_unusable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    // Someone else's table under our name, and a schema version that says
    // it is ours (and up to date).
    let version = format!(
        "INSERT INTO election_meta VALUES ('schema_version', {})",
        election_sqlite::schema::SCHEMA_VERSION
    );
    for stmt in [
        "CREATE TABLE election_meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)",
        &version,
        "CREATE TABLE election_leases (name TEXT PRIMARY KEY, colour TEXT)",
        "CREATE TABLE election_epochs (name TEXT PRIMARY KEY, colour TEXT)",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    let election = SqliteElection::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let e = election
        .candidate("j", "a")
        .unwrap()
        .try_campaign()
        .await
        .expect_err("won on a table of another shape");
    assert!(matches!(e, election_core::Error::Config(_)), "{e:?}");
}

#[tokio::test]
async fn reading_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo.db");
    let e = SqliteElection::open_read_only(&missing, SqliteOptions::default())
        .await
        .expect_err("opened a missing file");
    assert!(matches!(e, Error::NotAFile { .. }), "{e:?}");
    assert!(!missing.exists());

    // An empty file (or one of the application's databases): no tables
    // are created.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    let opened = SqliteElection::open_read_only(&empty, SqliteOptions::default())
        .await
        .unwrap();
    assert!(opened.is_none());
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);

    // A real election database: who leads is read.
    let path = dir.path().join("elect.db");
    let rw = SqliteElection::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let term = rw.candidate("j", "a").unwrap().campaign().await.unwrap();
    let ro = SqliteElection::open_read_only(&path, SqliteOptions::default())
        .await
        .unwrap()
        .expect("election tables");
    let leader = ro.candidate("j", "obs").unwrap().leader().await.unwrap();
    assert_eq!(leader.map(|l| l.epoch), Some(term.epoch()));
    term.resign().await.unwrap();
}
