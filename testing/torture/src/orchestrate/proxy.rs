//! A TCP proxy the suite controls, between one candidate and the NATS
//! server: it passes bytes, black-holes them (the connection stays open,
//! nothing arrives either way, like a silent partition), passes only the
//! client's (its requests land, the answers are lost), or drops every
//! connection at once (the client sees a reset and reconnects).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward them.
    Pass,
    /// Read and discard them, both ways; connections stay open.
    Blackhole,
    /// Forward the client's bytes to the server; read and discard the
    /// server's (a request lands, its answer never arrives).
    Deafen,
}

impl Mode {
    /// Whether bytes going to the server (`to_server`) or from it pass.
    fn passes(self, to_server: bool) -> bool {
        match self {
            Mode::Pass => true,
            Mode::Blackhole => false,
            Mode::Deafen => to_server,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    mode: Mode,
    /// Bumped to drop every open connection.
    generation: u64,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    state: watch::Sender<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        // Ends the connections' tasks too.
        self.state.send_modify(|s| s.generation += 1);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut state: watch::Receiver<State>,
    generation: u64,
    to_server: bool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            changed = state.changed() => {
                if changed.is_err() || state.borrow().generation != generation {
                    return;
                }
            }
            n = from.read(&mut buf) => {
                let n = match n { Ok(0) | Err(_) => return, Ok(n) => n };
                if state.borrow().generation != generation {
                    return;
                }
                let passes = state.borrow().mode.passes(to_server);
                if passes && to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn serve(client: TcpStream, upstream: SocketAddr, state: watch::Receiver<State>) {
    let generation = state.borrow().generation;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    // When either direction ends, both sockets close (their halves drop).
    tokio::select! {
        () = pump(cr, sw, state.clone(), generation, true) => {}
        () = pump(sr, cw, state, generation, false) => {}
    }
}

impl Proxy {
    /// Starts a proxy on a free port of 127.0.0.1 to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (state, rx) = watch::channel(State {
            mode: Mode::Pass,
            generation: 0,
        });
        let rx = Arc::new(rx);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, upstream, (*rx).clone()));
            }
        });
        Ok(Proxy { port, state, task })
    }

    /// The port clients connect to (a store's URL through it:
    /// `Faults::url_through`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sets what the proxy does with bytes from now on.
    pub fn set(&self, mode: Mode) {
        self.state.send_modify(|s| s.mode = mode);
    }

    /// Drops every open connection now (new ones are accepted).
    pub fn drop_connections(&self) {
        self.state.send_modify(|s| s.generation += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(s: &mut TcpStream) -> Option<Vec<u8>> {
        s.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        match tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut buf)).await {
            Ok(Ok(_)) => Some(buf.to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn passes_blackholes_and_drops() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", proxy.port).parse().unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        assert_eq!(round_trip(&mut s).await.as_deref(), Some(&b"ping"[..]));
        proxy.set(Mode::Blackhole);
        assert_eq!(round_trip(&mut s).await, None, "black-holed");
        proxy.set(Mode::Pass);
        proxy.drop_connections();
        let mut buf = [0u8; 1];
        let closed = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "dropped: {closed:?}"
        );
        let mut again = TcpStream::connect(addr).await.unwrap();
        assert_eq!(round_trip(&mut again).await.as_deref(), Some(&b"ping"[..]));
    }

    /// In `Deafen` the server gets the client's bytes and the client gets
    /// nothing back.
    #[tokio::test]
    async fn deafen_passes_requests_and_loses_answers() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = l.local_addr().unwrap();
        let (got, mut received) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let got = got.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        let _ = got.send(buf[..n].to_vec());
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let proxy = Proxy::start(upstream).await.unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", proxy.port).parse().unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        proxy.set(Mode::Deafen);
        assert_eq!(round_trip(&mut s).await, None, "the answer was lost");
        let landed = tokio::time::timeout(Duration::from_secs(5), received.recv()).await;
        assert_eq!(
            landed.ok().flatten().as_deref(),
            Some(&b"ping"[..]),
            "the request landed"
        );
    }
}
