//! `elect repair-epoch`: the file backend's epoch record set by an
//! operator (the other backends keep their epochs in state the library
//! never deletes, and have no such record to repair).

use crate::backend::{Opened, backend_failure};
use crate::exit::{self, Failure};

impl Opened {
    /// `elect repair-epoch`: sets the file backend's epoch record of `name`
    /// to `epoch`; other backends keep their epochs in state the library
    /// never deletes and have no such record to repair.
    pub(crate) fn repair_epoch(
        &self,
        name: &str,
        epoch: election_core::Epoch,
        reporter: crate::report::Reporter,
    ) -> Result<u8, Failure> {
        let repaired = match self {
            Opened::Ready(backend) => backend.repair_epoch(name, epoch),
            Opened::Absent(_) | Opened::Pending(_) => None,
        };
        let repaired = match (self, repaired) {
            (_, Some(repaired)) => repaired.map_err(|e| backend_failure(&e))?,
            (Opened::Absent(absent), None) => {
                return Err(
                    Failure::config(format!("nothing to repair: {}", absent.note)).hint(
                        "check --backend: repair-epoch repairs an existing election directory \
                         (if the whole directory was lost, create it first: mkdir -p DIR)",
                    ),
                );
            }
            (_, None) => {
                return Err(Failure::config(
                    "repair-epoch is for the file backend's epoch records only",
                )
                .hint("use --backend file:///dir (or no --backend for the default directory)"));
            }
        };
        let seen = repaired
            .highest_seen
            .map_or_else(|| "none".to_owned(), |e| e.to_string());
        reporter.event(
            "repaired",
            &format!(
                "the epoch record of {name} now holds epoch {} (highest seen before: {seen}); \
                 the next term gets a higher one",
                repaired.epoch
            ),
            serde_json::json!({
                "name": name,
                "epoch": repaired.epoch.get(),
                "highest_seen": repaired.highest_seen.map(|e| e.get()),
            }),
        );
        Ok(exit::OK)
    }
}
