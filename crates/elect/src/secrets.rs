//! NATS credentials from the environment or from files, so that they need
//! not be on the command line, where `ps` shows them to every user.
//!
//! Each credential has up to three sources (docs/adr/0019):
//!
//! | credential | URL                      | environment           | flag                   |
//! | ---------- | ------------------------ | --------------------- | ---------------------- |
//! | token      | `?token=T`               | `ELECT_NATS_TOKEN`    | `--nats-token-file F`  |
//! | user       | `user:password@`         | `ELECT_NATS_USER`     | `--nats-user U`        |
//! | password   | `user:password@`         | `ELECT_NATS_PASSWORD` | `--nats-password-file F` |
//! | creds file | `?creds=F`               | `ELECT_NATS_CREDS`    | `--nats-creds F`       |
//!
//! There is no precedence: a credential given by two sources is refused
//! (exit 78) naming both, never their values, so that a forgotten variable
//! never silently wins over the flag just typed, nor the other way round.
//! Two ways of logging in at once (a token and a user, say) are refused
//! too. An empty variable counts as unset. The variables are read once and
//! removed from `elect`'s environment, so COMMAND does not inherit them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::Args;

use crate::exit::Failure;
use crate::report::Reporter;
use election_url::{BackendUrl as Url, Credentials, Secret};

/// The token variable.
pub(crate) const TOKEN_ENV: &str = "ELECT_NATS_TOKEN";
/// The user variable.
pub(crate) const USER_ENV: &str = "ELECT_NATS_USER";
/// The password variable.
pub(crate) const PASSWORD_ENV: &str = "ELECT_NATS_PASSWORD";
/// The credentials file variable (a path).
pub(crate) const CREDS_ENV: &str = "ELECT_NATS_CREDS";

/// The `--help` text on credentials (also in the man page).
pub(crate) const HELP: &str = "\
NATS credentials, kept off the command line (ps shows argv to every user):
  ELECT_NATS_TOKEN=T            or --nats-token-file FILE      or ?token=T
  ELECT_NATS_USER=U             or --nats-user U               or nats://U:P@host
  ELECT_NATS_PASSWORD=P         or --nats-password-file FILE   or nats://U:P@host
  ELECT_NATS_CREDS=FILE         or --nats-creds FILE           or ?creds=FILE
  Each credential comes from one source: two sources for one credential
  are refused (exit 78), as are a token and a user (or a creds file)
  together. Files hold the secret alone (a trailing newline is dropped).
  Empty variables count as unset; elect removes these variables from
  COMMAND's environment. A secret in the URL works but draws a warning.";

const HEADING: &str = "NATS credentials";

/// The credential flags every subcommand has.
#[derive(Debug, Default, Args)]
pub(crate) struct SecretFlags {
    /// Read the NATS token from FILE, or set ELECT_NATS_TOKEN (not ?token=
    /// in the URL, which ps shows).
    #[arg(long, value_name = "FILE", help_heading = HEADING)]
    pub(crate) nats_token_file: Option<PathBuf>,
    /// The NATS user (or set ELECT_NATS_USER), with --nats-password-file
    /// or ELECT_NATS_PASSWORD.
    #[arg(long, value_name = "USER", help_heading = HEADING)]
    pub(crate) nats_user: Option<String>,
    /// Read the NATS password from FILE, or set ELECT_NATS_PASSWORD (not
    /// user:password@ in the URL, which ps shows).
    #[arg(long, value_name = "FILE", help_heading = HEADING)]
    pub(crate) nats_password_file: Option<PathBuf>,
    /// A NATS credentials file (JWT and NKey seed), or set ELECT_NATS_CREDS
    /// (or ?creds= in the URL). Each credential comes from one source only.
    #[arg(long, value_name = "FILE", help_heading = HEADING)]
    pub(crate) nats_creds: Option<PathBuf>,
}

impl SecretFlags {
    /// The flags given, by name.
    fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        if self.nats_token_file.is_some() {
            given.push("--nats-token-file");
        }
        if self.nats_user.is_some() {
            given.push("--nats-user");
        }
        if self.nats_password_file.is_some() {
            given.push("--nats-password-file");
        }
        if self.nats_creds.is_some() {
            given.push("--nats-creds");
        }
        given
    }
}

