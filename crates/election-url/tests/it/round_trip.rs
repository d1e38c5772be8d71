//! Printing a backend URL and parsing it back gives the same URL, through
//! the facade ([`BackendUrl`]). Each backend's proptest over its own URL
//! type is in its crate (`src/driver.rs`); here, a URL of each scheme the
//! table holds, and any text.

use election_url::{BackendUrl, ParseError, REDACTED};
use proptest::prelude::*;

/// A URL of each scheme, printed whole, and printed redacted.
const URLS: &[(&str, &str)] = &[
    (
        "file:///srv/my%20elections?volatile_ok=1&unknown_fs_ok=1",
        "file:///srv/my%20elections?volatile_ok=1&unknown_fs_ok=1",
    ),
    ("sqlite:///srv/app%23.db", "sqlite:///srv/app%23.db"),
    (
        "nats://us%40r:p%3Aw%26@h1:4222,h2:4223?bucket=j%26k&replicas=3&creds=/c%20d&token=a%26b&single_replica_ok=1",
        "nats://us%40r:REDACTED@h1:4222,h2:4223?bucket=j%26k&replicas=3&creds=/c%20d&token=REDACTED&single_replica_ok=1",
    ),
    (
        "postgres://us%40r:p%3Aw@[::1]:5433/d%20b?schema=s&ttl=9s&renew=3s&passfile=/p%20f&sslmode=require",
        "postgres://us%40r:REDACTED@[::1]:5433/d%20b?schema=s&ttl=9s&renew=3s&passfile=/p%20f&sslmode=require",
    ),
    (
        "etcd://us%40r:p%3Aw@e1:2379,e2:2379/apps/j%20k?passfile=/p%20f",
        "etcd://us%40r:REDACTED@e1:2379,e2:2379/apps/j%20k?passfile=/p%20f",
    ),
];

#[test]
fn a_url_of_each_scheme_prints_as_it_parsed() {
    for &(whole, redacted) in URLS {
        let url = BackendUrl::parse(whole).unwrap_or_else(|e| panic!("{whole}: {e}"));
        assert_eq!(url.with_secrets().to_string(), whole);
        assert_eq!(BackendUrl::parse(whole).as_ref(), Ok(&url));
        assert_eq!(url.to_string(), redacted);
        let hidden = BackendUrl::parse(redacted).unwrap_or_else(|e| panic!("{redacted}: {e}"));
        assert_eq!(hidden.scheme(), url.scheme());
        let creds = hidden.credentials();
        assert!(
            creds
                .password
                .iter()
                .chain(creds.token.iter())
                .all(|s| s.expose() == REDACTED),
            "{redacted}"
        );
        assert_eq!(hidden.with_secrets().to_string(), redacted);
    }
    // Every scheme compiled in has a URL above.
    let Err(ParseError::NoScheme { schemes }) = BackendUrl::parse("no scheme") else {
        panic!("a URL without a scheme parsed");
    };
    for scheme in schemes {
        assert!(
            URLS.iter()
                .any(|(whole, _)| whole.starts_with(&format!("{scheme}://"))),
            "no {scheme}:// URL"
        );
    }
}

proptest! {
    #[test]
    fn any_text_parses_or_is_an_error(text in "\\PC{0,40}") {
        let _ = BackendUrl::parse(&text);
        let _ = election_url::redact(&text);
    }
}
