//! A real PostgreSQL server: start, SQL, kill and restart with the data
//! kept, pause, a password, and the black-holing proxy.

use std::time::Duration;

use postgres_testkit::{Proxy, Server};
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

#[tokio::test]
async fn committed_rows_survive_a_kill_and_a_restart_on_the_same_port() {
    let mut server = Server::start().expect("PostgreSQL must be available");
    let port = server.port();
    let mut conn = PgConnection::connect(&server.url()).await.expect("connect");
    sqlx::query("CREATE TABLE t (x int)")
        .execute(&mut conn)
        .await
        .expect("create");
    sqlx::query("INSERT INTO t VALUES (42)")
        .execute(&mut conn)
        .await
        .expect("insert");
    drop(conn);

    server.kill().expect("kill");
    assert!(!server.is_running());
    server.restart().expect("restart");
    assert_eq!(server.port(), port);
    assert_eq!(server.sql("SELECT x FROM t").expect("select"), "42");
    let data = server
        .sql("SELECT current_setting('data_directory')")
        .expect("data dir");
    assert_eq!(data, server.data_dir().to_str().expect("utf-8"));
    // Never as root (PostgreSQL refuses to): the kit runs it as `postgres`
    // when the tests run as root.
    let pid = server.pid().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .expect("Uid line");
    assert_ne!(uid, "0", "the server runs as root");
}

#[tokio::test]
async fn two_servers_are_independent() {
    let a = Server::start().expect("a");
    let b = Server::start().expect("b");
    assert_ne!(a.port(), b.port());
    a.sql("CREATE TABLE only_in_a (x int)")
        .expect("create in a");
    let err = b
        .sql("SELECT * FROM only_in_a")
        .expect_err("b has no such table");
    assert!(err.to_string().contains("only_in_a"), "{err}");
}

#[tokio::test]
async fn a_password_server_refuses_a_client_without_it() {
    let server = Server::start_with_password("s3cret pa'ss").expect("start");
    assert!(
        server.url().contains("s3cret%20pa%27ss"),
        "{}",
        server.url()
    );
    PgConnection::connect(&server.url())
        .await
        .expect("connect with the password");
    let err = PgConnection::connect(&server.url_without_password())
        .await
        .expect_err("refused without it");
    assert!(err.to_string().contains("password"), "{err}");
}

#[tokio::test]
async fn a_paused_server_answers_nothing_until_resumed() {
    let mut server = Server::start().expect("start");
    let mut conn = PgConnection::connect(&server.url()).await.expect("connect");
    server.pause().expect("pause");
    let stuck = tokio::time::timeout(
        Duration::from_millis(300),
        sqlx::query("SELECT 1").execute(&mut conn),
    )
    .await;
    assert!(stuck.is_err(), "a paused server answered: {stuck:?}");
    server.resume().expect("resume");
    // The timed-out query left the connection in an unknown state: use a
    // fresh one.
    let mut conn = PgConnection::connect(&server.url())
        .await
        .expect("reconnect");
    sqlx::query("SELECT 1")
        .execute(&mut conn)
        .await
        .expect("answers again");
}

#[tokio::test]
async fn the_proxy_forwards_black_holes_and_heals() {
    let server = Server::start().expect("start");
    let proxy = Proxy::start(server.port()).expect("proxy");
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port());
    let mut conn = PgConnection::connect(&url)
        .await
        .expect("connect via proxy");
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut conn)
        .await
        .expect("select");
    assert_eq!(one, 1);

    proxy.black_hole(true);
    let pending = sqlx::query_scalar::<_, i32>("SELECT 2").fetch_one(&mut conn);
    let mut pending = Box::pin(pending);
    let stuck = tokio::time::timeout(Duration::from_millis(300), &mut pending).await;
    assert!(stuck.is_err(), "black-holed, yet answered: {stuck:?}");
    proxy.black_hole(false);
    let two = tokio::time::timeout(Duration::from_secs(30), pending)
        .await
        .expect("healed: the held query goes through")
        .expect("select 2");
    assert_eq!(two, 2);

    proxy.cut();
    let err = sqlx::query("SELECT 3").execute(&mut conn).await;
    assert!(err.is_err(), "a cut connection still answered");
}

/// A test server keeps its dynamic shared memory in its data directory
/// (removed with it), not in /dev/shm, where every server killed with
/// SIGKILL (each drop) left a segment in RAM for good.
#[tokio::test]
async fn dynamic_shared_memory_lives_in_the_data_directory() {
    let server = Server::start().expect("PostgreSQL must be available");
    let pid = server.pid().expect("running");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let in_shm: Vec<&str> = maps.lines().filter(|l| l.contains("/dev/shm/")).collect();
    assert!(
        in_shm.is_empty(),
        "the postmaster maps /dev/shm: {in_shm:?}"
    );
    let dir = server.data_dir().join("pg_dynshmem");
    let segments = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert!(segments > 0, "no segment in {}", dir.display());
}

/// A killed server's SysV segment (the postmaster's small interlock
/// segment, named in `postmaster.pid`) is removed with it, by a kill and
/// by a drop. Before: every server left one behind (4,096 after a day of
/// test runs, when no server could start any more).
#[tokio::test]
async fn a_killed_or_dropped_server_leaves_no_sysv_segment() {
    let segment_of = |server: &Server| -> String {
        let pid_file = std::fs::read_to_string(server.data_dir().join("postmaster.pid"))
            .expect("postmaster.pid");
        let line = pid_file
            .lines()
            .nth(6)
            .expect("the seventh line: key and id");
        line.split_whitespace().nth(1).expect("an id").to_owned()
    };
    let exists = |id: &str| {
        std::fs::read_to_string("/proc/sysvipc/shm")
            .expect("/proc/sysvipc/shm")
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(1) == Some(id))
    };

    let mut killed = Server::start().expect("PostgreSQL must be available");
    let id = segment_of(&killed);
    assert!(exists(&id), "segment {id} of a running server not listed");
    killed.kill().expect("kill");
    assert!(!exists(&id), "segment {id} left by a killed server");
    // A restart on the same directory makes a segment of its own, which a
    // drop removes too.
    killed.restart().expect("restart");
    let id = segment_of(&killed);
    assert!(
        exists(&id),
        "segment {id} of the restarted server not listed"
    );
    drop(killed);
    assert!(!exists(&id), "segment {id} left by a dropped server");
}
