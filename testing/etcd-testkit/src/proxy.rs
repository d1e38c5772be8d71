//! [`Proxy`]: a TCP proxy in front of a member, to black-hole or cut its
//! clients' traffic (a partition).

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

fn pump(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if shared.black_hole.load(Ordering::SeqCst) {
                    continue;
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
                std::thread::spawn(move || pump(client, server, a));
                std::thread::spawn(move || pump(s2, c2, b));
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
