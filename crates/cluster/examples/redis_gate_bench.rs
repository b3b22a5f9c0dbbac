//! The Redis gate at scale: N random fingerprints inserted by C concurrent clients over
//! loopback, then near-copy lookups. Reports bytes per fingerprint (INFO memory), p50/p99
//! check-and-insert latency, and lookups per second.
//!
//!     cargo run --release -p trawl-cluster --example redis_gate_bench -- [N] [C] [REDIS_URL]

use std::sync::Arc;
use std::time::Instant;

use trawl_cluster::redis_gate::RedisGate;
use trawl_core::mutate::Rng;
use trawl_dedup::Fingerprint;
use trawl_dedup::gate::{Gate, GateVerdict};

async fn used_memory(url: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    // Nanoseconds to milliseconds.
    sorted[((sorted.len() as f64 - 1.0) * p) as usize] as f64 / 1e6
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(Ok(10_000_000), |s| s.parse())?;
    let clients: usize = args.get(2).map_or(Ok(32), |s| s.parse())?;
    let url = args
        .get(3)
        .cloned()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let crawl = format!("bench-{}", trawl_core::clock::now_ms());
    let gate = Arc::new(RedisGate::connect(&url, &crawl, 2).await?);
    let before = used_memory(&url).await?;

    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let gate = gate.clone();
        let per = n / clients + usize::from(c < n % clients);
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(0x5eed + c as u64);
            let mut lat = Vec::with_capacity(per);
            let mut kept_sample = Vec::new();
            for i in 0..per {
                let fp = Fingerprint {
                    simhash: rng.next_u64(),
                    exact: (u128::from(rng.next_u64()) << 64) | i as u128,
                };
                let id = format!("https://docs.example.org/section-{c}/page-{i:09}.html");
                let t = Instant::now();
                let v = gate.check_and_insert(fp, &id).await.expect("gate");
                lat.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                if v == GateVerdict::Kept && i % 50 == 0 {
                    kept_sample.push(fp);
                }
                if c == 0 && i % (per / 10).max(1) == 0 {
                    eprintln!("inserted ~{} of {n}", i * clients);
                }
            }
            (lat, kept_sample)
        }));
    }
    let mut lat = Vec::with_capacity(n);
    let mut sample = Vec::new();
    for t in tasks {
        let (l, s) = t.await?;
        lat.extend(l);
        sample.extend(s);
    }
    let insert_s = started.elapsed().as_secs_f64();
    let after = used_memory(&url).await?;
    lat.sort_unstable();

    // Near-copy lookups: each a kept print with one bit flipped, so every call is a probe
    // that finds its match and writes nothing.
    let lookups = sample.len().min(200_000);
    let sample = Arc::new(sample);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (gate, sample) = (gate.clone(), sample.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for i in (c..lookups).step_by(clients) {
                let fp = Fingerprint {
                    simhash: sample[i].simhash ^ (1 << (i % 64)),
                    exact: u128::MAX - i as u128,
                };
                let t = Instant::now();
                let v = gate.check_and_insert(fp, "probe").await.expect("gate");
                lat.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                assert!(
                    matches!(v, GateVerdict::Duplicate { distance: 1, .. }),
                    "{v:?}"
                );
            }
            lat
        }));
    }
    let mut llat = Vec::new();
    for t in tasks {
        llat.extend(t.await?);
    }
    let lookup_s = started.elapsed().as_secs_f64();
    llat.sort_unstable();

    println!("fingerprints: {n}, clients: {clients}");
    println!(
        "insert: {:.0}/s, p50 {:.3} ms, p99 {:.3} ms",
        n as f64 / insert_s,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
    println!(
        "memory: {} bytes in Redis, {:.1} bytes per fingerprint (ids are {}-byte URLs)",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / n as f64,
        "https://docs.example.org/section-0/page-000000000.html".len()
    );
    println!(
        "near-copy lookups: {lookups}, {:.0}/s, p50 {:.3} ms, p99 {:.3} ms",
        lookups as f64 / lookup_s,
        pct(&llat, 0.5),
        pct(&llat, 0.99)
    );
    gate.clear().await?;
    Ok(())
}
