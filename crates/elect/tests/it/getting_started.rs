//! docs/getting-started.md, run: each backend's section (its `sh` blocks,
//! in order) as one bash script in an empty directory with `elect` on
//! `PATH`, against a real PostgreSQL (postgres-testkit), a real
//! nats-server (nats-testkit) and a real etcd member (etcd-testkit) whose
//! URLs replace the page's. Fails when a
//! command fails or a block's stdout no longer matches the `text` block
//! shown after it (`...` stands for anything within a line).

use std::path::Path;
use std::process::Command;

const PAGE: &str = include_str!("../../../../docs/getting-started.md");

/// One `sh` block and the output shown after it (if any).
struct Block {
    script: String,
    shown: Option<String>,
}

/// The blocks of the section whose `## ` title starts with `title`.
fn section(title: &str) -> Vec<Block> {
    let start = PAGE
        .find(&format!("\n## {title}"))
        .unwrap_or_else(|| panic!("no section {title:?} on the page"));
    let rest = &PAGE[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    let mut blocks: Vec<Block> = Vec::new();
    let mut lines = rest[..end].lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let body = body.join("\n");
        match lang {
            "sh" => blocks.push(Block {
                script: body,
                shown: None,
            }),
            "text" => {
                let last = blocks.last_mut().expect("a text block after an sh block");
                last.shown = Some(body);
            }
            other => panic!("a {other:?} block in section {title:?}"),
        }
    }
    assert!(
        blocks.len() >= 5,
        "section {title:?}: {} sh blocks",
        blocks.len()
    );
    blocks
}

/// Whether `line` matches `pattern`, where `...` stands for anything.
fn matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    let mut at = 0;
    for (i, part) in parts.iter().enumerate() {
        let found = if i == 0 {
            line.starts_with(part).then_some(0)
        } else {
            line[at..].find(part).map(|f| at + f)
        };
        let Some(f) = found else { return false };
        at = f + part.len();
        if i == parts.len() - 1 && parts.len() > 1 && !part.is_empty() && !line.ends_with(part) {
            return false;
        }
    }
    parts.len() > 1 || at == line.len()
}

/// Runs the section `title` with `url` replacing `page_url` (if given).
fn run(title: &str, replace: Option<(&str, &str)>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let blocks = section(title);
    let mut script = String::from("set -e\n");
    for (i, b) in blocks.iter().enumerate() {
        let mut body = b.script.clone();
        if let Some((from, to)) = replace {
            body = body.replace(from, to);
        }
        script.push_str(&format!("echo '@@block {i}@@'\n{body}\n"));
    }
    script.push_str("echo '@@end@@'\nkill $(jobs -p) 2>/dev/null || true\nwait || true\n");
    let elect = Path::new(env!("CARGO_BIN_EXE_elect"));
    let path = format!(
        "{}:{}",
        elect.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("ELECT_BACKEND")
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("@@end@@"),
        "section {title:?} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    for (i, b) in blocks.iter().enumerate() {
        let Some(shown) = &b.shown else { continue };
        let marker = format!("@@block {i}@@\n");
        let from = stdout.find(&marker).expect("marker") + marker.len();
        let to = stdout[from..].find("@@").map_or(stdout.len(), |t| from + t);
        let got: Vec<&str> = stdout[from..to].lines().collect();
        let want: Vec<&str> = shown.lines().collect();
        assert!(
            got.len() == want.len() && want.iter().zip(&got).all(|(w, g)| matches(w, g)),
            "section {title:?}, block {i}: the page shows\n{shown}\nbut it printed\n{}\n--- stderr\n{stderr}",
            got.join("\n")
        );
    }
}

#[test]
fn the_page_matches_with_dots_for_what_differs() {
    assert!(matches(
        "led by a in term ..., value \"v\" ...",
        "led by a in term 2, value \"v\" (since x)"
    ));
    assert!(matches("term ... token ...", "term 4 token 4"));
    assert!(!matches("led by a", "led by b"));
    assert!(!matches("term ... token", "term 4 token 4"));
}

#[test]
fn getting_started_file() {
    run("The file backend", None);
}

#[test]
fn getting_started_sqlite() {
    run("SQLite", None);
}

#[test]
fn getting_started_postgres() {
    let server = postgres_testkit::Server::start()
        .expect("a PostgreSQL server (apt-get install -y postgresql)");
    run(
        "PostgreSQL",
        Some(("postgres://app@127.0.0.1:5432/app", &server.url())),
    );
}

#[test]
fn getting_started_nats() {
    let server = nats_testkit::Server::start().expect("nats-server");
    run("NATS", Some(("nats://127.0.0.1:4222", &server.url())));
}

#[test]
fn getting_started_etcd() {
    let member = etcd_testkit::Member::start().expect("etcd (see etcd-testkit)");
    run(
        "etcd",
        Some((
            "etcd://127.0.0.1:2379",
            &format!("etcd://{}", member.endpoint()),
        )),
    );
}
