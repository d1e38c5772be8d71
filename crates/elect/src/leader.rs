//! `elect leader` and `elect observe`.

use std::io::Write;
use std::time::Duration;

use election_core::{
    Election, ElectionName, Handover, Identity, Leader, Revocation, TransferRequest,
};
use futures::StreamExt;
use serde_json::json;

use crate::backend::{Opened, backend_failure};
use crate::exit::{self, Failure};
use crate::report::{Reporter, leader_json, leader_text};

fn name(name: &str) -> Result<ElectionName, Failure> {
    ElectionName::new(name).map_err(|e| {
        Failure::config(exit::chain(&e))
            .hint("an election name is 1-200 bytes, no '/' or control characters")
    })
}

/// Who leads `name` now.
pub(crate) async fn current(backend: &Opened, name: &str) -> Result<Option<Leader>, Failure> {
    let _ = self::name(name)?;
    match backend {
        Opened::Ready(b) => Ok(b.leader(name).await?),
        // No bucket, directory or database: nobody was ever elected there.
        Opened::Pending(..) | Opened::Absent(..) => Ok(None),
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

/// The revocation `r` as JSON.
fn revocation_json(r: &Revocation) -> serde_json::Value {
    let at =
        r.at.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_millis()).ok());
    json!({ "by": r.by.as_str(), "epoch": r.epoch.get(), "at_unix_ms": at })
}

/// The revocation `r` as text: "revoked by X at T (epoch E)".
fn revocation_text(r: &Revocation) -> String {
    match r.at {
        Some(at) => format!(
            "revoked by {} at {} (epoch {})",
            r.by,
            crate::report::utc(at),
            r.epoch
        ),
        None => format!("revoked by {} (epoch {})", r.by, r.epoch),
    }
}

/// The line of a vacancy left by revocation `r`: nobody leads.
fn revoked_line(name: &str, r: &Revocation, json: bool) -> String {
    if json {
        json!({ "name": name, "leader": null, "revoked": revocation_json(r) }).to_string()
    } else {
        format!("{name}: {}; {}", leader_text(None), revocation_text(r))
    }
}

/// The handover `h` as JSON.
fn handover_json(h: &Handover) -> serde_json::Value {
    json!({
        "from": h.from.as_str(),
        "to": h.to.as_str(),
        "epoch": h.epoch.get(),
        "window_ms": u64::try_from(h.window.as_millis()).unwrap_or(u64::MAX),
    })
}

/// The line of a vacancy left by handover `h`: nobody leads, the name is
/// reserved for the successor.
fn handed_line(name: &str, h: &Handover, json: bool) -> String {
    if json {
        json!({ "name": name, "leader": null, "handover": handover_json(h) }).to_string()
    } else {
        format!("{name}: {}; {h}", leader_text(None))
    }
}

/// The line of `now`, naming the revocation or handover a vacancy was left
/// by, if any (more reads for a vacancy only).
async fn line_of(
    b: &election_url::Backend,
    name: &str,
    now: Option<&Leader>,
    json: bool,
) -> String {
    if now.is_none()
        && let Ok(Some(r)) = b.revocation(name).await
    {
        return revoked_line(name, &r, json);
    }
    if now.is_none()
        && let Ok(Some(h)) = b.handover(name).await
    {
        return handed_line(name, &h, json);
    }
    line(name, now, json)
}

/// The request `r` as JSON.
fn request_json(r: &TransferRequest) -> serde_json::Value {
    let at =
        r.at.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_millis()).ok());
    json!({ "to": r.to.as_str(), "by": r.by.as_str(), "epoch": r.epoch.get(), "at_unix_ms": at })
}

