//! The plug-in boundary, checked (ADR 0104): outside the backend crates,
//! only the table of schemes and the test kits' list of backends name
//! every backend. A file that names them all is a place a new backend
//! would have to change.

use std::path::{Path, PathBuf};

use crate::Result;

/// The files that may name every backend.
const MAY_NAME_EVERY_BACKEND: [&str; 2] = [
    "crates/election-url/src/table.rs",
    "testing/backend-kit/src/lib.rs",
];

/// The table of schemes, whose `election_<crate>::<Name>Driver` lines
/// list the backends.
const TABLE: &str = "crates/election-url/src/table.rs";

/// The suffixes of a backend's own type names (`SqliteElection`,
/// `NatsUrl`, …): a file using one names the backend.
const TYPE_SUFFIXES: [&str; 8] = [
    "Election",
    "Url",
    "Driver",
    "Claim",
    "KeyedClaims",
    "Options",
    "Fence",
    "Attempt",
];

/// A backend as code names it: its crate path (`election_sqlite`) and its
/// name in types and variants (`Sqlite`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Named {
    krate: String,
    name: String,
}

/// The backends the table lists.
fn backends(table: &str) -> Vec<Named> {
    table
        .lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches('&').trim_end_matches(',');
            let (krate, ty) = l.split_once("::")?;
            let name = ty.strip_suffix("Driver")?;
            krate.starts_with("election_").then(|| Named {
                krate: krate.to_owned(),
                name: name.to_owned(),
            })
        })
        .collect()
}

/// Whether `text` names `backend`: its crate path, one of its type names,
/// or its name as a variant (`Kind::Sqlite`).
fn names(text: &str, backend: &Named) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let tokens = text.split(|c: char| !ident(c)).filter(|t| !t.is_empty());
    for token in tokens {
        if token == backend.krate {
            return true;
        }
        if let Some(rest) = token.strip_prefix(backend.name.as_str())
            && TYPE_SUFFIXES.contains(&rest)
        {
            return true;
        }
    }
    let variant = format!("::{}", backend.name);
    text.match_indices(&variant).any(|(at, _)| {
        text[at + variant.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c))
    })
}

/// The `.rs` files outside the backend crates (`crates/election-<name>`
/// for each backend in the table) that name every backend.
pub(crate) fn naming_every_backend(root: &Path) -> Result<Vec<PathBuf>> {
    let all = backends(&std::fs::read_to_string(root.join(TABLE))?);
    if all.len() < 2 {
        return Err(format!("{TABLE}: found {} backends in the table", all.len()).into());
    }
    let own: Vec<PathBuf> = all
        .iter()
        .map(|b| root.join("crates").join(b.krate.replace('_', "-")))
        .collect();
    let mut files = Vec::new();
    for dir in ["crates", "testing", "xtask"] {
        crate::rust_files(&root.join(dir), &mut files)?;
    }
    let mut found = Vec::new();
    for file in files {
        if own.iter().any(|d| file.starts_with(d))
            || file.components().any(|c| c.as_os_str() == "target")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file)?;
        if all.iter().all(|b| names(&text, b)) {
            found.push(file.strip_prefix(root).unwrap_or(&file).to_path_buf());
        }
    }
    found.sort();
    Ok(found)
}

/// `cargo xtask ci`'s check: no file but the table and the test kits'
/// list names every backend.
pub(crate) fn every_backend_named_twice_at_most() -> Result<()> {
    let found = naming_every_backend(&crate::repo_root())?;
    if !found.iter().any(|f| f == Path::new(TABLE)) {
        return Err(format!("{TABLE} does not name every backend: this check is blind").into());
    }
    let problems: Vec<String> = found
        .iter()
        .filter(|f| {
            !MAY_NAME_EVERY_BACKEND
                .iter()
                .any(|a| Path::new(a) == f.as_path())
        })
        .map(|f| {
            format!(
                "{} names every backend: a new backend would have to change it; go through \
                 election_url::Backend / election_driver::Opened, or backend_kit::Kind (ADR 0104)",
                f.display()
            )
        })
        .collect();
    crate::policy::report(
        problems,
        &format!(
            "only {} name every backend",
            MAY_NAME_EVERY_BACKEND.join(" and ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_the_backends() {
        let table = "pub(crate) const DRIVERS: &[&dyn Driver] = &[\n    #[cfg(feature = \"file\")]\n    &election_file::FileDriver,\n    &election_etcd::EtcdDriver,\n];";
        assert_eq!(
            backends(table),
            [
                Named {
                    krate: "election_file".into(),
                    name: "File".into()
                },
                Named {
                    krate: "election_etcd".into(),
                    name: "Etcd".into()
                }
            ]
        );
    }

    #[test]
    fn a_backend_is_named_by_its_crate_types_or_variants() {
        let sqlite = Named {
            krate: "election_sqlite".into(),
            name: "Sqlite".into(),
        };
        assert!(names("use election_sqlite::Error;", &sqlite));
        assert!(names("let u = SqliteUrl::new(p);", &sqlite));
        assert!(names("Kind::Sqlite => 3,", &sqlite));
        assert!(!names("\"sqlite:///d.db\".parse()", &sqlite));
        assert!(!names("Kind::SqliteLike", &sqlite));
        assert!(!names("SqliteThing", &sqlite));
    }
}
