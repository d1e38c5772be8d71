//! Talking to a server's monitoring port: a minimal HTTP/1.0 GET and just
//! enough JSON reading for `/jsz` and `/routez`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET http://127.0.0.1:<port><path>`; returns the status code and body.
pub(crate) fn get(port: u16, path: &str) -> io::Result<(u16, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad response {response:?}"),
        )
    };
    let (head, body) = response.split_once("\r\n\r\n").ok_or_else(bad)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(bad)?;
    Ok((status, body.to_owned()))
}

/// The raw text of member `key` of the JSON object `json` (top level only).
pub(crate) fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let b = json.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(b, i);
        if b.get(i) == Some(&b'}') {
            return None;
        }
        let key_end = value_end(b, i)?;
        let name = string(&json[i..key_end])?;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let end = value_end(b, i)?;
        if name == key {
            return Some(&json[i..end]);
        }
        i = skip_ws(b, end);
        if b.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// The raw text of each element of the JSON array `json`.
pub(crate) fn items(json: &str) -> Option<Vec<&str>> {
    let b = json.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = value_end(b, i)?;
        out.push(&json[i..end]);
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b']' => return Some(out),
            _ => return None,
        }
    }
}

/// The contents of a JSON string without escapes (enough for server names).
pub(crate) fn string(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')?.strip_suffix('"')
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index just past the JSON value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => {
            let mut j = i + 1;
            loop {
                match b.get(j)? {
                    b'\\' => j += 2,
                    b'"' => return Some(j + 1),
                    _ => j += 1,
                }
            }
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = value_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSZ: &str = r#"{
  "server_id": "NC3",
  "config": { "store_dir": "/tmp/x\"y}", "strict": true },
  "streams": 0,
  "meta_cluster": {
    "name": "tk",
    "replicas": [ { "name": "n2", "leader": "nope", "current": true } ],
    "leader": "n2",
    "cluster_size": 3
  }
}"#;

    #[test]
    fn finds_nested_leader() {
        let meta = field(JSZ, "meta_cluster").unwrap();
        assert_eq!(field(meta, "leader").and_then(string), Some("n2"));
        assert_eq!(field(meta, "cluster_size"), Some("3"));
        assert_eq!(field(JSZ, "leader"), None);
        assert_eq!(field(JSZ, "streams"), Some("0"));
    }

    #[test]
    fn lists_array_items() {
        let meta = field(JSZ, "meta_cluster").unwrap();
        let replicas = items(field(meta, "replicas").unwrap()).unwrap();
        assert_eq!(replicas.len(), 1);
        assert_eq!(field(replicas[0], "name").and_then(string), Some("n2"));
        assert_eq!(items("[ ]"), Some(vec![]));
        assert_eq!(items("[1, \"a\"]"), Some(vec!["1", "\"a\""]));
    }
}
