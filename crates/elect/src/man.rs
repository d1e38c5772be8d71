//! `elect man` and `elect completions SHELL`: the man pages and shell
//! completions, generated from the same clap definition as `--help`.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::exit::{self, Failure};

/// The command line, built (subcommands know their full names, such as
/// `elect-run`).
fn built() -> clap::Command {
    let mut cmd = Cli::command();
    cmd.build();
    cmd
}

fn write_failed(e: std::io::Error) -> Failure {
    Failure::new(exit::INTERNAL, format!("cannot write the output: {e}"))
}

/// The roff source of one page: `elect(1)` for `None`, else the
/// subcommand's.
pub(crate) fn page(name: Option<&str>) -> Result<Vec<u8>, Failure> {
    let cmd = built();
    let cmd = match name {
        None => cmd,
        Some(name) => cmd.find_subcommand(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
            Failure::new(exit::USAGE, format!("no subcommand {name:?}"))
                .hint(format!("one of: {}", names.join(", ")))
        })?,
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .map_err(write_failed)?;
    Ok(out)
}

/// `elect man`.
pub(crate) fn man(args: &ManArgs) -> Result<u8, Failure> {
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::config(format!("cannot create {}: {e}", dir.display())))?;
        clap_mangen::generate_to(Cli::command(), dir).map_err(|e| {
            Failure::config(format!(
                "cannot write the man pages into {}: {e}",
                dir.display()
            ))
        })?;
        return Ok(exit::OK);
    }
    let text = page(args.page.as_deref())?;
    let mut out = std::io::stdout().lock();
    out.write_all(&text)
        .and_then(|()| out.flush())
        .map_err(write_failed)?;
    Ok(exit::OK)
}

/// The completion script for `shell`.
pub(crate) fn completion_script(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "elect", &mut out);
    out
}

/// `elect completions SHELL`.
pub(crate) fn completions(args: &CompletionsArgs) -> Result<u8, Failure> {
    let text = completion_script(args.shell);
    let mut out = std::io::stdout().lock();
    out.write_all(&text)
        .and_then(|()| out.flush())
        .map_err(write_failed)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_lists_the_subcommands_and_documents_the_environment() {
        let top = String::from_utf8(page(None).unwrap()).unwrap();
        assert!(
            top.starts_with(".ie"),
            "not roff: {}",
            &top[..40.min(top.len())]
        );
        assert!(top.contains(".TH elect 1"), "{top}");
        for sub in ["run", "leader", "observe", "repair\\-epoch"] {
            assert!(
                top.contains(&format!("elect\\-{sub}(1)")),
                "no {sub}: {top}"
            );
        }
        assert!(top.contains("ELECT_NATS_TOKEN"), "{top}");
        assert!(top.contains("ELECT_CGROUP_PARENT"), "{top}");
        let run = String::from_utf8(page(Some("run")).unwrap()).unwrap();
        assert!(run.contains(".TH elect-run 1"), "{run}");
        for flag in [
            "\\-\\-command",
            "\\-\\-verbose",
            "\\-\\-nats\\-token\\-file",
            "ELECTION_TOKEN",
            "ELECTION_SLOT",
            "\\-\\-slots",
        ] {
            assert!(run.contains(flag), "no {flag}: {run}");
        }
        let f = page(Some("nope")).unwrap_err();
        assert_eq!(f.code, exit::USAGE);
    }

    #[test]
    fn completions_cover_every_subcommand_in_every_shell() {
        use clap::ValueEnum;
        for shell in clap_complete::Shell::value_variants() {
            let text = String::from_utf8(completion_script(*shell)).unwrap();
            for word in [
                "run",
                "leader",
                "observe",
                "repair-epoch",
                "backend",
                "nats-token-file",
            ] {
                assert!(text.contains(word), "{shell}: no {word}");
            }
        }
    }
}
