//! Helpers the SQLite backend's test files share.

use election_sqlite::{SqliteClaim, SqliteElection, SqliteOptions};

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
