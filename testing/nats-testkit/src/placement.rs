//! Whether a cluster can place a stream on all of its nodes yet.
//!
//! Routes and an agreed meta leader are not enough: the meta leader places
//! a stream only on peers whose server statistics it has received, and
//! until then it refuses with "no suitable peers for placement, peer
//! offline" (JetStream error 10005). The only faithful check is to ask:
//! create a throwaway stream with one replica per node, then delete it.
//! This speaks just enough of the NATS client protocol over a blocking
//! socket to do that.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::monitor;

/// How long one request may wait for its reply.
const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// The throwaway stream's name; it is deleted again at once.
const PROBE_STREAM: &str = "NATS_TESTKIT_PLACEMENT_PROBE";

/// The subject replies come back on.
const REPLY: &str = "nats-testkit.placement.reply";

/// Creates and deletes a file-backed stream with `replicas` replicas
/// through the node listening on `client_port`. `Err` says what the server
/// answered (or that it did not answer) so that polling can report it.
pub(crate) fn probe(client_port: u16, replicas: usize) -> Result<(), String> {
    let mut conn = Conn::open(client_port).map_err(|e| format!("connect: {e}"))?;
    let config = format!(
        r#"{{"name":"{PROBE_STREAM}","subjects":["nats-testkit.placement.probe"],"num_replicas":{replicas},"storage":"file"}}"#
    );
    let created = conn
        .request(&format!("$JS.API.STREAM.CREATE.{PROBE_STREAM}"), &config)
        .map_err(|e| format!("stream create request: {e}"))?;
    api_error(&created).map_or(Ok(()), |e| Err(format!("stream create: {e}")))?;
    let deleted = conn
        .request(&format!("$JS.API.STREAM.DELETE.{PROBE_STREAM}"), "")
        .map_err(|e| format!("stream delete request: {e}"))?;
    api_error(&deleted).map_or(Ok(()), |e| Err(format!("stream delete: {e}")))
}

/// The `error` member of a JetStream API response, if it has one.
fn api_error(response: &str) -> Option<String> {
    monitor::field(response, "error").map(str::to_owned)
}

/// A client connection that sends requests one at a time.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(port: u16) -> io::Result<Self> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut conn = Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        };
        let info = conn.line()?;
        if !info.starts_with("INFO ") {
            return Err(bad(format!("expected INFO, got {info:?}")));
        }
        write!(
            conn.writer,
            "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":false}}\r\nSUB {REPLY} 1\r\n"
        )?;
        Ok(conn)
    }

    /// Publishes `body` to `subject` with the reply subject and returns the
    /// reply's payload.
    fn request(&mut self, subject: &str, body: &str) -> io::Result<String> {
        write!(
            self.writer,
            "PUB {subject} {REPLY} {}\r\n{body}\r\n",
            body.len()
        )?;
        loop {
            let line = self.line()?;
            if line == "PING" {
                self.writer.write_all(b"PONG\r\n")?;
            } else if line.starts_with("-ERR") {
                return Err(bad(line));
            } else if let Some(rest) = line.strip_prefix("MSG ") {
                let len: usize = rest
                    .split(' ')
                    .next_back()
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| bad(format!("bad MSG line {line:?}")))?;
                let mut payload = vec![0; len + 2];
                self.reader.read_exact(&mut payload)?;
                payload.truncate(len);
                return String::from_utf8(payload).map_err(|e| bad(e.to_string()));
            }
            // +OK, PONG, INFO updates: nothing to do.
        }
    }

    fn line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        Ok(line.trim_end().to_owned())
    }
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}
