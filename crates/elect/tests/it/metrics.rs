//! `elect run --metrics ADDR` (issue 16): a real `elect` process serves
//! the libraries' metrics in the Prometheus text format and its health,
//! scraped over a plain TCP connection while it leads.

use crate::common;

use std::time::{Duration, Instant};

use common::{PATIENCE, Setup};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One `GET path` to `addr`: the status line and the body.
async fn get(addr: &str, path: &str) -> (String, String) {
    let stream = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    get_on(stream, addr, path).await
}

/// [`get`] from `run`'s server: if it no longer accepts connections,
/// the failure says how `run` ended and what it printed.
async fn get_from(run: common::Elect, addr: &str, path: &str) -> (common::Elect, String, String) {
    match TcpStream::connect(addr).await {
        Ok(stream) => {
            let (status, body) = get_on(stream, addr, path).await;
            (run, status, body)
        }
        Err(e) => {
            let finished = run.finish().await;
            panic!("connect {addr}: {e}; elect ended: {finished:?}");
        }
    }
}

/// One `GET path` over `stream` (to `addr`).
async fn get_on(mut stream: TcpStream, addr: &str, path: &str) -> (String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    tokio::time::timeout(PATIENCE, stream.read_to_string(&mut response))
        .await
        .expect("an answer within the patience")
        .expect("read");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head: {response:?}"));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// The value of the sample line `series` (name and labels as printed),
/// if the page has it.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{series}: {v:?}: {e}"))
        })
}

