//! The Redis gates at scale: N pages inserted by C concurrent clients over loopback, then
//! near-copy lookups. Reports bytes per page (INFO memory), p50/p99 check-and-insert
//! latency, and lookups per second.
//!
//!     cargo run --release -p trawl-cluster --example redis_gate_bench -- \
//!         [N] [C] [REDIS_URL] [simhash|minhash]
//!
//! `simhash`: random fingerprints. `minhash`: pages of 120 words drawn from 50,000, every
//! tenth a near-copy of an earlier page of its client (1 to 3 words changed: 5-gram
//! Jaccard 0.77 to 0.92, around the threshold), so the gate's buckets and verifications see
//! real candidates; the sketches are made before the clock starts.

use std::sync::Arc;
use std::time::Instant;

use trawl_cluster::redis_gate::RedisGate;
use trawl_cluster::redis_min_gate::RedisMinGate;
use trawl_core::mutate::Rng;
use trawl_dedup::Fingerprint;
use trawl_dedup::gate::{Gate, GateMethod, GatePage, GateVerdict};

/// Page `i` of client `c`: its words (MinHash) or its fingerprint (SimHash).
fn page(method: GateMethod, rng: &mut Rng, recent: &mut Vec<Vec<u32>>, i: usize) -> GatePage {
    match method {
        GateMethod::SimHash => GatePage::from(Fingerprint {
            simhash: rng.next_u64(),
            exact: (u128::from(rng.next_u64()) << 64) | i as u128,
        }),
        GateMethod::MinHash => {
            let words: Vec<u32> = if i % 10 == 9 && !recent.is_empty() {
                let mut w = recent[rng.below(recent.len())].clone();
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(w.len());
                    w[at] = 50_000 + rng.below(50_000) as u32;
                }
                w
            } else {
                (0..120).map(|_| rng.below(50_000) as u32).collect()
            };
            if recent.len() < 64 {
                recent.push(words.clone());
            } else {
                let at = rng.below(64);
                recent[at] = words.clone();
            }
            let text: Vec<String> = words.iter().map(|w| format!("w{w}")).collect();
            GatePage::of(&text.join(" "), method)
        }
    }
}

/// A lookup that finds a kept page: its SimHash with one bit flipped, or for MinHash the
/// same page again (an exact copy: every band finds it, and it is verified in full).
fn probe(page: &GatePage, i: usize) -> GatePage {
    match &page.minhash {
        None => GatePage::from(Fingerprint {
            simhash: page.fp.simhash ^ (1 << (i % 64)),
            exact: u128::MAX - i as u128,
        }),
        Some(_) => page.clone(),
    }
}

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
    let method = match args.get(4).map(String::as_str) {
        None | Some("simhash") => GateMethod::SimHash,
        Some("minhash") => GateMethod::MinHash,
        Some(other) => return Err(format!("unknown gate {other:?}").into()),
    };
    let crawl = format!("bench-{}", trawl_core::clock::now_ms());
    let gate: Arc<dyn Gate> = match method {
        GateMethod::SimHash => Arc::new(RedisGate::connect(&url, &crawl, 2).await?),
        GateMethod::MinHash => Arc::new(RedisMinGate::connect(&url, &crawl, 0.8).await?),
    };
    // The pages, made before the clock starts (a sketch is CPU work of its own).
    let made = Instant::now();
    let pages: Vec<Vec<GatePage>> = (0..clients)
        .map(|c| {
            let per = n / clients + usize::from(c < n % clients);
            let mut rng = Rng::new(0x5eed + c as u64);
            let mut recent = Vec::new();
            (0..per)
                .map(|i| page(method, &mut rng, &mut recent, i))
                .collect()
        })
        .collect();
    eprintln!("{n} pages made in {:.1} s", made.elapsed().as_secs_f64());
    let before = used_memory(&url).await?;

    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut copies_found = Vec::new();
    for (c, pages) in pages.into_iter().enumerate() {
        let gate = gate.clone();
        let per = pages.len();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per);
            let mut kept_sample = Vec::new();
            let mut copies = 0usize;
            for (i, fp) in pages.into_iter().enumerate() {
                let id = format!("https://docs.example.org/section-{c}/page-{i:09}.html");
                let t = Instant::now();
                let v = gate.check_and_insert(&fp, &id).await.expect("gate");
                lat.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                if v == GateVerdict::Kept && i % 50 == 0 {
                    kept_sample.push(fp);
                } else if v != GateVerdict::Kept {
                    copies += 1;
                }
                if c == 0 && i % (per / 10).max(1) == 0 {
                    eprintln!("inserted ~{} of {n}", i * clients);
                }
            }
            (lat, kept_sample, copies)
        }));
    }
    let mut lat = Vec::with_capacity(n);
    let mut sample = Vec::new();
    for t in tasks {
        let (l, s, copies) = t.await?;
        lat.extend(l);
        sample.extend(s);
        copies_found.push(copies);
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
                let fp = probe(&sample[i], i);
                let t = Instant::now();
                let v = gate.check_and_insert(&fp, "probe").await.expect("gate");
                lat.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                assert!(
                    matches!(
                        v,
                        GateVerdict::Duplicate { distance: 1, .. } | GateVerdict::Similar { .. }
                    ),
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

    println!(
        "{method:?} gate, pages: {n}, clients: {clients}, found copies: {}",
        copies_found.iter().sum::<usize>()
    );
    println!(
        "insert: {:.0}/s, p50 {:.3} ms, p99 {:.3} ms",
        n as f64 / insert_s,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
    // The SimHash gate stores the pages it keeps; the MinHash gate every page (copies too).
    let stored = match method {
        GateMethod::SimHash => n - copies_found.iter().sum::<usize>(),
        GateMethod::MinHash => n,
    };
    println!(
        "memory: {} bytes in Redis, {:.1} bytes per stored page ({stored} stored; ids are {}-byte URLs)",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / stored.max(1) as f64,
        "https://docs.example.org/section-0/page-000000000.html".len()
    );
    println!(
        "near-copy lookups: {lookups}, {:.0}/s, p50 {:.3} ms, p99 {:.3} ms",
        lookups as f64 / lookup_s,
        pct(&llat, 0.5),
        pct(&llat, 0.99)
    );
    match method {
        GateMethod::SimHash => RedisGate::connect(&url, &crawl, 2).await?.clear().await?,
        GateMethod::MinHash => {
            RedisMinGate::connect(&url, &crawl, 0.8)
                .await?
                .clear()
                .await?
        }
    }
    Ok(())
}
