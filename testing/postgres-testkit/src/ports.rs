//! Picking a free TCP port on 127.0.0.1.

use std::net::TcpListener;

use crate::Error;

/// How often a start is tried with a fresh port when the port was taken
/// between picking it and the server binding it.
const ATTEMPTS: usize = 5;

/// A port that was free a moment ago (found by binding `127.0.0.1:0`).
pub(crate) fn free() -> Result<u16, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(Error::io("binding 127.0.0.1:0 to find a free port"))
}

/// Runs `start` again (it should pick a new port) while it fails because
/// its port was taken, up to [`ATTEMPTS`] times.
pub(crate) fn retry_on_clash<T>(mut start: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut attempt = 1;
    loop {
        match start() {
            Err(e) if e.is_port_clash() && attempt < ATTEMPTS => attempt += 1,
            result => return result,
        }
    }
}