/// `elect transfer`: asks the holder of `name`'s current term, on behalf
/// of `by`, to hand it to `to` (ADR 0112), and prints the request stored,
/// or "nothing to transfer". With `wait`, waits until `to` leads (exit 0)
/// or the wait ends (exit 75, [`exit::NOT_ELECTED`]).
pub(crate) async fn transfer(
    backend: &Opened,
    name: &str,
    to: &Identity,
    by: &Identity,
    wait: Option<Duration>,
    json: bool,
) -> Result<u8, Failure> {
    let _ = self::name(name)?;
    let nothing = || {
        if json {
            json!({ "name": name, "leader": null, "requested": null }).to_string()
        } else {
            format!("{name}: nothing to transfer (no leader)")
        }
    };
    let Opened::Ready(b) = backend else {
        print(&nothing())?;
        return Ok(exit::OK);
    };
    let holder = b.leader(name).await?;
    if holder.as_ref().is_some_and(|l| &l.identity == to) {
        print(&if json {
            json!({ "name": name, "leader": leader_json(holder.as_ref()), "requested": null })
                .to_string()
        } else {
            format!("{name}: {to} leads already")
        })?;
        return Ok(exit::OK);
    }
    let Some(r) = b.request_transfer(name, to, by).await? else {
        print(&nothing())?;
        return Ok(exit::OK);
    };
    print(&if json {
        json!({ "name": name, "leader": leader_json(holder.as_ref()), "requested": request_json(&r) })
            .to_string()
    } else {
        let holder = holder
            .filter(|l| l.epoch == r.epoch)
            .map_or_else(|| "the holder".to_owned(), |l| l.identity.to_string());
        format!(
            "{name}: asked {holder} (epoch {}) to hand over to {to}",
            r.epoch
        )
    })?;
    let Some(wait) = wait else {
        return Ok(exit::OK);
    };
    let successor = async {
        let changes = b.observe(name, Duration::from_millis(250)).await?;
        let mut changes = std::pin::pin!(changes);
        while let Some(change) = changes.next().await {
            if let Some(l) = change?
                && &l.identity == to
                && l.epoch > r.epoch
            {
                return Ok(Some(l));
            }
        }
        Ok::<_, election_core::Error>(None)
    };
    match tokio::time::timeout(wait, successor).await {
        Ok(Ok(Some(l))) => {
            print(&if json {
                json!({ "name": name, "leader": leader_json(Some(&l)) }).to_string()
            } else {
                format!("{name}: {}", leader_text(Some(&l)))
            })?;
            Ok(exit::OK)
        }
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(None)) | Err(_) => Err(Failure::new(
            exit::NOT_ELECTED,
            format!("{to} did not lead {name} within {wait:?}"),
        )
        .hint("the holder hands over when its work stops (elect run: once its COMMAND exited); see elect leader")),
    }
}

/// `elect revoke`: ends the current term of `name` on behalf of `by`
/// (ADR 0111), raising the marks of the fenced resources `fences` to the
/// revocation's epoch, and prints the revocation, or "nothing to revoke".
pub(crate) async fn revoke(
    backend: &Opened,
    name: &str,
    by: &Identity,
    fences: &[String],
    json: bool,
) -> Result<u8, Failure> {
    let _ = self::name(name)?;
    let Opened::Ready(b) = backend else {
        print(&nothing_to_revoke(name, json))?;
        return Ok(exit::OK);
    };
    let revoked = if fences.is_empty() {
        b.revoke(name, by).await?
    } else {
        let resources: Vec<&str> = fences.iter().map(String::as_str).collect();
        b.revoke_fencing(name, by, &resources)
            .await
            .map_err(|e| fence_failure(&e, b.kind()))?
    };
    match revoked {
        None => print(&nothing_to_revoke(name, json))?,
        Some(r) => {
            let text = if json {
                json!({
                    "name": name,
                    "deposed": leader_json(Some(&r.deposed)),
                    "revoked": revocation_json(&r.revocation),
                    "fenced": fences,
                })
                .to_string()
            } else if fences.is_empty() {
                format!(
                    "{name}: {} in term {} {}; fence at {}",
                    r.deposed.identity,
                    r.deposed.epoch,
                    revocation_text(&r.revocation),
                    r.revocation.epoch
                )
            } else {
                format!(
                    "{name}: {} in term {} {}; fenced {} at {}",
                    r.deposed.identity,
                    r.deposed.epoch,
                    revocation_text(&r.revocation),
                    fences.join(", "),
                    r.revocation.epoch
                )
            };
            print(&text)?;
        }
    }
    Ok(exit::OK)
}

/// Why `elect revoke --fence` failed; where the backend keeps no fences
/// in its store, what to do instead.
fn fence_failure(e: &election_url::Error, kind: &str) -> Failure {
    let failure = backend_failure(e);
    if matches!(
        e.backend_error()
            .and_then(|e| e.downcast_ref::<election_core::ConfigError>()),
        Some(election_core::ConfigError::Unsupported { .. })
    ) {
        return failure.hint(format!(
            "the {kind} backend's fences are not in its store: revoke without --fence and raise each fence to the printed epoch"
        ));
    }
    failure
}

fn nothing_to_revoke(name: &str, json: bool) -> String {
    if json {
        json!({ "name": name, "deposed": null, "revoked": null }).to_string()
    } else {
        format!("{name}: nothing to revoke (no leader)")
    }
}

/// Says on stderr why a read-only command shows no leader without
/// looking: what it was pointed at does not exist (a typo?).
fn note_absent(backend: &Opened, name: &str, report: Reporter) {
    if let Opened::Absent(absent) = backend {
        report.event(
            "note",
            &format!("note: {}", absent.note),
            json!({ "name": name, "note": absent.note }),
        );
    }
}

