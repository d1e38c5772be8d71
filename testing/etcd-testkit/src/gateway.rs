//! A few requests to etcd's HTTP/JSON gateway (`/v3/...` on the client
//! port), over a plain HTTP/1.1 connection: what a test does "by hand"
//! (delete a key, compact, read the revision) without a client library.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::Error;

/// The bound on one request.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Standard base64 of `bytes` (the gateway's encoding of keys).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One request; the body of a 200 answer.
fn request(endpoint: &str, method: &str, path: &str, body: &str) -> Result<String, Error> {
    let what = format!("{method} {path} at {endpoint}");
    let mut stream = TcpStream::connect(endpoint).map_err(Error::io(what.clone()))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(Error::io(what.clone()))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .map_err(Error::io(what.clone()))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(Error::io(what.clone()))?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (headers, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let body = if headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    if !headers.starts_with("HTTP/1.1 200") {
        return Err(Error::Gateway {
            endpoint: endpoint.to_owned(),
            path: path.to_owned(),
            answer: format!("{} {body}", headers.lines().next().unwrap_or_default()),
        });
    }
    Ok(body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The integer after `"field":` (the gateway writes int64s as strings).
fn number(body: &str, field: &str) -> Option<i64> {
    let at = body.find(&format!("\"{field}\":"))? + field.len() + 3;
    let digits: String = body[at..]
        .trim_start_matches('"')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether the member says it is healthy.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// assert!(etcd_testkit::gateway::healthy(&member.endpoint()));
/// ```
pub fn healthy(endpoint: &str) -> bool {
    request(endpoint, "GET", "/health", "").is_ok_and(|b| b.contains("\"health\":\"true\""))
}

/// Deletes `key` by hand; how many keys went.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// etcd_testkit::gateway::delete(&member.endpoint(), b"election/e/jobs").expect("deleted");
/// ```
pub fn delete(endpoint: &str, key: &[u8]) -> Result<i64, Error> {
    let body = format!("{{\"key\":\"{}\"}}", base64(key));
    let answer = request(endpoint, "POST", "/v3/kv/deleterange", &body)?;
    Ok(number(&answer, "deleted").unwrap_or(0))
}

/// The lease of the first key that begins with `prefix` (0: none), or
/// `None` when no key does: which lease a candidate's key is on.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// let lease = etcd_testkit::gateway::lease_under(&member.endpoint(), b"election/w/jobs/");
/// assert_eq!(lease.expect("read"), None);
/// ```
pub fn lease_under(endpoint: &str, prefix: &[u8]) -> Result<Option<i64>, Error> {
    let body = format!(
        "{{\"key\":\"{}\",\"range_end\":\"{}\",\"limit\":1}}",
        base64(prefix),
        base64(&prefix_end(prefix))
    );
    let answer = request(endpoint, "POST", "/v3/kv/range", &body)?;
    if !answer.contains("\"kvs\"") {
        return Ok(None);
    }
    Ok(Some(number(&answer, "lease").unwrap_or(0)))
}

/// Revokes lease `id` by hand, as `etcdctl lease revoke` does: every key
/// attached to it goes.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// etcd_testkit::gateway::revoke_lease(&member.endpoint(), 7).expect_err("no such lease");
/// ```
pub fn revoke_lease(endpoint: &str, id: i64) -> Result<(), Error> {
    let body = format!("{{\"ID\":\"{id}\"}}");
    request(endpoint, "POST", "/v3/lease/revoke", &body).map(drop)
}

fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// How many keys begin with `prefix`.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// assert_eq!(etcd_testkit::gateway::count(&member.endpoint(), b"election/w/").expect("read"), 0);
/// ```
pub fn count(endpoint: &str, prefix: &[u8]) -> Result<i64, Error> {
    let end = prefix_end(prefix);
    let body = format!(
        "{{\"key\":\"{}\",\"range_end\":\"{}\",\"count_only\":true}}",
        base64(prefix),
        base64(&end)
    );
    let answer = request(endpoint, "POST", "/v3/kv/range", &body)?;
    Ok(number(&answer, "count").unwrap_or(0))
}

/// The key space's revision now.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// assert!(etcd_testkit::gateway::revision(&member.endpoint()).expect("read") >= 1);
/// ```
pub fn revision(endpoint: &str) -> Result<i64, Error> {
    let body = format!("{{\"key\":\"{}\"}}", base64(b"\0"));
    let answer = request(endpoint, "POST", "/v3/kv/range", &body)?;
    number(&answer, "revision").ok_or_else(|| Error::Gateway {
        endpoint: endpoint.to_owned(),
        path: "/v3/kv/range".into(),
        answer,
    })
}

/// Compacts the history up to `revision`.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// let now = etcd_testkit::gateway::revision(&member.endpoint()).expect("read");
/// etcd_testkit::gateway::compact(&member.endpoint(), now).expect("compacted");
/// ```
pub fn compact(endpoint: &str, revision: i64) -> Result<(), Error> {
    let body = format!("{{\"revision\":\"{revision}\",\"physical\":true}}");
    request(endpoint, "POST", "/v3/kv/compaction", &body).map(drop)
}

/// How many gRPC calls of `method` (`Txn`, `Range`, `Watch`, ...) the
/// member has handled since it started, whatever their outcome: the sum of
/// its `grpc_server_handled_total` counters for that method (`/metrics` on
/// the client port).
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// let txns = etcd_testkit::gateway::handled(&member.endpoint(), "Txn").expect("metrics");
/// assert_eq!(txns, 0); // nothing written yet
/// ```
pub fn handled(endpoint: &str, method: &str) -> Result<u64, Error> {
    let answer = request(endpoint, "GET", "/metrics", "")?;
    let wanted = format!("grpc_method=\"{method}\"");
    Ok(answer
        .lines()
        .filter(|l| l.starts_with("grpc_server_handled_total{") && l.contains(&wanted))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .map(|n| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a counter: a whole, non-negative number in the text"
            )]
            let n = n as u64;
            n
        })
        .sum())
}

/// The member's id and the cluster leader's id (0: none).
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// let (me, leader) = etcd_testkit::gateway::status(&member.endpoint()).expect("status");
/// assert_eq!(me, leader); // one member leads itself
/// ```
pub fn status(endpoint: &str) -> Result<(u64, u64), Error> {
    let answer = request(endpoint, "POST", "/v3/maintenance/status", "{}")?;
    let id = |field: &str| {
        let at = answer.find(&format!("\"{field}\":\""))? + field.len() + 4;
        answer[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u64>()
            .ok()
    };
    Ok((id("member_id").unwrap_or(0), id("leader").unwrap_or(0)))
}

/// Turns etcd's authentication on: a `root` user with `root_password`
/// and the root role, and `user` with `password` allowed to read and write
/// every key under `prefix`. After it, every request needs a user.
///
/// ```no_run
/// let member = etcd_testkit::Member::start().expect("etcd");
/// etcd_testkit::gateway::enable_auth(&member.endpoint(), "rootpw", "app", "apppw", b"jobs/")
///     .expect("auth on");
/// ```
pub fn enable_auth(
    endpoint: &str,
    root_password: &str,
    user: &str,
    password: &str,
    prefix: &[u8],
) -> Result<(), Error> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let steps = [
        (
            "/v3/auth/user/add",
            format!("{{\"name\":\"root\",\"password\":\"{root_password}\"}}"),
        ),
        ("/v3/auth/role/add", "{\"name\":\"root\"}".to_owned()),
        (
            "/v3/auth/user/grant",
            "{\"user\":\"root\",\"role\":\"root\"}".to_owned(),
        ),
        (
            "/v3/auth/user/add",
            format!("{{\"name\":\"{user}\",\"password\":\"{password}\"}}"),
        ),
        ("/v3/auth/role/add", format!("{{\"name\":\"{user}\"}}")),
        (
            "/v3/auth/role/grant",
            format!(
                "{{\"name\":\"{user}\",\"perm\":{{\"permType\":\"READWRITE\",\"key\":\"{}\",\"range_end\":\"{}\"}}}}",
                base64(prefix),
                base64(&end)
            ),
        ),
        (
            "/v3/auth/user/grant",
            format!("{{\"user\":\"{user}\",\"role\":\"{user}\"}}"),
        ),
        ("/v3/auth/enable", "{}".to_owned()),
    ];
    for (path, body) in steps {
        request(endpoint, "POST", path, &body)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"\0"), "AA==");
    }

    #[test]
    fn numbers_are_read_quoted_or_not() {
        assert_eq!(
            number(r#"{"header":{"revision":"12"}}"#, "revision"),
            Some(12)
        );
        assert_eq!(number(r#"{"deleted":3}"#, "deleted"), Some(3));
        assert_eq!(number("{}", "count"), None);
        assert_eq!(dechunk("5\r\nhello\r\n0\r\n\r\n"), "hello");
    }
}
