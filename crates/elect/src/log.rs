//! `--verbose`: the libraries' `tracing` events on stderr, in `elect`'s
//! own style: `elect: debug: renewed name=jobs identity=a epoch=7` for
//! people, one JSON object per line with `--json`
//! (`{"event":"log","level":"debug","target":...,"message":"renewed",...}`).
//!
//! - `-v`: the election libraries from DEBUG up: the campaign (`campaign`,
//!   retries and why, the failover grace), `elected`, every `renewed`,
//!   `lost` and why, `resigned`, warnings.
//! - `-vv`: those at TRACE, and the NATS client and SQLite driver from
//!   DEBUG up.
//!
//! Nothing without `-v`; `--quiet` and `-v` together are refused by the
//! command line. Known secrets are masked in every line (see
//! [`crate::secrets::redact`]).

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

use crate::report::{Style, utc};

/// The crates of this workspace whose events `-v` shows, as target
/// prefixes: `election_` is the core, every backend (whichever the URL
/// table compiles in, a new one included) and the layers between.
const OURS: [&str; 2] = ["election_", "fencing"];

/// Which events a verbosity shows.
pub(crate) fn filter(verbose: u8) -> Targets {
    let (ours, theirs) = match verbose {
        0 => (LevelFilter::OFF, LevelFilter::OFF),
        1 => (LevelFilter::DEBUG, LevelFilter::OFF),
        _ => (LevelFilter::TRACE, LevelFilter::DEBUG),
    };
    let mut targets = Targets::new();
    for t in OURS {
        targets = targets.with_target(t, ours);
    }
    targets
        .with_target("async_nats", theirs)
        .with_target("sqlx", theirs)
}

/// Installs the stderr layer for `verbose` (nothing for 0 or `--quiet`).
pub(crate) fn install(style: Style, verbose: u8) {
    if verbose == 0 || style == Style::Quiet {
        return;
    }
    let layer = Lines { style }.with_filter(filter(verbose));
    // Only fails if a subscriber is already set: then that one stays.
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// The layer: one line per event.
struct Lines {
    style: Style,
}

/// An event's fields, in order.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(&'static str, Value)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.rest.push((field.name(), Value::String(text)));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.rest
                .push((field.name(), Value::String(value.to_owned())));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.rest.push((field.name(), json!(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.rest.push((field.name(), json!(value)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.rest.push((field.name(), json!(value)));
    }
}

fn level(l: &Level) -> &'static str {
    match *l {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// Keys of `elect`'s own JSON lines, which a library field must not replace.
const RESERVED: [&str; 5] = ["event", "at", "level", "target", "message"];

/// The line for one event.
fn line(style: Style, lvl: &Level, target: &str, fields: Fields) -> String {
    match style {
        Style::Json => {
            let mut obj = Map::new();
            obj.insert("event".into(), json!("log"));
            obj.insert("at".into(), json!(utc(SystemTime::now())));
            obj.insert("level".into(), json!(level(lvl)));
            obj.insert("target".into(), json!(target));
            obj.insert("message".into(), json!(fields.message));
            for (k, v) in fields.rest {
                let key = if RESERVED.contains(&k) {
                    format!("field_{k}")
                } else {
                    k.to_owned()
                };
                obj.insert(key, v);
            }
            Value::Object(obj).to_string()
        }
        _ => {
            let mut s = format!("elect: {}: {}", level(lvl), fields.message);
            for (k, v) in fields.rest {
                let _ = match v {
                    Value::String(t) if t.is_empty() || t.contains([' ', '"', '=']) => {
                        write!(s, " {k}={t:?}")
                    }
                    Value::String(t) => write!(s, " {k}={t}"),
                    v => write!(s, " {k}={v}"),
                };
            }
            s
        }
    }
}

impl<S: Subscriber> Layer<S> for Lines {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let text = crate::secrets::redact(&line(self.style, meta.level(), meta.target(), fields));
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{text}");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(message: &str, rest: Vec<(&'static str, Value)>) -> Fields {
        Fields {
            message: message.to_owned(),
            rest,
        }
    }

    #[test]
    fn lines_for_people_and_for_machines() {
        let f = fields(
            "renewed",
            vec![
                ("name", json!("jobs")),
                ("epoch", json!(7)),
                ("why", json!("a b")),
            ],
        );
        assert_eq!(
            line(Style::Human, &Level::DEBUG, "election_core::term", f),
            "elect: debug: renewed name=jobs epoch=7 why=\"a b\""
        );
        let f = fields("lost", vec![("epoch", json!(7)), ("level", json!("x"))]);
        let v: Value =
            serde_json::from_str(&line(Style::Json, &Level::WARN, "election_core::term", f))
                .unwrap();
        assert_eq!(v["event"], "log");
        assert_eq!(v["level"], "warn");
        assert_eq!(v["message"], "lost");
        assert_eq!(v["epoch"], 7);
        assert_eq!(v["field_level"], "x");
        assert_eq!(v["target"], "election_core::term");
    }

    #[test]
    fn verbosity_levels() {
        use tracing_subscriber::filter::Targets;
        let at = |t: &Targets, target: &str, l: Level| t.would_enable(target, &l);
        let quiet = filter(0);
        assert!(!at(&quiet, "election_core::term", Level::ERROR));
        let v = filter(1);
        assert!(at(&v, "election_core::term", Level::DEBUG));
        assert!(!at(&v, "election_core::term", Level::TRACE));
        assert!(!at(&v, "async_nats", Level::ERROR));
        let vv = filter(2);
        assert!(at(&vv, "election_file::election", Level::TRACE));
        // Every backend's events, whichever backend: by prefix.
        for backend in [
            "election_postgres::notify",
            "election_sql::keyed",
            "election_nats",
        ] {
            assert!(at(&v, backend, Level::DEBUG), "{backend}");
        }
        assert!(at(&vv, "async_nats::connector", Level::DEBUG));
        assert!(!at(&vv, "async_nats::connection", Level::TRACE));
        assert!(!at(&vv, "tokio", Level::ERROR));
    }
}