/// `elect leader`: one line on stdout (text, or with `--json` a JSON
/// object); notes and errors on stderr. A NATS candidate that won the key
/// but still waits out the failover grace is shown as pending, not as the
/// leader: its term has not begun and it may never run its command.
pub(crate) async fn leader(
    backend: &Opened,
    name: &str,
    json: bool,
    report: Reporter,
) -> Result<u8, Failure> {
    let now = if let Opened::Ready(b) = backend {
        // One read: the holder, and whether it is still pending.
        let _ = self::name(name)?;
        match b.holder(name).await.map_err(|e| backend_failure(&e))? {
            Some(h) if h.pending => {
                print(&pending_line(name, &h.leader, json))?;
                return Ok(exit::OK);
            }
            h => h.map(|h| h.leader),
        }
    } else {
        current(backend, name).await?
    };
    if now.is_none()
        && let Opened::Ready(b) = backend
    {
        // A name used with --slots has no leader of its own: saying "no
        // leader" would hide its slots' holders. Refused as a campaign for
        // it would be, with the same hint.
        election_core::Slots::check_plain(name, b)
            .await
            .map_err(crate::exit::campaign_failure)?;
    }
    note_absent(backend, name, report);
    match backend {
        Opened::Ready(b) => print(&line_of(b, name, now.as_ref(), json).await)?,
        _ => print(&line(name, now.as_ref(), json))?,
    }
    Ok(exit::OK)
}

/// The line for a NATS candidate that won the key but still waits out the
/// failover grace: pending, not the leader.
fn pending_line(name: &str, l: &Leader, json: bool) -> String {
    if json {
        json!({ "name": name, "leader": null, "pending": leader_json(Some(l)) }).to_string()
    } else {
        format!(
            "{name}: pending: {} in term {} (waiting out the failover grace; not leading yet)",
            l.identity, l.epoch
        )
    }
}

fn same(a: Option<&Leader>, b: Option<&Leader>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.shows_same(b),
        _ => false,
    }
}

