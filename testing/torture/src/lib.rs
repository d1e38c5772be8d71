//! A Jepsen-style torture suite for the election backends.
//!
//! Candidate processes (`torture-candidate`) campaign on one backend and,
//! while they lead, write numbered records to a fenced resource; an
//! orchestrator (`torture run`) injects faults (kills, pauses, resign
//! storms, server crashes, partitions, clock jumps, a leader's work
//! cancelled mid-write, unguarded writes, a lease row deleted by hand, a
//! NATS bucket recreated or its stream's tail lost; in `--elect` mode, with
//! `elect run` as each candidate, its supervisor or process group killed
//! or stopped, the fence's state deleted, the election reached through a
//! second name or path, nested runs, a reboot that empties the runtime
//! directory); every step lands in history files in the run directory. The checker then proves, from the
//! histories and the resource's own records alone, that terms never
//! overlapped in a way the fence let through, and that no deposed or
//! resigned leader acted after the next term began:
//!
//! - [`history`]: the line format of the history files, typed events, and
//!   a writer that appends and flushes one line at a time;
//! - [`resource`]: the fenced resources (a file-backed log, a SQLite
//!   table, a log guarded by `SqliteFence::fenced`), their unsafe
//!   variants, and their readers;
//! - [`check`]: the checker, pure functions from parsed histories and
//!   records to a [`check::Report`];
//! - [`rng`]: the seeded PRNG that makes a run's fault schedule
//!   reproducible from its seed.
//!
//! The unsafe mode (`--unsafe`: no fence, losses ignored) exists only to
//! prove that the checker can fail.
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

pub mod check;
pub mod history;
pub mod orchestrate;
pub mod resource;
pub mod rng;
