//! A connection of a pool within a bound, and why there is none when
//! there is none (a refused server said at once, a busy pool told apart
//! from a server that does not answer).

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgConnectOptions;
use sqlx::{PgPool, Postgres};
use tokio::time::Instant;

use crate::error::Error;

/// A connection of `pool` within `bound`. The pool itself hides why it
/// has none: sqlx retries a *refused* connection silently until its own
/// acquire timeout, then says only "pool timed out" (other failures, an
/// unknown host or refused credentials, it returns at once, and so does
/// this). So when none came within half the bound, the server's address
/// is probed meanwhile with a bare TCP (or unix socket) connect, which
/// starts no server process: refused is the answer at once
/// ([`Error::Unavailable`] with "connection refused" as its source). If
/// something listens there, the pool's connections are all in use or slow
/// to open: [`Error::PoolExhausted`] at `bound`; if the probe gets no
/// answer either, [`Error::Unavailable`] at `bound`. Never longer than
/// `bound`.
///
/// Cancel safety: cancel safe (a connection had is given back).
pub(crate) async fn acquire(
    pool: &PgPool,
    bound: Duration,
) -> Result<PoolConnection<Postgres>, Error> {
    acquire_probing(pool, bound, bound / 2).await
}

/// [`acquire`], probing the server's address after `probe_after` instead
/// of half the bound (an open probes early: a refused first connection is
/// said at once, without a connection of its own first).
pub(crate) async fn acquire_probing(
    pool: &PgPool,
    bound: Duration,
    probe_after: Duration,
) -> Result<PoolConnection<Postgres>, Error> {
    let deadline = Instant::now() + bound;
    let acquire = pool.acquire();
    tokio::pin!(acquire);
    // Most acquires finish at once; a slow one is looked into meanwhile.
    if let Ok(r) = tokio::time::timeout(probe_after.min(bound), &mut acquire).await {
        return match r {
            Ok(conn) => Ok(conn),
            Err(sqlx::Error::PoolTimedOut) => Err(why_no_connection(pool, deadline).await),
            Err(e) => Err(e.into()),
        };
    }
    let options = pool.connect_options();
    let probe = tokio::time::timeout_at(deadline, listening(&options));
    tokio::pin!(probe);
    let mut probed = false;
    let mut answers = false;
    loop {
        tokio::select! {
            r = &mut acquire => return match r {
                Ok(conn) => Ok(conn),
                Err(sqlx::Error::PoolTimedOut) => Err(why_no_connection(pool, deadline).await),
                Err(e) => Err(e.into()),
            },
            p = &mut probe, if !probed => {
                probed = true;
                match p {
                    Ok(Err(e)) => return Err(Error::Unavailable(sqlx::Error::Io(e))),
                    Ok(Ok(())) => answers = true,
                    Err(_) => {}
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(if answers {
                    Error::PoolExhausted { after: bound }
                } else {
                    no_answer(bound)
                });
            }
        }
    }
}

/// Whether something listens where `options` point: a bare TCP (or unix
/// socket) connect, closed at once; no PostgreSQL session.
async fn listening(options: &PgConnectOptions) -> std::io::Result<()> {
    let port = options.get_port();
    let socket = match options.get_socket() {
        Some(dir) => Some(format!("{}/.s.PGSQL.{port}", dir.display())),
        None if options.get_host().starts_with('/') => {
            Some(format!("{}/.s.PGSQL.{port}", options.get_host()))
        }
        None => None,
    };
    match socket {
        Some(path) => tokio::net::UnixStream::connect(path).await.map(drop),
        None => tokio::net::TcpStream::connect((options.get_host(), port))
            .await
            .map(drop),
    }
}

/// Why `pool` has no connection, until `deadline` (see [`acquire`]).
async fn why_no_connection(pool: &PgPool, deadline: Instant) -> Error {
    let options = pool.connect_options();
    let bound = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout_at(deadline, listening(&options)).await {
        Ok(Err(e)) => Error::Unavailable(sqlx::Error::Io(e)),
        Ok(Ok(())) => Error::PoolExhausted { after: bound },
        Err(_) => no_answer(bound),
    }
}

/// A new connection that did not answer within `bound`.
fn no_answer(bound: Duration) -> Error {
    Error::Unavailable(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the server did not answer a new connection within {bound:?}"),
    )))
}