/// `elect observe`: the current state, then a line per change, until
/// interrupted (SIGINT/SIGTERM end it with 0).
pub(crate) async fn observe(
    backend: &Opened,
    name: &str,
    json: bool,
    poll: Duration,
    report: Reporter,
) -> Result<u8, Failure> {
    let _ = self::name(name)?;
    // The handlers are installed before the first line is printed: a
    // signal sent as soon as it is read ends observe with 0.
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| Failure::new(exit::INTERNAL, format!("signal handler: {e}")))?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::new(exit::INTERNAL, format!("signal handler: {e}")))?;
    let mut stop = Box::pin(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        Ok::<(), Failure>(())
    });
    let opened;
    let mut backend = backend;
    // What was printed last (`None`: nothing yet).
    let mut last: Option<Option<Leader>> = None;
    if backend.is_pending() {
        // Nobody was ever elected: say so, then wait for the bucket (the
        // directory, the database) to appear.
        note_absent(backend, name, report);
        print(&line(name, None, json))?;
        last = Some(None);
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
    // Told of each change by the store (NATS's watch; PostgreSQL's
    // notifications, with a read every `poll` as the backstop).
    if let Opened::Ready(e) = backend
        && let Some(watch) = e.watch(name, poll).await.map_err(|e| backend_failure(&e))?
    {
        let mut changes = watch.changes;
        let mut pending: Option<Option<Leader>> = None;
        loop {
            tokio::select! {
                r = &mut stop => { r?; return Ok(exit::OK); }
                // While a holder is pending, look again every `poll`: the
                // write that ends its grace keeps the same identity and
                // term, so the watch does not report it as a change.
                () = tokio::time::sleep(poll), if pending.is_some() => {
                    match e.holder(name).await.map_err(|e| backend_failure(&e))? {
                        Some(h) if h.pending => {}
                        h => {
                            let now = h.map(|h| h.leader);
                            pending = None;
                            print(&line(name, now.as_ref(), json))?;
                            last = Some(now);
                        }
                    }
                }
                change = changes.next() => match change {
                    Some(Ok(now)) => {
                        // A holder still in its failover grace is shown as
                        // pending, until a look shows it leading.
                        if now.is_some()
                            && e.may_be_pending()
                            && let Ok(Some(h)) = e.holder(name).await
                            && h.pending
                        {
                            let seen = Some(Some(h.leader.clone()));
                            if pending.as_ref().is_none_or(|p| !same(p.as_ref(), Some(&h.leader))) {
                                print(&pending_line(name, &h.leader, json))?;
                                pending = seen;
                                last = None;
                            }
                            continue;
                        }
                        pending = None;
                        if last.as_ref().is_none_or(|l| !same(l.as_ref(), now.as_ref())) {
                            print(&line_of(e, name, now.as_ref(), json).await)?;
                            last = Some(now);
                        }
                    }
                    Some(Err(e)) => return Err(backend_failure(&e)),
                    None => {
                        return Err(Failure::new(
                            exit::UNAVAILABLE,
                            format!("{} ended", watch.what),
                        ));
                    }
                },
            }
        }
    }
    // File: a look at each change of the election's files (inotify), and
    // every `poll` as a backstop; a term that ended before the look is
    // named by the epoch record. SQLite: a look every `poll`; a term that
    // begins and ends between two looks is not seen; a holder whose lease
    // ran out is a vacancy from the first look after it did. Epochs grow by one per
    // term on both, so a jump says how many were missed, on stderr.
    let mut changes = match backend {
        Opened::Ready(e) => match e.changes(name) {
            None => None,
            Some(Ok(c)) => Some(c),
            Some(Err(err)) => {
                let err = err.backend_error().unwrap_or(&err);
                // No inotify (or its limit reached): poll, and say so.
                report.event(
                    "note",
                    &format!(
                        "note: cannot watch {} for changes ({}): looking every {poll:?} \
                         instead; a term shorter than that may be missed",
                        e.local_path().unwrap_or(std::path::Path::new("")).display(),
                        exit::chain(err)
                    ),
                    json!({ "name": name, "note": exit::chain(err) }),
                );
                None
            }
        },
        _ => None,
    };
    let mut last_epoch: Option<u64> = None;
    let mut first = true;
    loop {
        // The record first: a term it shows that is not the one leading
        // a moment later has ended (see `FileElection::last_term`).
        let recorded = match backend {
            Opened::Ready(e) => e.last_term(name).map_err(|e| backend_failure(&e))?,
            _ => None,
        };
        // A holder whose lease ran out with no renewal (SQLite: killed)
        // is a vacancy, as NATS shows one (display only).
        let now = election_core::vacant_if_presumed_dead(current(backend, name).await?);
        let mut seen = Vec::with_capacity(2);
        if first {
            // Terms before observe began are history, not changes.
            first = false;
            last_epoch = recorded.map(|r| r.epoch.get());
        } else if let Some(ended) = recorded.filter(|r| {
            last_epoch.is_none_or(|l| r.epoch.get() > l)
                && now.as_ref().is_none_or(|n| n.epoch != r.epoch)
        }) {
            seen.push(Some(ended));
        }
        seen.push(now);
        for now in seen {
            if last
                .as_ref()
                .is_some_and(|l| same(l.as_ref(), now.as_ref()))
            {
                continue;
            }
            if let Some(now) = &now {
                if let Some(missed) = missed(last_epoch, now.epoch.get()) {
                    report.event(
                        "missed",
                        &format!(
                            "up to {} term(s) not seen (epochs {} to {}): they began and ended \
                             between two looks",
                            missed.1 - missed.0 + 1,
                            missed.0,
                            missed.1
                        ),
                        json!({ "name": name, "first_epoch": missed.0, "last_epoch": missed.1 }),
                    );
                }
                last_epoch = Some(now.epoch.get());
            }
            match backend {
                Opened::Ready(b) => print(&line_of(b, name, now.as_ref(), json).await)?,
                _ => print(&line(name, now.as_ref(), json))?,
            }
            last = Some(now);
        }
        let changed = async {
            match &mut changes {
                Some(c) => c.changed().await,
                None => std::future::pending().await,
            }
        };
        let failed = tokio::select! {
            r = &mut stop => { r?; return Ok(exit::OK); }
            r = changed => r.err(),
            () = tokio::time::sleep(poll) => None,
        };
        if let Some(err) = failed {
            report.event(
                "note",
                &format!(
                    "note: watching for changes failed ({}): looking every {poll:?} instead",
                    exit::chain(&err)
                ),
                json!({ "name": name, "note": exit::chain(&err) }),
            );
            changes = None;
        }
    }
}

/// The epochs between the last seen term's and this one's, if any: terms
/// that may have come and gone unseen (an epoch can also be spent without
/// a term, hence "up to").
fn missed(last: Option<u64>, now: u64) -> Option<(u64, u64)> {
    let last = last?;
    (now > last + 1).then(|| (last + 1, now - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_jumps_are_the_terms_missed() {
        assert_eq!(missed(None, 9), None);
        assert_eq!(missed(Some(4), 5), None);
        assert_eq!(missed(Some(4), 4), None);
        assert_eq!(missed(Some(4), 6), Some((5, 5)));
        assert_eq!(missed(Some(4), 9), Some((5, 8)));
    }
}
