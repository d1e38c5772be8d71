//! Helpers the SQLite backend's test files share (each uses a part).
#![allow(dead_code)]

use election_sqlite::{SqliteClaim, SqliteElection, SqliteOptions};
use fencing::{ResourceName, Token};
use sqlx::Connection;

/// The election in `app.db` of `dir`, with `options`.
pub(crate) async fn open_with(dir: &tempfile::TempDir, options: SqliteOptions) -> SqliteElection {
    SqliteElection::open(dir.path().join("app.db"), options)
        .await
        .expect("open")
}

/// The term `identity` wins in election `jobs` (waiting until it does).
pub(crate) async fn elected(
    e: &SqliteElection,
    identity: &str,
) -> election_core::Term<SqliteClaim> {
    let candidate = e.candidate("jobs", identity).expect("candidate");
    candidate.campaign().await.expect("elected")
}

/// Creates the table `data (v)` the fenced writes insert into.
pub(crate) async fn create_data_table(e: &SqliteElection) {
    sqlx::query("CREATE TABLE data (v INTEGER NOT NULL)")
        .execute(e.pool())
        .await
        .expect("create");
}

/// One insert of `v` into `data`, fenced by `token` on resource `resource`
/// in the insert's own transaction; `Ok` if it committed (a refused token
/// rolls the insert back). The write comes first and the check second:
/// the order inside the transaction does not matter, the commit does.
pub(crate) async fn fenced_insert(
    e: &SqliteElection,
    resource: &str,
    token: Token,
    v: i64,
) -> Result<(), fencing::Error> {
    let resource = ResourceName::new(resource).expect("name");
    let mut conn = e.pool().acquire().await.expect("acquire");
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.expect("begin");
    sqlx::query("INSERT INTO data (v) VALUES (?1)")
        .bind(v)
        .execute(&mut *tx)
        .await
        .expect("insert");
    e.fence().advance_in(&mut tx, &resource, token).await?;
    tx.commit().await.expect("commit");
    Ok(())
}
