//! Parsing through the table of schemes: what every scheme shares (the
//! grammar's refusals, the messages), and the file and SQLite cases (each
//! backend's own cases are in its crate's `driver` tests).

use std::path::PathBuf;

use election_file::FileUrl;
use election_url::{BackendUrl, ParseError};

fn file(url: &str) -> FileUrl {
    match BackendUrl::parse(url) {
        Ok(u) => u.downcast_ref::<FileUrl>().expect("a file URL").clone(),
        Err(e) => panic!("{url}: {e}"),
    }
}

#[test]
fn urls_parse_or_say_why_not() {
    assert_eq!(
        BackendUrl::parse("file:///var/lib/x").unwrap(),
        BackendUrl::file("/var/lib/x")
    );
    let f = file("file:///run/elect?volatile_ok=1");
    assert_eq!((f.volatile_ok, f.unknown_fs_ok), (true, false));
    let f = file("file:///mnt/x?unknown_fs_ok=true&volatile_ok=0");
    assert_eq!((f.volatile_ok, f.unknown_fs_ok), (false, true));
    assert_eq!(f.dir, PathBuf::from("/mnt/x"));
    assert_eq!(
        BackendUrl::parse("sqlite:///srv/app.db")
            .unwrap()
            .to_string(),
        "sqlite:///srv/app.db"
    );
    for bad in [
        "/tmp/x",
        "file://relative",
        "file:///",
        "ftp://x",
        "nats://host",
        "file:///d/fb?x=1",
        "file:///d/fb?volatile_ok=yes",
        "file:///d/fb?volatile_ok=1&volatile_ok=1",
        "file:///d/fb?fuse_ok=1",
        "sqlite:///d/app.db?volatile_ok=1",
        "sqlite:///d/app.db?mode=ro",
        "file:///d/fb?",
        "file:///d/fb#x",
        "file:///d/f%zz",
        "file:///d/f%2",
        "file:///d/f%00b",
    ] {
        assert!(BackendUrl::parse(bad).is_err(), "{bad} parsed");
    }
    assert_eq!(
        BackendUrl::parse("file:///d/f%3Fx%3D1%20%25").unwrap(),
        BackendUrl::file("/d/f?x=1 %")
    );
    let sqlite = BackendUrl::parse("sqlite:///srv/a+b%23.db").unwrap();
    let sqlite = sqlite
        .downcast_ref::<election_sqlite::SqliteUrl>()
        .expect("a SQLite URL");
    assert_eq!(sqlite.path, PathBuf::from("/srv/a+b#.db"));
}

#[test]
fn errors_name_what_is_wrong() {
    let e = BackendUrl::parse("file:///d?x=1").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown option \"x\" (file:// knows volatile_ok, unknown_fs_ok)"
    );
    let e = BackendUrl::parse("sqlite:///d?x=1").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown option \"x\" (sqlite:// URLs take no options)"
    );
    let schemes = vec!["file", "sqlite", "nats", "postgres", "etcd"];
    assert_eq!(
        BackendUrl::parse("redis://h:1"),
        Err(ParseError::UnknownScheme {
            scheme: "redis".into(),
            schemes: schemes.clone(),
        })
    );
    assert_eq!(
        BackendUrl::parse("nowhere"),
        Err(ParseError::NoScheme { schemes })
    );
    // `postgresql://` is `postgres://`, printed as `postgres://`.
    assert_eq!(
        BackendUrl::parse("postgresql://h/db").unwrap(),
        BackendUrl::parse("postgres://h/db").unwrap()
    );
}

#[test]
fn printing_encodes_what_the_grammar_gives_a_meaning() {
    use std::os::unix::ffi::OsStringExt;
    let path = PathBuf::from(std::ffi::OsString::from_vec(
        b"/a b/%?#&=,@:\xff\x01".to_vec(),
    ));
    let url = BackendUrl::file(path);
    let printed = url.to_string();
    assert_eq!(printed, "file:///a%20b/%25%3F%23%26%3D%2C%40%3A%FF%01");
    assert_eq!(BackendUrl::parse(&printed).unwrap(), url);
}
