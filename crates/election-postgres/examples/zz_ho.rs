//! Scratch (not committed): in-process handovers with timestamps.
use std::time::{Duration, Instant};

use election_postgres::{PostgresElection, PostgresOptions};

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = std::env::args().nth(1).unwrap();
        let n: usize = std::env::args().nth(2).map_or(20, |s| s.parse().unwrap());
        let o = PostgresOptions::new(Duration::from_secs(2), Duration::from_millis(600)).unwrap();
        let a = PostgresElection::connect(&url, o.clone()).await.unwrap();
        let b = PostgresElection::connect(&url, o).await.unwrap();
        let c = [
            std::sync::Arc::new(
                a.candidate("zz", "a")
                    .unwrap()
                    .with_poll_interval(Duration::from_secs(2))
                    .unwrap(),
            ),
            std::sync::Arc::new(
                b.candidate("zz", "b")
                    .unwrap()
                    .with_poll_interval(Duration::from_secs(2))
                    .unwrap(),
            ),
        ];
        let mut leader = c[0].campaign().await.unwrap();
        let mut out = vec![];
        for round in 0..n {
            let next = c[(round + 1) % 2].clone();
            let w = tokio::spawn(async move {
                let t = next.campaign().await;
                (t, Instant::now())
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            let t0 = Instant::now();
            leader.resign().await.unwrap();
            let t_res = Instant::now();
            let (t, t1) = w.await.unwrap();
            leader = t.unwrap();
            out.push(((t_res - t0).as_micros(), (t1 - t0).as_micros()));
        }
        for (r, h) in &out {
            print!("{r}/{h} ");
        }
        println!();
        let mut hs: Vec<u128> = out.iter().map(|x| x.1).collect();
        hs.sort();
        println!("median handover {} us", hs[hs.len() / 2]);
    });
}