/// The `ELECT_NATS_*` variables as `elect` started with them (empty ones
/// left out). Debug shows which are set, never their values.
#[derive(Default, Clone)]
pub(crate) struct Env {
    token: Option<OsString>,
    user: Option<OsString>,
    password: Option<OsString>,
    creds: Option<OsString>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "(set)"))
            .field("creds", &self.creds)
            .finish()
    }
}

static ENV: OnceLock<Env> = OnceLock::new();
/// Secrets in use, for [`redact`].
static SECRETS: OnceLock<Vec<String>> = OnceLock::new();

impl Env {
    /// Reads the variables and removes them from this process's
    /// environment, so that COMMAND does not inherit them. Call once, before
    /// any thread starts.
    #[allow(unsafe_code)]
    pub(crate) fn take() {
        let mut env = Env::default();
        for (name, slot) in [
            (TOKEN_ENV, &mut env.token),
            (USER_ENV, &mut env.user),
            (PASSWORD_ENV, &mut env.password),
            (CREDS_ENV, &mut env.creds),
        ] {
            *slot = std::env::var_os(name).filter(|v| !v.is_empty());
            if std::env::var_os(name).is_some() {
                // SAFETY: `main` calls this first, before the runtime,
                // the signal thread or anything else that could read the
                // environment concurrently exists.
                unsafe { std::env::remove_var(name) };
            }
        }
        let _ = ENV.set(env);
    }

    /// The variables [`Env::take`] read (none if it was not called).
    fn get() -> &'static Env {
        ENV.get_or_init(Env::default)
    }
}

/// `text` with every secret in use replaced by `***`.
pub(crate) fn redact(text: &str) -> String {
    let mut text = text.to_owned();
    for secret in SECRETS.get().into_iter().flatten() {
        if !secret.is_empty() {
            text = text.replace(secret.as_str(), "***");
        }
    }
    text
}

fn config(message: String) -> Failure {
    Failure::config(message).hint(
        "give each NATS credential once: in ELECT_NATS_*, in a --nats-*-file, or in the URL \
         (see elect --help)",
    )
}

/// A secret from a file: its content without the trailing newline; empty
/// or multi-line files are refused.
fn read_secret(flag: &str, path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::config(format!("cannot read {flag} {}: {e}", path.display()))
            .hint("give a readable file holding only the secret")
    })?;
    let secret = text.strip_suffix('\n').unwrap_or(&text);
    let secret = secret.strip_suffix('\r').unwrap_or(secret);
    if secret.is_empty() {
        return Err(
            Failure::config(format!("{flag} {} is empty", path.display()))
                .hint("write the secret into the file"),
        );
    }
    if secret.contains(['\n', '\r']) {
        return Err(
            Failure::config(format!("{flag} {} has more than one line", path.display()))
                .hint("the file holds the secret alone, on one line"),
        );
    }
    Ok(secret.to_owned())
}

fn text(name: &str, value: &OsString) -> Result<String, Failure> {
    value
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| Failure::config(format!("{name} is not valid UTF-8")))
}

/// One credential: the single source that gives it, if any.
fn one<T>(what: &str, sources: Vec<(String, Option<T>)>) -> Result<Option<(String, T)>, Failure> {
    let mut given: Vec<(String, T)> = sources
        .into_iter()
        .filter_map(|(source, v)| v.map(|v| (source, v)))
        .collect();
    if given.len() > 1 {
        let names: Vec<&str> = given.iter().map(|(s, _)| s.as_str()).collect();
        return Err(config(format!(
            "the NATS {what} is given {} times: by {}; give it once",
            given.len(),
            names.join(" and by ")
        )));
    }
    Ok(given.pop())
}

/// The backend URL with the NATS credentials from the environment and the
/// flags filled in; refuses a credential given twice, two ways of logging
/// in, and credential flags for other backends. Warns (through `report`)
/// about a secret in the URL itself.
pub(crate) fn resolve(
    url: Option<Url>,
    flags: &SecretFlags,
    report: Reporter,
) -> Result<Option<Url>, Failure> {
    resolve_with(url, flags, Env::get(), report)
}

