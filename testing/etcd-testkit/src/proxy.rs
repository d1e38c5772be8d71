//! [`Proxy`]: a TCP proxy in front of a member, to black-hole or cut its
//! clients' traffic (a partition), or to make the member's answers say
//! something else (an older server's version).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::Error;

/// A proxy on a free 127.0.0.1 port forwarding to `127.0.0.1:upstream`.
/// While black-holed, it swallows every byte both ways (connections stay
/// open, as behind a dropped route); `cut` closes every connection.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    black_hole: AtomicBool,
    closed: AtomicBool,
    streams: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn keep(&self, s: &TcpStream) {
        if let Ok(s) = s.try_clone() {
            self.streams
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(s);
        }
    }

    fn cut(&self) {
        for s in self
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Bytes the member sends that the proxy replaces, each with as many
/// others (so that no frame's length changes).
type Rewrite = Option<Arc<(Vec<u8>, Vec<u8>)>>;

/// Replaces every whole `from` in `buf` with `to` (as long as `from`).
fn rewrite(buf: &mut [u8], from: &[u8], to: &[u8]) {
    let mut at = 0;
    while let Some(i) = buf[at..].windows(from.len()).position(|w| w == from) {
        buf[at + i..at + i + to.len()].copy_from_slice(to);
        at += i + from.len();
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>, replace: Rewrite) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if shared.black_hole.load(Ordering::SeqCst) {
                    continue;
                }
                if let Some(r) = &replace {
                    rewrite(&mut buf[..n], &r.0, &r.1);
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

impl Proxy {
    /// Starts forwarding to `127.0.0.1:upstream`.
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::start().expect("etcd");
    /// let proxy = etcd_testkit::Proxy::start(member.client_port()).expect("a proxy");
    /// let endpoint = format!("127.0.0.1:{}", proxy.port()); // clients connect here
    /// proxy.black_hole(true); // a partition
    /// # drop(endpoint);
    /// ```
    pub fn start(upstream: u16) -> Result<Proxy, Error> {
        Proxy::serve(upstream, None)
    }

    /// Starts forwarding to `127.0.0.1:upstream`, with every `from` in the
    /// member's answers replaced by `to`, a text as long (a replacement
    /// split across two reads is missed: fine for a short answer such as
    /// `Maintenance.Status`'s version).
    ///
    /// ```no_run
    /// let member = etcd_testkit::Member::start().expect("etcd");
    /// let real = etcd_testkit::etcd_version().expect("etcd --version");
    /// let shown = real.replacen("3.", "2.", 1); // as long, and older
    /// let proxy = etcd_testkit::Proxy::start_rewriting(member.client_port(), &real, &shown)
    ///     .expect("a proxy");
    /// # drop(proxy);
    /// ```
    pub fn start_rewriting(upstream: u16, from: &str, to: &str) -> Result<Proxy, Error> {
        if from.len() != to.len() || from.is_empty() {
            return Err(Error::Rewrite {
                from: from.to_owned(),
                to: to.to_owned(),
            });
        }
        let pair = (from.as_bytes().to_vec(), to.as_bytes().to_vec());
        Proxy::serve(upstream, Some(Arc::new(pair)))
    }

    fn serve(upstream: u16, replace: Rewrite) -> Result<Proxy, Error> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(Error::io("binding a proxy's port"))?;
        let port = listener
            .local_addr()
            .map_err(Error::io("reading a proxy's port"))?
            .port();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.closed.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue; // the member is down: the client sees a reset
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                s.keep(&client);
                s.keep(&server);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                let (a, b) = (s.clone(), s.clone());
                let r = replace.clone();
                std::thread::spawn(move || pump(client, server, a, None));
                std::thread::spawn(move || pump(s2, c2, b, r));
            }
        });
        Ok(Proxy { port, shared })
    }

    /// The port clients connect to.
    ///
    /// ```no_run
    /// let proxy = etcd_testkit::Proxy::start(2379).expect("a proxy");
    /// assert_ne!(proxy.port(), 2379);
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Swallows (`true`) or forwards (`false`) all traffic from now on.
    ///
    /// ```no_run
    /// let proxy = etcd_testkit::Proxy::start(2379).expect("a proxy");
    /// proxy.black_hole(true);
    /// proxy.black_hole(false);
    /// ```
    pub fn black_hole(&self, on: bool) {
        self.shared.black_hole.store(on, Ordering::SeqCst);
    }

    /// Closes every connection through the proxy now (new ones still go
    /// through).
    ///
    /// ```no_run
    /// let proxy = etcd_testkit::Proxy::start(2379).expect("a proxy");
    /// proxy.cut();
    /// ```
    pub fn cut(&self) {
        self.shared.cut();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.cut();
        // Wake the accept loop so it sees `closed`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
