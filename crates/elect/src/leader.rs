//! `elect leader` and `elect observe`.

use std::io::Write;
use std::time::Duration;

use election_core::{Claim, ElectionName, Leader};
use futures::StreamExt;
use serde_json::json;

use crate::backend::{Backend, nats_failure};
use crate::exit::{self, Failure};
use crate::report::{leader_json, leader_text};

/// The identity `elect` uses for claims it only reads through.
const OBSERVER: &str = "elect-observer";

fn name(name: &str) -> Result<ElectionName, Failure> {
    ElectionName::new(name).map_err(|e| {
        Failure::config(exit::chain(&e))
            .hint("an election name is 1-200 characters, no '/' or control characters")
    })
}

/// Who leads `name` now.
pub(crate) async fn current(backend: &Backend, name: &str) -> Result<Option<Leader>, Failure> {
    let _ = self::name(name)?;
    match backend {
        Backend::File(e) => {
            let claim = e
                .claim(name, OBSERVER)
                .map_err(|e| Failure::config(exit::chain(&e)))?;
            Ok(claim.leader().await?)
        }
        Backend::Sqlite(e) => {
            let claim = e
                .claim(name, OBSERVER)
                .map_err(crate::backend::sqlite_failure)?;
            Ok(claim.leader().await?)
        }
        Backend::Nats(e) => e.leader(name).await.map_err(nats_failure),
        // No bucket: nobody was ever elected there.
        Backend::NatsPending(..) => Ok(None),
    }
}

fn print(line: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot write to stdout: {e}")))
}

fn line(name: &str, leader: Option<&Leader>, json: bool) -> String {
    if json {
        json!({ "name": name, "leader": leader_json(leader) }).to_string()
    } else {
        format!("{name}: {}", leader_text(leader))
    }
}

/// `elect leader`: one line on stdout. A NATS candidate that won the key
/// but still waits out the failover grace is shown as pending, not as the
/// leader: its term has not begun and it may never run its command.
pub(crate) async fn leader(backend: &Backend, name: &str, json: bool) -> Result<u8, Failure> {
    if let Backend::Nats(e) = backend {
        let _ = self::name(name)?;
        if let Some(h) = e.holder(name).await.map_err(nats_failure)?
            && h.pending
        {
            let l = &h.leader;
            print(&if json {
                json!({ "name": name, "leader": null, "pending": leader_json(Some(l)) }).to_string()
            } else {
                format!(
                    "{name}: pending: {} in term {} (waiting out the failover grace; not leading yet)",
                    l.identity, l.epoch
                )
            })?;
            return Ok(exit::OK);
        }
    }
    let now = current(backend, name).await?;
    print(&line(name, now.as_ref(), json))?;
    Ok(exit::OK)
}

fn same(a: Option<&Leader>, b: Option<&Leader>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.identity == b.identity && a.epoch == b.epoch,
        _ => false,
    }
}

/// `elect observe`: the current state, then a line per change, until
/// interrupted (SIGINT/SIGTERM end it with 0).
pub(crate) async fn observe(
    backend: &Backend,
    name: &str,
    json: bool,
    poll: Duration,
) -> Result<u8, Failure> {
    let _ = self::name(name)?;
    let mut stop = Box::pin(async {
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| Failure::new(exit::INTERNAL, format!("signal handler: {e}")))?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| Failure::new(exit::INTERNAL, format!("signal handler: {e}")))?;
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        Ok::<(), Failure>(())
    });
    let opened;
    let mut backend = backend;
    if let Backend::NatsPending(..) = backend {
        // Nobody was ever elected: say so, then wait for the bucket.
        print(&line(name, None, json))?;
        loop {
            tokio::select! {
                r = &mut stop => { r?; return Ok(exit::OK); }
                () = tokio::time::sleep(poll) => {}
            }
            if let Some(b) = backend.ready().await? {
                opened = b;
                backend = &opened;
                break;
            }
        }
    }
    if let Backend::Nats(e) = backend {
        let mut changes = Box::pin(e.observe(name).await.map_err(nats_failure)?);
        let mut last: Option<Option<Leader>> = None;
        loop {
            tokio::select! {
                r = &mut stop => { r?; return Ok(exit::OK); }
                change = changes.next() => match change {
                    Some(Ok(now)) => {
                        if last.as_ref().is_none_or(|l| !same(l.as_ref(), now.as_ref())) {
                            print(&line(name, now.as_ref(), json))?;
                            last = Some(now);
                        }
                    }
                    Some(Err(e)) => return Err(nats_failure(e)),
                    None => return Err(Failure::new(exit::UNAVAILABLE, "the NATS watch ended")),
                },
            }
        }
    }
    let mut last: Option<Option<Leader>> = None;
    loop {
        let now = current(backend, name).await?;
        if last
            .as_ref()
            .is_none_or(|l| !same(l.as_ref(), now.as_ref()))
        {
            print(&line(name, now.as_ref(), json))?;
            last = Some(now);
        }
        tokio::select! {
            r = &mut stop => { r?; return Ok(exit::OK); }
            () = tokio::time::sleep(poll) => {}
        }
    }
}
