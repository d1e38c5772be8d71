//! A TCP proxy that can black-hole traffic, for network-partition faults.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::Error;

/// How often an idle or black-holed pump looks at the flags.
const TICK: Duration = Duration::from_millis(10);

/// A TCP proxy on a free port of 127.0.0.1 forwarding to
/// `127.0.0.1:<upstream>`.
///
/// [`black_hole`](Self::black_hole) stops forwarding in both directions
/// without closing anything: bytes wait in the kernel's buffers, as in a
/// network partition, and flow again, intact, when it heals.
/// [`cut`](Self::cut) closes every open connection. Dropping the proxy
/// closes everything.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    black_holed: AtomicBool,
    closed: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
}

impl Proxy {
    /// Starts forwarding to `127.0.0.1:<upstream>`.
    pub fn start(upstream: u16) -> Result<Self, Error> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(Error::io("binding the proxy's listener"))?;
        let port = listener
            .local_addr()
            .map_err(Error::io("reading the proxy's port"))?
            .port();
        listener
            .set_nonblocking(true)
            .map_err(Error::io("making the proxy's listener non-blocking"))?;
        let state = Arc::new(State::default());
        let accept_state = Arc::clone(&state);
        thread::Builder::new()
            .name(format!("proxy-{port}"))
            .spawn(move || accept_loop(listener, upstream, &accept_state))
            .map_err(Error::io("spawning the proxy's thread"))?;
        Ok(Self { port, state })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops (`true`) or resumes (`false`) forwarding on every connection,
    /// present and future; connections stay open.
    pub fn black_hole(&self, on: bool) {
        self.state.black_holed.store(on, Ordering::SeqCst);
    }

    /// Closes every open connection (both sides see a reset or EOF); new
    /// connections are still accepted.
    pub fn cut(&self) {
        let conns = std::mem::take(&mut *self.state.conns.lock().expect("proxy lock"));
        for c in conns {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.closed.store(true, Ordering::SeqCst);
        self.cut();
    }
}

fn accept_loop(listener: TcpListener, upstream: u16, state: &Arc<State>) {
    while !state.closed.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let _ = connect(client, upstream, state);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(TICK),
            Err(_) => thread::sleep(TICK),
        }
    }
}

fn connect(client: TcpStream, upstream: u16, state: &Arc<State>) -> io::Result<()> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], upstream)))?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(TICK))?;
    }
    {
        let mut conns = state.conns.lock().expect("proxy lock");
        conns.push(client.try_clone()?);
        conns.push(server.try_clone()?);
    }
    for (from, to) in [(client.try_clone()?, server.try_clone()?), (server, client)] {
        let state = Arc::clone(state);
        thread::spawn(move || pump(from, to, &state));
    }
    Ok(())
}

/// Copies `from` to `to` until either side closes, reading nothing while
/// black-holed.
fn pump(mut from: TcpStream, mut to: TcpStream, state: &State) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        if state.closed.load(Ordering::SeqCst) {
            break;
        }
        if state.black_holed.load(Ordering::SeqCst) {
            thread::sleep(TICK);
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
