//! Helpers of the unit tests of every store.

use election_core::Epoch;

use crate::{Fence, ResourceName, Token};

/// The token of epoch `n`.
pub(crate) fn t(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).unwrap())
}

/// The resource `name`.
pub(crate) fn res(name: &str) -> ResourceName {
    ResourceName::new(name).unwrap()
}

/// Starts `fence.fenced(resource, token, ..)` with a write that never
/// ends, waits until the write has started, then drops the call.
pub(crate) async fn drop_during_the_write(
    fence: &impl Fence,
    resource: &ResourceName,
    token: Token,
) {
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel();
    let run = fence.fenced(resource, token, || async move {
        let _ = entered_tx.send(());
        std::future::pending::<()>().await
    });
    tokio::select! {
        _ = run => panic!("the write cannot finish"),
        entered = entered_rx => entered.unwrap(),
    }
}
