//! Issue 43, items 1 and 3: the READMEs' `[dependencies]` blocks work as a
//! new user copies them. Nothing is on crates.io yet, so each names the
//! workspace's crates by path (a checkout cloned beside the project as
//! `election/`); a block must resolve with cargo, and name every crate its
//! README's Rust examples use.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("testing/election-testkit is two levels down")
        .to_path_buf()
}

/// The README files with a `toml` block: the workspace's and each crate's.
fn readmes() -> Vec<PathBuf> {
    let mut found = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let readme = entry.expect("an entry").path().join("README.md");
        if readme.is_file() {
            found.push(readme);
        }
    }
    found.sort();
    found
}

/// The README's fenced blocks, in order: their language and body.
fn fenced(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            let lang = info.split(',').next().unwrap_or_default().to_owned();
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.trim_start() != "```")
                .collect();
            out.push((lang, body.join("\n")));
        }
    }
    out
}

/// The bodies of the README's fenced blocks of `lang`.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    fenced(text)
        .into_iter()
        .filter(|(l, _)| l == lang)
        .map(|(_, body)| body)
        .collect()
}

/// The dependency names of a `[dependencies]` block, as Rust names them.
fn dependencies(toml: &str) -> BTreeSet<String> {
    toml.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(name, _)| name.trim().replace('-', "_"))
        .filter(|n| !n.is_empty() && !n.starts_with('['))
        .collect()
}

/// The crates a Rust example names (`use x::…`, `x::…`), besides the
/// standard library's.
fn crates_used(rust: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for line in rust.lines().map(|l| l.trim_start_matches('#').trim()) {
        if line.starts_with("//") {
            continue;
        }
        for (at, _) in line.match_indices("::") {
            let before = &line[..at];
            let name: String = before
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
                .chars()
                .rev()
                .collect();
            let preceded = before[..before.len() - name.len()].chars().last();
            // A path's first segment only (not `a::b` 's `b`, not `Type::`).
            if !name.is_empty()
                && preceded != Some(':')
                && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && !["std", "core", "alloc", "crate", "self", "super"].contains(&name.as_str())
            {
                used.insert(name);
            }
        }
    }
    used
}

#[test]
fn every_dependency_block_names_the_crates_its_examples_use() {
    let mut checked = 0;
    for readme in readmes() {
        let text = std::fs::read_to_string(&readme).expect("a README");
        // Each example needs what some dependency block above it lists.
        let mut deps = BTreeSet::new();
        for (lang, body) in fenced(&text) {
            match lang.as_str() {
                "toml" => deps.extend(dependencies(&body)),
                "rust" => {
                    let used = crates_used(&body);
                    let missing: Vec<&String> = used.difference(&deps).collect();
                    assert!(
                        missing.is_empty(),
                        "{}: an example uses {missing:?}, which no [dependencies] block above it \
                         lists:\n{body}",
                        readme.display()
                    );
                    checked += 1;
                }
                _ => {}
            }
        }
    }
    assert!(
        checked >= 8,
        "only {checked} READMEs with a dependency block"
    );
}

#[test]
fn every_dependency_block_resolves_from_a_checkout_beside_the_project() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let scratch = tempfile::tempdir().expect("a temporary directory");
    std::os::unix::fs::symlink(root(), scratch.path().join("election")).expect("a link");
    let target = scratch.path().join("target");
    for (readme, toml) in readmes().into_iter().flat_map(|readme| {
        let text = std::fs::read_to_string(&readme).expect("a README");
        blocks(&text, "toml")
            .into_iter()
            .map(move |toml| (readme.clone(), toml))
    }) {
        // The workspace's crates (a directory under crates/) by path only.
        for line in toml.lines() {
            let Some((name, spec)) = line.split_once('=') else {
                continue;
            };
            if root().join("crates").join(name.trim()).is_dir() {
                assert!(
                    spec.contains("path = \"../election/crates/"),
                    "{}: {line}: not on crates.io yet, name it by path",
                    readme.display()
                );
            }
        }
        let project = scratch.path().join("my-service");
        let _ = std::fs::remove_dir_all(&project);
        std::fs::create_dir_all(project.join("src")).expect("the project");
        std::fs::write(
            project.join("Cargo.toml"),
            format!("[package]\nname = \"my-service\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n{toml}\n"),
        )
        .expect("its manifest");
        std::fs::write(project.join("src/main.rs"), "fn main() {}\n").expect("its main");
        let out = Command::new(&cargo)
            .args(["metadata", "--offline", "--format-version", "1"])
            .current_dir(&project)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "{}: its [dependencies] block does not resolve: {}",
            readme.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
