//! The store layer under the façade and the claim: the claim file and the
//! epoch record beside it, winning the claim (`claim_file`), the epoch
//! record (`record`), the epoch ceiling (`ceiling`), open file description
//! locks (`lock`), the leader value (`value`), the request to hand a term
//! over (`transfer`), waiting for a lock without polling (`waiter`), and
//! refusing network filesystems (`fstype`).

pub(crate) mod ceiling;
pub(crate) mod claim_file;
pub(crate) mod fstype;
pub(crate) mod lock;
pub(crate) mod record;
pub(crate) mod transfer;
pub(crate) mod value;
pub(crate) mod waiter;