fn resolve_with(
    url: Option<Url>,
    flags: &SecretFlags,
    env: &Env,
    report: Reporter,
) -> Result<Option<Url>, Failure> {
    // A backend that takes no credentials from elect (PostgreSQL: libpq's
    // PGPASSWORD, passfiles) may still carry a password in its URL.
    let takes_credentials = url
        .as_ref()
        .is_some_and(|u| u.with_credentials(Credentials::default()).is_some());
    if let Some(u) = &url
        && !takes_credentials
    {
        // PGPASSWORD stays in COMMAND's environment (libpq's tools read
        // it there); elect never shows it, nor a password in the URL.
        let mut secrets: Vec<String> = std::env::var("PGPASSWORD").into_iter().collect();
        secrets.extend(
            u.credentials()
                .password
                .iter()
                .map(|pw| pw.expose().to_owned()),
        );
        let _ = SECRETS.set(secrets);
        if u.credentials().password.is_some() && u.scheme() == "postgres" {
            report.event(
                "warning",
                "warning: the PostgreSQL password is in the URL, which other users can read in \
                 `ps`; use PGPASSWORD, ?passfile=FILE, PGPASSFILE or ~/.pgpass instead",
                serde_json::json!({ "secret_in_url": "password" }),
            );
        }
    }
    let u = match url {
        Some(u) if takes_credentials => u,
        url => {
            if let Some(flag) = flags.given().first() {
                return Err(Failure::config(format!(
                    "{flag} is for NATS backends only (--backend nats://...)"
                ))
                .hint("drop the NATS credential flags, or use a nats:// backend"));
            }
            // The variables may be set for other invocations: ignored here.
            return Ok(url);
        }
    };
    let credentials = resolve_nats(u.credentials(), flags, env, report)?;
    Ok(u.with_credentials(credentials))
}

