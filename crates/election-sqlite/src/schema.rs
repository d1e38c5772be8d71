//! The tables this crate creates in the database, and their migrations.
//!
//! Tables (never the application's own, never `PRAGMA user_version`):
//! - `election_meta(key, value)`: the schema version.
//! - `election_leases`: one row per election name.
//! - `election_fences`: one high-water mark per fenced resource.

use sqlx::{Connection, SqliteConnection};

use crate::Error;

/// The newest schema version this crate writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

const V1: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS election_leases (
        name TEXT PRIMARY KEY NOT NULL,
        holder TEXT,
        nonce INTEGER,
        epoch INTEGER NOT NULL CHECK (epoch >= 0),
        version INTEGER NOT NULL,
        ttl_ms INTEGER NOT NULL CHECK (ttl_ms > 0),
        acquired_unix_ms INTEGER,
        renewed_unix_ms INTEGER
    )",
    "CREATE TABLE IF NOT EXISTS election_fences (
        resource TEXT PRIMARY KEY NOT NULL,
        token INTEGER NOT NULL CHECK (token > 0)
    )",
];

/// Creates or migrates the election tables, in one `BEGIN IMMEDIATE`
/// transaction. Idempotent; safe to run from many processes at once.
pub async fn migrate(conn: &mut SqliteConnection) -> Result<(), Error> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS election_meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)",
    )
    .execute(&mut *tx)
    .await?;
    let found: Option<i64> =
        sqlx::query_scalar("SELECT value FROM election_meta WHERE key = 'schema_version'")
            .fetch_optional(&mut *tx)
            .await?;
    match found {
        Some(v) if v > SCHEMA_VERSION => {
            return Err(Error::SchemaTooNew {
                found: v,
                supported: SCHEMA_VERSION,
            });
        }
        Some(v) if v == SCHEMA_VERSION => {
            // A write, so a read-only database is refused here, at open,
            // rather than at the first claim.
            sqlx::query("UPDATE election_meta SET value = value WHERE key = 'schema_version'")
                .execute(&mut *tx)
                .await?;
        }
        _ => {
            for stmt in V1 {
                sqlx::query(*stmt).execute(&mut *tx).await?;
            }
            sqlx::query(
                "INSERT INTO election_meta (key, value) VALUES ('schema_version', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(SCHEMA_VERSION)
            .execute(&mut *tx)
            .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
