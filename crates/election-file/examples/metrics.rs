//! A singleton job that exports the election's metrics and health, as a
//! service would: installs the Prometheus recorder (metrics-exporter-
//! prometheus), campaigns on the file backend, and answers `GET /metrics`
//! (the Prometheus text format) and `GET /healthz` (200, or 503 while this
//! process leads but its renewals stopped: `Candidate::health_check`).
//!
//! ```text
//! cargo run -p election-file --example metrics -- [--dir DIR] [--name NAME] [--listen ADDR] [--seconds N]
//! curl -s http://127.0.0.1:9464/metrics | grep ^election_
//! ```
//!
//! A service with an HTTP server of its own (axum, hyper, ...) puts the
//! two handlers below into it instead of this loop; with none, the
//! exporter's `http-listener` feature can serve `/metrics` alone.

use std::time::Duration;

use election_core::{Health, HealthCheck, Identity, LeadOptions, Lease};
use election_file::FileElection;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut name, mut listen, mut seconds) = (
        String::from(".election"),
        String::from("metrics-job"),
        String::from("127.0.0.1:9464"),
        30u64,
    );
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--dir" => dir = value,
            "--name" => name = value,
            "--listen" => listen = value,
            "--seconds" => seconds = value.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }

    // 1. The recorder, once per process, before anything is recorded; the
    //    libraries' help texts for the page.
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    election_core::describe_metrics();
    fencing::describe_metrics();

    // 2. The candidate and its health check (every term it will win).
    let identity = Identity::for_this_process();
    let candidate = FileElection::new(&dir)?.candidate(&name, identity.as_str())?;
    let health = candidate.health_check(Duration::from_secs(10));

    // 3. Serve /metrics and /healthz from now on, also while waiting.
    let listener = TcpListener::bind(&listen).await?;
    eprintln!(
        "{identity}: serving http://{}/metrics and /healthz",
        listener.local_addr()?
    );
    tokio::spawn(serve(listener, prometheus, health));

    // 4. Campaign and lead.
    let term = candidate.campaign().await?;
    eprintln!("{identity}: elected in term {} of {name:?}", term.epoch());
    term.lead(LeadOptions::default(), |leadership| async move {
        for second in 1..=seconds {
            println!(
                "term {}: working {second}/{seconds}",
                leadership.lease().epoch()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await?;
    eprintln!("{identity}: done; resigned");
    Ok(())
}

/// Answers each connection's one request: `/metrics` or `/healthz`.
async fn serve(listener: TcpListener, prometheus: PrometheusHandle, health: HealthCheck) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let (prometheus, health) = (prometheus.clone(), health.clone());
        tokio::spawn(async move {
            let mut head = [0u8; 1024];
            let Ok(n) = stream.read(&mut head).await else {
                return;
            };
            let request = String::from_utf8_lossy(&head[..n]);
            let (status, body) = match request.split_whitespace().nth(1) {
                Some("/metrics") => {
                    prometheus.run_upkeep();
                    ("200 OK", prometheus.render())
                }
                Some("/healthz") => match health.check() {
                    Health::Healthy => ("200 OK", "healthy\n".to_owned()),
                    unhealthy => ("503 Service Unavailable", format!("{unhealthy}\n")),
                },
                _ => ("404 Not Found", String::new()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}
