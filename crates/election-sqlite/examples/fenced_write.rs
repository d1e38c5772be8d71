//! A paused, deposed leader's write is refused by the fence, inside the
//! same transaction as the write.
//!
//! ```text
//! cargo run -p election-sqlite --example fenced_write
//! ```
//!
//! Leader A (a child process) wins a term (epoch 2 in a new database) and
//! takes its fencing token, then is paused with SIGSTOP. Its lease runs
//! out; B wins the next term and writes. A is resumed and makes the write it had in flight, with its old token:
//! the fence check in A's own transaction refuses it, and the write rolls
//! back with it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use election_sqlite::{SqliteElection, SqliteOptions};
use fencing::{ResourceName, Token};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use sqlx::Connection;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

async fn open(db: &str) -> Result<SqliteElection> {
    let options = SqliteOptions::new(Duration::from_millis(1000), Duration::from_millis(300))?;
    let election = SqliteElection::open(db, options).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS ledger (entry TEXT NOT NULL, epoch INTEGER NOT NULL)")
        .execute(election.pool())
        .await?;
    Ok(election)
}

/// The guarded write: check and advance the mark, then insert, in one
/// transaction.
async fn write(election: &SqliteElection, token: Token, entry: &str) -> Result<String> {
    let ledger = ResourceName::new("ledger")?;
    let mut conn = election.pool().acquire().await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    match election.fence().advance_in(&mut tx, &ledger, token).await {
        Ok(_) => {
            sqlx::query("INSERT INTO ledger (entry, epoch) VALUES (?1, ?2)")
                .bind(entry)
                .bind(i64::try_from(token.epoch().get())?)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(format!("wrote {entry:?} with token {token}"))
        }
        // Dropping `tx` rolls the transaction back.
        Err(e @ fencing::Error::Stale { .. }) => Ok(format!("refused: {e}")),
        Err(e) => Err(e.into()),
    }
}

/// Leader A, in a child process: wins, takes its token, waits for "go",
/// then writes with that token whatever happened meanwhile.
async fn leader_a(db: &str) -> Result<()> {
    let election = open(db).await?;
    let term = election.candidate("ledger-writer", "A")?.campaign().await?;
    let token = Token::issue(&term)?;
    println!("elected {}", term.epoch());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    println!("A's term lost: {}", election_core::Lease::is_lost(&term));
    println!("{}", write(&election, token, "from A").await?);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, mode, db] = args.as_slice()
        && mode == "leader-a"
    {
        return leader_a(db).await;
    }
    let dir = std::env::temp_dir().join(format!("fenced-write-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("app.db").to_string_lossy().into_owned();

    let mut a = Command::new(std::env::current_exe()?)
        .args(["leader-a", &db])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut a_out = BufReader::new(a.stdout.take().ok_or("no stdout")?).lines();
    let elected = a_out.next().ok_or("A exited")??;
    println!("A: {elected}");
    let pid = Pid::from_raw(i32::try_from(a.id())?);
    kill(pid, Signal::SIGSTOP)?;
    println!("A paused (SIGSTOP) while holding its token");

    let election = open(&db).await?;
    let term = election.candidate("ledger-writer", "B")?.campaign().await?;
    println!("B: elected {} after A's lease ran out", term.epoch());
    println!(
        "B: {}",
        write(&election, Token::issue(&term)?, "from B").await?
    );

    kill(pid, Signal::SIGCONT)?;
    writeln!(a.stdin.as_mut().ok_or("no stdin")?, "go")?;
    for line in a_out {
        println!("A: {}", line?);
    }
    a.wait()?;
    let rows: Vec<(String, i64)> = sqlx::query_as("SELECT entry, epoch FROM ledger ORDER BY rowid")
        .fetch_all(election.pool())
        .await?;
    println!("ledger: {rows:?}");
    term.resign().await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
