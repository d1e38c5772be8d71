//! docs/recipes.md's "token in the row" fence on a real server: the exact
//! table and conditional upsert the page shows (read from the page, so the
//! two cannot drift) refuse an older token's write and take an equal or
//! newer one's.

use crate::common;

/// The recipes page (not part of this crate's package: the test is run in
/// the workspace only, like every test on postgres-testkit).
const RECIPES: &str = include_str!("../../../../docs/recipes.md");

/// The page's only ```sql block: the `report` table.
fn create_table() -> &'static str {
    let start = RECIPES.find("```sql\n").expect("a ```sql block") + "```sql\n".len();
    let len = RECIPES[start..].find("```").expect("its end");
    &RECIPES[start..start + len]
}

/// The statement `save_report` passes to `sqlx::query`, with the string
/// literal's `\` line continuations joined as Rust joins them.
fn upsert() -> String {
    let from = RECIPES.find("async fn save_report").expect("save_report");
    let rest = &RECIPES[from..];
    let rest = &rest[rest.find("sqlx::query(").expect("sqlx::query")..];
    let open = rest.find('"').expect("the literal") + 1;
    let len = rest[open..].find("\",").expect("its end");
    let mut sql = String::new();
    for (i, part) in rest[open..open + len].split("\\\n").enumerate() {
        sql.push_str(if i == 0 { part } else { part.trim_start() });
    }
    sql
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recipes_conditional_upsert_refuses_an_older_token() {
    let sql = upsert();
    assert!(
        sql.contains("WHERE excluded.token >= t.token"),
        "the recipe's upsert: {sql}"
    );
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    server.sql(create_table()).expect("the recipe's table");
    let mut written = Vec::new();
    for (token, body) in [
        (7_i64, "term 7"),
        (6, "term 6, late"),
        (7, "term 7 again"),
        (9, "term 9"),
        (8, "term 8, late"),
    ] {
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind("r")
            .bind(body)
            .bind(token)
            .execute(e.pool())
            .await
            .expect("upsert")
            .rows_affected();
        written.push((token, rows));
    }
    assert_eq!(written, [(7, 1), (6, 0), (7, 1), (9, 1), (8, 0)]);
    assert_eq!(
        server
            .sql("SELECT body || ':' || token FROM report WHERE id = 'r'")
            .expect("read"),
        "term 9:9"
    );
}
