//! Runs a singleton job on PostgreSQL: of all copies of this program
//! started against one database, on any number of hosts, one at a time
//! does the job, and each tick is written through the fence, so a deposed
//! copy's late write is refused by the database. Start two in two
//! terminals and stop (Ctrl-C), kill (`kill -9`) or freeze (`kill -STOP`)
//! the first.
//!
//! ```text
//! PGPASSWORD=... cargo run -p election-postgres --example postgres_singleton -- \
//!     [--url postgres://app@127.0.0.1:5432/app] [--name NAME] [--ticks N]
//! ```
//!
//! The URL defaults to `$DATABASE_URL`. The election lives in the schema
//! `election`; the ticks go to a table `singleton_ticks` this example
//! creates.

use std::time::Duration;

use election_core::{Identity, LeadOptions};
use election_postgres::{PostgresElection, PostgresOptions};
use fencing::{ResourceName, Token};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let (mut url, mut name, mut ticks) = (
        std::env::var("DATABASE_URL").ok(),
        String::from("singleton-job"),
        5u32,
    );
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--url" => url = Some(value),
            "--name" => name = value,
            "--ticks" => ticks = value.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let url = url.ok_or("give --url postgres://user@host/db or set DATABASE_URL")?;
    let election = PostgresElection::connect(&url, PostgresOptions::default()).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS singleton_ticks (epoch BIGINT NOT NULL, tick INT NOT NULL)",
    )
    .execute(election.pool())
    .await?;
    let identity = Identity::for_this_process();
    let candidate = election.candidate(&name, identity.as_str())?;
    if let Some(leader) = candidate.leader().await? {
        eprintln!(
            "{identity}: waiting; {} leads in term {}",
            leader.identity, leader.epoch
        );
    }
    let term = candidate.campaign().await?;
    eprintln!("{identity}: elected in term {} of {name:?}", term.epoch());
    let fence = election.fence();
    let resource = ResourceName::new("singleton_ticks")?;
    let done = term
        .lead(LeadOptions::default(), |leadership| async move {
            let token = Token::issue(leadership.lease())?;
            for tick in 1..=ticks {
                // The fence check and the write commit together: once a
                // later term has written, this one's token is refused.
                let mut tx = fence.begin_fenced(&resource, token).await?;
                sqlx::query("INSERT INTO singleton_ticks (epoch, tick) VALUES ($1, $2)")
                    .bind(token.get_i64())
                    .bind(i32::try_from(tick)?)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                println!("term {token}: tick {tick}/{ticks}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Ok::<u32, BoxError>(ticks)
        })
        .await??;
    eprintln!("{identity}: did {done} ticks; resigned");
    election.close().await;
    Ok(())
}