fn resolve_nats(
    mut n: Credentials,
    flags: &SecretFlags,
    env: &Env,
    report: Reporter,
) -> Result<Credentials, Failure> {
    let in_url = (n.token.is_some(), n.user.is_some());
    let (url_user, url_password) = (
        n.user.take(),
        n.password.take().map(|p| p.expose().to_owned()),
    );
    let token = one(
        "token",
        vec![
            (
                "the URL (?token=)".to_owned(),
                n.token.take().map(|t| t.expose().to_owned()),
            ),
            (
                TOKEN_ENV.to_owned(),
                env.token.as_ref().map(|v| text(TOKEN_ENV, v)).transpose()?,
            ),
            (
                "--nats-token-file".to_owned(),
                flags
                    .nats_token_file
                    .as_deref()
                    .map(|p| read_secret("--nats-token-file", p))
                    .transpose()?,
            ),
        ],
    )?;
    let user = one(
        "user",
        vec![
            ("the URL (user:password@)".to_owned(), url_user),
            (
                USER_ENV.to_owned(),
                env.user.as_ref().map(|v| text(USER_ENV, v)).transpose()?,
            ),
            ("--nats-user".to_owned(), flags.nats_user.clone()),
        ],
    )?;
    let password = one(
        "password",
        vec![
            ("the URL (user:password@)".to_owned(), url_password),
            (
                PASSWORD_ENV.to_owned(),
                env.password
                    .as_ref()
                    .map(|v| text(PASSWORD_ENV, v))
                    .transpose()?,
            ),
            (
                "--nats-password-file".to_owned(),
                flags
                    .nats_password_file
                    .as_deref()
                    .map(|p| read_secret("--nats-password-file", p))
                    .transpose()?,
            ),
        ],
    )?;
    let creds = one(
        "credentials file",
        vec![
            ("the URL (?creds=)".to_owned(), n.creds_file.take()),
            (CREDS_ENV.to_owned(), env.creds.as_ref().map(PathBuf::from)),
            ("--nats-creds".to_owned(), flags.nats_creds.clone()),
        ],
    )?;
    let user = match (user, password) {
        (None, None) => None,
        (Some((_, u)), Some((_, p))) => Some((u, p)),
        (Some((source, _)), None) => {
            return Err(config(format!(
                "a NATS user is given (by {source}) but no password"
            ))
            .hint("give the password in ELECT_NATS_PASSWORD or --nats-password-file"));
        }
        (None, Some((source, _))) => {
            return Err(config(format!(
                "a NATS password is given (by {source}) but no user"
            ))
            .hint("give the user in ELECT_NATS_USER or --nats-user"));
        }
    };
    let methods: Vec<&str> = [
        token.as_ref().map(|_| "a token"),
        user.as_ref().map(|_| "a user and password"),
        creds.as_ref().map(|_| "a credentials file"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if methods.len() > 1 {
        return Err(config(format!(
            "two ways of logging in to NATS are given: {}; a server checks one",
            methods.join(" and ")
        ))
        .hint("give only the credentials the server expects"));
    }
    let mut secrets = Vec::new();
    if let Some((_, t)) = &token {
        secrets.push(t.clone());
    }
    if let Some((_, p)) = &user {
        secrets.push(p.clone());
    }
    let _ = SECRETS.set(secrets);
    let warn = |what: &str, instead: &str| {
        report.event(
            "warning",
            &format!(
                "warning: the NATS {what} is in the URL, which other users can read in \
                 `ps`; use {instead} instead"
            ),
            serde_json::json!({ "secret_in_url": what }),
        );
    };
    if in_url.0 {
        warn("token", "ELECT_NATS_TOKEN or --nats-token-file");
    }
    if in_url.1 {
        warn(
            "password",
            "ELECT_NATS_USER with ELECT_NATS_PASSWORD or --nats-password-file",
        );
    }
    n.token = token.map(|(_, t)| Secret::new(t));
    (n.user, n.password) = match user {
        Some((u, p)) => (Some(u), Some(Secret::new(p))),
        None => (None, None),
    };
    n.creds_file = creds.map(|(_, c)| c);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Style;

    fn nats(url: &str) -> Option<Url> {
        Some(Url::parse(url).expect("url"))
    }

    /// The credentials a resolved NATS URL carries, with the user and
    /// the password as one pair (`user`).
    #[derive(Debug)]
    struct Resolved {
        token: Option<Secret>,
        user: Option<(String, Secret)>,
        creds: Option<PathBuf>,
    }

    fn resolved(url: &str, flags: &SecretFlags, env: &Env) -> Result<Resolved, Failure> {
        match resolve_with(nats(url), flags, env, Reporter::new(Style::Quiet))? {
            Some(u) if u.scheme() == "nats" => {
                let c = u.credentials();
                Ok(Resolved {
                    token: c.token,
                    user: c.user.zip(c.password),
                    creds: c.creds_file,
                })
            }
            other => panic!("not nats: {other:?}"),
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Env {
        let mut env = Env::default();
        for (k, v) in pairs {
            let v = Some(OsString::from(v));
            match *k {
                TOKEN_ENV => env.token = v,
                USER_ENV => env.user = v,
                PASSWORD_ENV => env.password = v,
                CREDS_ENV => env.creds = v,
                _ => panic!("{k}"),
            }
        }
        env
    }

    fn file(dir: &Path, name: &str, content: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, content).expect("write");
        p
    }

    #[test]
    fn each_credential_comes_from_one_source() {
        let dir = std::env::temp_dir().join(format!("elect-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let none = SecretFlags::default();
        let url = "nats://h:4222";

        let n = resolved(url, &none, &env(&[(TOKEN_ENV, "from-env")])).unwrap();
        assert_eq!(n.token.as_ref().map(Secret::expose), Some("from-env"));

        let flags = SecretFlags {
            nats_token_file: Some(file(&dir, "t", "from-file\n")),
            ..Default::default()
        };
        let n = resolved(url, &flags, &Env::default()).unwrap();
        assert_eq!(n.token.as_ref().map(Secret::expose), Some("from-file"));

        let e = env(&[(USER_ENV, "app"), (PASSWORD_ENV, "pw")]);
        let n = resolved(url, &none, &e).unwrap();
        assert_eq!(n.user, Some(("app".into(), Secret::new("pw"))));

        let flags = SecretFlags {
            nats_user: Some("app".into()),
            nats_password_file: Some(file(&dir, "p", "pw\r\n")),
            ..Default::default()
        };
        let n = resolved(url, &flags, &Env::default()).unwrap();
        assert_eq!(n.user, Some(("app".into(), Secret::new("pw"))));

        let n = resolved(url, &none, &env(&[(CREDS_ENV, "/c")])).unwrap();
        assert_eq!(n.creds, Some(PathBuf::from("/c")));

        // The URL alone still works.
        let n = resolved("nats://u:p@h:1?token=t", &none, &Env::default());
        assert!(n.is_err(), "token and user together");
        let n = resolved("nats://h:1?token=t", &none, &Env::default()).unwrap();
        assert_eq!(n.token.as_ref().map(Secret::expose), Some("t"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn conflicts_are_refused_naming_the_sources_never_the_values() {
        let dir = std::env::temp_dir().join(format!("elect-secrets-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let token_file = SecretFlags {
            nats_token_file: Some(file(&dir, "t", "f1le-secret")),
            ..Default::default()
        };
        let cases: Vec<(&str, SecretFlags, Env, &[&str])> = vec![
            (
                "nats://h:1",
                token_file,
                env(&[(TOKEN_ENV, "env-secret")]),
                &["ELECT_NATS_TOKEN", "--nats-token-file"],
            ),
            (
                "nats://h:1?token=url-secret",
                SecretFlags::default(),
                env(&[(TOKEN_ENV, "env-secret")]),
                &["the URL", "ELECT_NATS_TOKEN"],
            ),
            (
                "nats://u:url-secret@h:1",
                SecretFlags::default(),
                env(&[(PASSWORD_ENV, "env-secret")]),
                &["password", "the URL", "ELECT_NATS_PASSWORD"],
            ),
            (
                "nats://h:1",
                SecretFlags::default(),
                env(&[
                    (TOKEN_ENV, "env-secret"),
                    (USER_ENV, "u"),
                    (PASSWORD_ENV, "p"),
                ]),
                &["a token and a user and password"],
            ),
            (
                "nats://h:1",
                SecretFlags::default(),
                env(&[(USER_ENV, "u")]),
                &["user", "ELECT_NATS_USER", "no password"],
            ),
            (
                "nats://h:1",
                SecretFlags::default(),
                env(&[(PASSWORD_ENV, "env-secret")]),
                &["no user"],
            ),
        ];
        for (url, flags, env, needles) in cases {
            let f = resolved(url, &flags, &env).unwrap_err();
            assert_eq!(f.code, crate::exit::CONFIG, "{url}: {f:?}");
            assert!(f.hint.is_some());
            for needle in needles {
                assert!(
                    f.message.contains(needle),
                    "{needle:?} not in {:?}",
                    f.message
                );
            }
            for secret in ["env-secret", "url-secret", "f1le-secret"] {
                assert!(!f.message.contains(secret), "{:?}", f.message);
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn bad_files_and_flags_on_other_backends_are_refused() {
        let dir = std::env::temp_dir().join(format!("elect-secrets-f-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        for (content, why) in [
            ("", "is empty"),
            ("\n", "is empty"),
            ("a\nb\n", "more than one line"),
        ] {
            let flags = SecretFlags {
                nats_token_file: Some(file(&dir, "t", content)),
                ..Default::default()
            };
            let f = resolved("nats://h:1", &flags, &Env::default()).unwrap_err();
            assert!(f.message.contains(why), "{content:?}: {f:?}");
        }
        let flags = SecretFlags {
            nats_token_file: Some(dir.join("missing")),
            ..Default::default()
        };
        let f = resolved("nats://h:1", &flags, &Env::default()).unwrap_err();
        assert!(
            f.message.starts_with("cannot read --nats-token-file"),
            "{f:?}"
        );

        let flags = SecretFlags {
            nats_password_file: Some(dir.join("p")),
            ..Default::default()
        };
        let f = resolve_with(
            Some(Url::parse("file:///tmp/x").unwrap()),
            &flags,
            &Env::default(),
            Reporter::new(Style::Quiet),
        )
        .unwrap_err();
        assert!(
            f.message.contains("--nats-password-file is for NATS"),
            "{f:?}"
        );
        // The variables alone are ignored by other backends.
        let url = resolve_with(
            None,
            &SecretFlags::default(),
            &env(&[(TOKEN_ENV, "x")]),
            Reporter::new(Style::Quiet),
        )
        .unwrap();
        assert!(url.is_none());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn debug_output_hides_the_values() {
        let e = env(&[
            (TOKEN_ENV, "tok-secret"),
            (PASSWORD_ENV, "pw-secret"),
            (USER_ENV, "u"),
        ]);
        let shown = format!("{e:?}");
        assert!(
            !shown.contains("tok-secret") && !shown.contains("pw-secret"),
            "{shown}"
        );
    }
}