/// The series `metric` of election `job` on `backend`, as the page
/// prints it.
fn series(metric: &str, backend: &str) -> String {
    format!(r#"{metric}{{name="job",backend="{backend}"}}"#)
}

/// `page` shows `job` led by this process on `backend`, in the one term
/// it won.
fn leads_in_one_term(page: &str, backend: &str) {
    assert_eq!(
        sample(page, &series("election_terms_won_total", backend)),
        Some(1.0),
        "{page}"
    );
    assert_eq!(
        sample(page, &series("election_leader", backend)),
        Some(1.0),
        "{page}"
    );
}

/// Starts `elect run --metrics 127.0.0.1:0` on `b` for election `job` as
/// `identity`, running a command that says `ready` and then waits for the
/// file `stop`; returns the process and the address it serves, as soon as
/// it serves (elected or not).
async fn serving(b: &Setup, identity: &str, stop: &std::path::Path) -> (common::Elect, String) {
    let script = format!(
        "echo ready; while [ ! -e \"{}\" ]; do sleep 0.05; done",
        stop.display()
    );
    let command = vec!["sh".to_owned(), "-c".to_owned(), script];
    let mut run = b.run("job", identity, &["--metrics", "127.0.0.1:0"], &command);
    let line = run.err_with("serving metrics on http://").await;
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    (run, addr)
}

/// Starts `elect run --metrics 127.0.0.1:0` on `b` for election `job`,
/// running a command that waits for a stop file; returns the process, the
/// address it serves and the stop file, once the command runs.
async fn leading(b: &Setup) -> (common::Elect, String, std::path::PathBuf) {
    let stop = b.dir.path().join("stop");
    let (mut run, addr) = serving(b, "host-a", &stop).await;
    assert_eq!(run.out_line().await, "ready");
    (run, addr, stop)
}

/// Scrapes `addr`'s `/metrics` until `done` holds for the page (within
/// the patience).
async fn page_until(addr: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, page) = get(addr, "/metrics").await;
        assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
        if done(&page) {
            return page;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {PATIENCE:?}: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_leader_on_the_file_backend_serves_its_metrics_and_health() {
    let b = Setup::file();
    let (run, addr, stop) = leading(&b).await;

    let (status, page) = get(&addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    leads_in_one_term(&page, "file");
    assert!(
        page.contains("# HELP election_leader "),
        "described: {page}"
    );
    assert!(page.contains("# TYPE election_leader gauge"), "{page}");

    let (status, body) = get(&addr, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(body, "healthy\n");
    let (status, _) = get(&addr, "/nothing").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    std::fs::write(&stop, "").expect("stop file");
    let finished = run.finish().await;
    assert_eq!(finished.code, 0, "{finished:?}");
}

/// On a lease backend the page also has the renewals, and the health
/// check reads healthy while they land.
#[tokio::test]
async fn a_leader_on_sqlite_shows_its_renewals() {
    let b = Setup::sqlite(); // TTL 3 s: renewed every second
    let (mut run, addr, stop) = leading(&b).await;
    let count = series("election_renewal_duration_seconds_count", "sqlite");
    let count = count.as_str();
    let deadline = Instant::now() + PATIENCE;
    let page = loop {
        let (status, page);
        (run, status, page) = get_from(run, &addr, "/metrics").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        if sample(&page, count).is_some_and(|n| n >= 2.0) {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "no two renewals within {PATIENCE:?}: {page}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    leads_in_one_term(&page, "sqlite");
    let (status, body) = get(&addr, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");

    std::fs::write(&stop, "").expect("stop file");
    let finished = run.finish().await;
    assert_eq!(finished.code, 0, "{finished:?}");
}

/// A port already taken fails before the campaign, with the address.
#[tokio::test]
async fn a_busy_metrics_port_fails_before_the_campaign() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let b = Setup::file();
    let finished = b
        .run_to_end("job", "host-a", &["--metrics", &addr], &["true".to_owned()])
        .await;
    assert_eq!(finished.code, common::UNAVAILABLE, "{finished:?}");
    finished.err_line(&format!("--metrics {addr}: cannot listen"));
    assert!(
        !finished.stderr.iter().any(|l| l.contains("elected")),
        "{finished:?}"
    );
}

/// The stuck leader, for real: the NATS server is frozen (SIGSTOP), so
/// the leader's renewals hang. `/healthz` turns 503 once no renewal has
/// landed for the bound (halfway from the 2 s renew interval to the 18 s
/// validity: 10 s), before the term is lost; once the server runs again
/// the renewals land and it reads 200, still the same term.
#[tokio::test]
async fn healthz_fails_while_a_nats_leaders_renewals_hang() {
    let mut server = nats_testkit::Server::start().expect("nats-server");
    let b = Setup::nats(
        &server.url(),
        &["--ttl", "20s", "--renew", "2s", "--grace", "2s"],
    );
    let (run, addr, stop) = leading(&b).await;
    let (status, body) = get(&addr, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");

    server.pause().expect("SIGSTOP nats-server");
    let deadline = Instant::now() + PATIENCE;
    let body = loop {
        let (status, body) = get(&addr, "/healthz").await;
        if status == "HTTP/1.1 503 Service Unavailable" {
            break body;
        }
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
        assert!(
            Instant::now() < deadline,
            "still healthy {PATIENCE:?} after the freeze"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        body.starts_with("unhealthy: leading, but no renewal landed for "),
        "{body}"
    );
    let (_, page) = get(&addr, "/metrics").await;
    assert_eq!(
        sample(&page, &series("election_leader", "nats")),
        Some(1.0),
        "still leading: {page}"
    );
    let failures: f64 = page
        .lines()
        .filter(|l| l.starts_with("election_renewal_failures_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(failures >= 1.0, "{page}");

    server.resume().expect("SIGCONT nats-server");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, body) = get(&addr, "/healthz").await;
        if status == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still unhealthy {PATIENCE:?} after the resume: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, page) = get(&addr, "/metrics").await;
    leads_in_one_term(&page, "nats");

    std::fs::write(&stop, "").expect("stop file");
    let finished = run.finish().await;
    assert_eq!(finished.code, 0, "the term was never lost: {finished:?}");
}

/// Issue 26 items 4 and 5: a waiting candidate exports its state from the
/// start of its campaign (`election_leader` 0, with the `backend` label),
/// so "nobody leads" can be alerted on after a restart; `/leader` answers
/// 503 while it waits and 200 once it leads, while `/healthz` (liveness)
/// is 200 in both states. Two real `elect run` processes on the file
/// backend.
#[tokio::test]
async fn a_waiting_candidate_exports_its_state_and_leader_answers_503() {
    let b = Setup::file();
    let (first, first_addr, stop_first) = leading(&b).await;
    let (status, body) = get(&first_addr, "/leader").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(body, "leading\n");

    let stop_second = b.dir.path().join("stop-second");
    let (mut second, addr) = serving(&b, "host-b", &stop_second).await;
    let leader = series("election_leader", "file");
    let page = page_until(&addr, "the waiting candidate's gauge", |p| {
        sample(p, &leader).is_some()
    })
    .await;
    assert_eq!(sample(&page, &leader), Some(0.0), "waiting: {page}");
    assert_eq!(
        sample(&page, &series("election_terms_won_total", "file")),
        None
    );
    let (status, body) = get(&addr, "/leader").await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable", "{body}");
    assert_eq!(body, "not leading\n");
    let (status, body) = get(&addr, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "liveness while waiting: {body}");

    // The first ends its term: the second leads, and says so.
    std::fs::write(&stop_first, "").expect("stop file");
    let finished = first.finish().await;
    assert_eq!(finished.code, 0, "{finished:?}");
    assert_eq!(second.out_line().await, "ready");
    let page = page_until(&addr, "the second's term", |p| {
        sample(p, &leader) == Some(1.0)
    })
    .await;
    leads_in_one_term(&page, "file");
    let (status, body) = get(&addr, "/leader").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");

    std::fs::write(&stop_second, "").expect("stop file");
    let finished = second.finish().await;
    assert_eq!(finished.code, 0, "{finished:?}");
}
