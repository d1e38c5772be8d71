//! Faults on a backend's own state, injected by the orchestrator with its
//! own connections (a deleted lease row is backend-kit's `Faults`): the
//! SQLite fence's rows deleted by hand, a NATS bucket
//! deleted and recreated, a NATS bucket's max age shortened in place, a
//! NATS store directory rolled back to an older copy.

use std::path::Path;
use std::time::Duration;

use async_nats::jetstream;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

/// The stream behind the candidates' bucket (`election-nats`'s default).
const STREAM: &str = "KV_elections";

/// Deletes every row of `election_fences` (the SQLite fence's marks) in
/// the resource database `db`, as an operator might by hand, waiting at
/// most `busy` for the database's write lock. Returns what
/// happened, for the history: `deleted=N`, `refused` (a guard refused
/// it) or `error=...`.
pub(crate) async fn delete_fence_rows(db: &Path, busy: Duration) -> String {
    let options = SqliteConnectOptions::new().filename(db).busy_timeout(busy);
    let pool = match SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
    {
        Ok(pool) => pool,
        Err(e) => return format!("error={}", e.to_string().replace(' ', "_")),
    };
    let what = match sqlx::query("DELETE FROM election_fences")
        .execute(&pool)
        .await
    {
        Ok(r) => format!("deleted={}", r.rows_affected()),
        Err(e) if e.to_string().contains("refused") => "refused".to_owned(),
        Err(e) => format!("error={}", e.to_string().replace(' ', "_")),
    };
    pool.close().await;
    what
}

/// A JetStream context on `urls` (comma-separated).
async fn jetstream(urls: &str) -> Result<jetstream::Context, String> {
    let servers = urls
        .split(',')
        .map(|u| u.trim().parse::<async_nats::ServerAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .connect(servers.as_slice())
        .await
        .map_err(|e| e.to_string())?;
    Ok(jetstream::new(client))
}

/// Deletes the bucket's stream and creates it again with the same
/// configuration.
pub(crate) async fn recreate_bucket(urls: &str) -> Result<(), String> {
    let js = jetstream(urls).await?;
    let info = js
        .get_stream(STREAM)
        .await
        .map_err(|e| e.to_string())?
        .get_info()
        .await
        .map_err(|e| e.to_string())?;
    js.delete_stream(STREAM).await.map_err(|e| e.to_string())?;
    js.create_stream(info.config)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Changes the bucket's max age in place (its keys and revisions stay);
/// returns the configuration it had.
pub(crate) async fn set_max_age(
    urls: &str,
    max_age: Duration,
) -> Result<jetstream::stream::Config, String> {
    let js = jetstream(urls).await?;
    let original = js
        .get_stream(STREAM)
        .await
        .map_err(|e| e.to_string())?
        .get_info()
        .await
        .map_err(|e| e.to_string())?
        .config;
    let mut config = original.clone();
    config.max_age = max_age;
    config.duplicate_window = config.duplicate_window.min(max_age);
    js.update_stream(config).await.map_err(|e| e.to_string())?;
    Ok(original)
}

/// Puts the bucket's configuration back in place.
pub(crate) async fn restore_config(
    urls: &str,
    config: jetstream::stream::Config,
) -> Result<(), String> {
    let js = jetstream(urls).await?;
    js.update_stream(config).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Copies the directory `from` to `to` (which must not exist), with
/// `cp -a`.
pub(crate) fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("cp -a failed: {status}")))
    }
}

/// Replaces the directory `to` by a copy of `from`.
pub(crate) fn replace_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::remove_dir_all(to)?;
    copy_dir(from, to)
}

/// The local TCP ports of process `pid`'s connections to `server_port`
/// (its PostgreSQL sessions, pool and listener alike), read from Linux's
/// `/proc`: the socket inodes among the process's open files, matched
/// against `/proc/<pid>/net/tcp` and `tcp6`. Empty if the process is gone.
pub(crate) fn client_ports(pid: i32, server_port: u16) -> Vec<u16> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let inodes: std::collections::HashSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_str()?;
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        ports.extend(
            text.lines()
                .skip(1)
                .filter_map(|line| socket_of(line, server_port, &inodes)),
        );
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// One line of `/proc/net/tcp`: `sl local rem st .. uid timeout inode ..`,
/// addresses as `HEXADDR:HEXPORT`. The local port if the socket's remote
/// port is `server_port` and its inode is one of `inodes`.
fn socket_of(
    line: &str,
    server_port: u16,
    inodes: &std::collections::HashSet<String>,
) -> Option<u16> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next()?, 16).ok();
    let (local, remote, inode) = (fields.get(1)?, fields.get(2)?, fields.get(9)?);
    (port(remote)? == server_port && inodes.contains(*inode)).then(|| port(local))?
}

/// Repairs the `FileFence` of the resource log in `dir` as an operator
/// would (`FileFence::repair`, every writer stopped), with the highest
/// token in the log: at least as high as any token it accepted. Returns
/// what happened, for the history (`busy` while a writer holds a lock).
pub(crate) fn repair_file_fence(dir: &Path) -> String {
    let word = |e: &dyn std::fmt::Display| e.to_string().replace(' ', "_");
    let records = match crate::resource::FileLog::read(dir) {
        Ok(r) => r,
        Err(e) => return format!("repair-error={}", word(&e)),
    };
    let Some(highest) = records.iter().map(|r| r.epoch).max() else {
        return "repair-skipped:no-record".into();
    };
    let repaired = (|| {
        let fence = fencing::FileFence::open(dir)?;
        let name = fencing::ResourceName::new(crate::resource::RESOURCE_NAME)?;
        let token: fencing::Token = highest.to_string().parse().map_err(|_| {
            fencing::Error::from(election_core::ConfigError::BadSetting {
                setting: "mark",
                reason: format!("{highest} is not a token"),
            })
        })?;
        fence.repair(&name, token)
    })();
    match repaired {
        Ok(seen) => format!(
            "repaired={highest}(seen:{})",
            seen.map_or_else(|| "none".to_owned(), |t| t.to_string())
        ),
        Err(fencing::Error::Unavailable { .. }) => "busy".into(),
        Err(e) => format!("repair-error={}", word(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_net_tcp_line_gives_the_local_port_of_a_known_socket() {
        let line = "   3: 0100007F:9C40 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 30 10 -1";
        let inodes = ["4242".to_owned()].into_iter().collect();
        assert_eq!(socket_of(line, 0x1538, &inodes), Some(0x9C40));
        assert_eq!(socket_of(line, 5433, &inodes), None);
        assert_eq!(socket_of(line, 0x1538, &Default::default()), None);
        assert_eq!(socket_of("garbage", 0x1538, &inodes), None);
    }

    #[test]
    fn this_process_s_own_connection_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let server_port = listener.local_addr().expect("addr").port();
        let conn = std::net::TcpStream::connect(("127.0.0.1", server_port)).expect("connect");
        let local = conn.local_addr().expect("local").port();
        let pid = i32::try_from(std::process::id()).expect("pid");
        assert_eq!(client_ports(pid, server_port), vec![local]);
    }
}
