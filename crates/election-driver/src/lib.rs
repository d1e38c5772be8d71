//! The boundary a leader-election backend implements so that a tool can
//! open it from a URL without naming it (as `sqlx-core`'s `any` layer is
//! for sqlx's drivers). `election-url` holds the table of drivers and the
//! types applications use; each backend crate implements these traits in
//! its own `driver` module.
//!
//! - [`grammar`]: the URL grammar's shared pieces (percent-decoding,
//!   options, absolute paths, [`Secret`], [`redact`]) and [`ParseError`];
//!   [`parse_duration`] is the one duration grammar of URLs and flags.
//! - [`Settings`]: what a tool asks of the backend it opens;
//!   [`LeaseCheck`] and [`check_lease`]: the lease bounds, checked before
//!   opening.
//! - [`Driver`] (a scheme), [`Target`] (a parsed URL), [`Opened`] (an open
//!   backend): what only some backends have is a method whose default says
//!   "not here" ([`Opened::inheritable_lock`], [`Opened::lease_timing`],
//!   [`Opened::warnings`], [`Opened::watch`] …).
//! - [`AnyClaim`], [`AnyKeyedClaims`]: a claim and a lease set's claims of
//!   any backend, behind `dyn`, so the core runs them unchanged.
//! - [`Error`]: opening or using a backend failed; its class is the
//!   backend's ([`Failure`]).
//!
//! Like `sqlx-core`, this crate serves the backends of this workspace: its
//! API may change in any release (the version is pinned with `=`).
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

mod driver;
mod duration;
mod erased;
mod error;
pub mod grammar;
mod settings;

pub use driver::{
    Changes, Credentials, Driver, ElectionSteps, EpochRepair, Holder, Leaders, LeaseTiming, Opened,
    Opening, PendingOpen, Target, Warning, Watch,
};
pub use duration::{DurationError, MAX_DURATION, format_duration, parse_duration};
pub use erased::{AnyAttempt, AnyClaim, AnyKeyedClaims};
pub use error::{Error, Failure};
pub use grammar::{ParseError, REDACTED, Secret, redact};
pub use settings::{LeaseCheck, Settings, check_lease};
