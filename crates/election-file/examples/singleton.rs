//! Runs a singleton job on the file backend: of all copies of this program
//! started on one host with the same directory, one at a time does the
//! job. Start two in two terminals and stop (or kill) the first.
//!
//! ```text
//! cargo run -p election-file --example singleton -- [--dir DIR] [--name NAME] [--ticks N]
//! ```

use std::time::Duration;

use election_core::{Identity, LeadOptions, Lease};
use election_file::FileElection;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut name, mut ticks) = (
        String::from(".election"),
        String::from("singleton-job"),
        5u32,
    );
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--dir" => dir = value,
            "--name" => name = value,
            "--ticks" => ticks = value.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let identity = Identity::for_this_process();
    let candidate = FileElection::new(&dir)?.candidate(&name, identity.as_str())?;
    if let Some(leader) = candidate.leader().await? {
        eprintln!(
            "{identity}: waiting; {} leads in term {}",
            leader.identity, leader.epoch
        );
    }
    let term = candidate.campaign().await?;
    eprintln!(
        "{identity}: elected in term {} of {name:?} (in {dir})",
        term.epoch()
    );
    let done = term
        .lead(LeadOptions::default(), |leadership| async move {
            for tick in 1..=ticks {
                // The job: only the leader runs it, and it stops the moment
                // the term is lost.
                println!("term {}: tick {tick}/{ticks}", leadership.lease().epoch());
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            ticks
        })
        .await?;
    eprintln!("{identity}: did {done} ticks; resigned");
    Ok(())
}
