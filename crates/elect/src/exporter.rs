//! `elect run --metrics ADDR`: the libraries' metrics in the Prometheus
//! text format at `/metrics`, the leader's health at `/healthz` (liveness)
//! and whether this process leads at `/leader` (readiness of leader-only
//! work: 200 while it leads, 503 otherwise).
//!
//! metrics-exporter-prometheus renders the page; its own HTTP listener is
//! left out (it brings hyper and cannot serve `/healthz`), so this module
//! answers the GETs a scraper and a probe make itself: HTTP/1.0-style,
//! one request per connection, on the runtime elect already runs.

use std::net::SocketAddr;
use std::time::Duration;

use election_core::{Health, HealthCheck};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::exit::{self, Failure};

/// The longest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Histogram buckets (seconds): renewals take milliseconds, a campaign's
/// wait minutes or hours. Buckets, not the exporter's default summaries,
/// so the series of many processes can be added up.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 1800.0, 3600.0,
];

/// A bound listener and the installed recorder, not yet serving.
pub(crate) struct Exporter {
    listener: TcpListener,
    handle: PrometheusHandle,
}

impl Exporter {
    /// Binds `addr` and installs the recorder (once per process).
    pub(crate) async fn bind(addr: SocketAddr) -> Result<Exporter, Failure> {
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            Failure::new(
                exit::UNAVAILABLE,
                format!("--metrics {addr}: cannot listen: {e}"),
            )
            .hint("pick a free address, or port 0 for any free port")
        })?;
        let handle = PrometheusBuilder::new()
            .set_buckets(BUCKETS)
            .and_then(|b| b.install_recorder())
            .map_err(|e| {
                Failure::new(
                    exit::INTERNAL,
                    format!("cannot install the metrics recorder: {e}"),
                )
            })?;
        election_core::describe_metrics();
        fencing::describe_metrics();
        Ok(Exporter { listener, handle })
    }

    /// The address bound (the port picked for port 0).
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until the returned task is aborted (dropped with elect).
    pub(crate) fn serve(self, health: HealthCheck) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = self.listener.accept().await else {
                    // EMFILE and the like: try again a little later.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let (handle, health) = (self.handle.clone(), health.clone());
                tokio::spawn(async move {
                    let _ = answer(stream, &handle, &health).await;
                });
            }
        })
    }
}

/// Reads one request head and answers it.
async fn answer(
    mut stream: TcpStream,
    handle: &PrometheusHandle,
    health: &HealthCheck,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let read = tokio::time::timeout(READ_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<(), std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return Ok(());
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => {
            handle.run_upkeep();
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                handle.render(),
            )
        }
        ("GET", "/healthz") => match health.check() {
            Health::Healthy => (
                "200 OK",
                "text/plain; charset=utf-8",
                "healthy\n".to_owned(),
            ),
            unhealthy => (
                "503 Service Unavailable",
                "text/plain; charset=utf-8",
                format!("{unhealthy}\n"),
            ),
        },
        // Leader-only readiness: the deadline applies (a term whose
        // renewals stopped reads not leading from its deadline on).
        ("GET", "/leader") if health.is_leading() => (
            "200 OK",
            "text/plain; charset=utf-8",
            "leading\n".to_owned(),
        ),
        ("GET", "/leader") => (
            "503 Service Unavailable",
            "text/plain; charset=utf-8",
            "not leading\n".to_owned(),
        ),
        ("GET", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "try /metrics, /healthz or /leader\n".to_owned(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "GET only\n".to_owned(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
