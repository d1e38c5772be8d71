//! Picking free TCP ports on 127.0.0.1.

use std::net::TcpListener;

use crate::Error;

/// How often a start is tried with fresh ports when a port was taken
/// between picking it and etcd binding it.
const ATTEMPTS: usize = 5;

/// `count` distinct ports that were free a moment ago.
pub(crate) fn free(count: usize) -> Result<Vec<u16>, Error> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::io("binding 127.0.0.1:0 to find a free port"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(Error::io("reading a listener's port"))
}

/// Runs `start` again (it picks new ports) while it fails because a port
/// was taken, up to [`ATTEMPTS`] times.
pub(crate) fn retry_on_clash<T>(mut start: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut attempt = 1;
    loop {
        match start() {
            Err(e) if e.is_port_clash() && attempt < ATTEMPTS => attempt += 1,
            result => return result,
        }
    }
}
