//! Memory of the embedded SimHash gate per stored page: resident memory before and after
//! showing it N pages of random prints under 40-byte ids, the way a crawl's pages come.
//!
//!     cargo run --release -p trawl-dedup --example gate_bytes -- 1000000

use trawl_dedup::{Fingerprint, MemoryGate};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let gate = MemoryGate::new(2);
    let before = rss_kib();
    // xorshift: random prints, as distinct pages have.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let started = std::time::Instant::now();
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let fp = Fingerprint {
            simhash: x,
            exact: u128::from(x) << 64 | u128::from(i),
        };
        let id = format!("http://127.1.0.{}:18400/p/{i:08}", i % 20 + 1);
        gate.check_and_insert_sync(fp, &id);
    }
    let took = started.elapsed();
    let after = rss_kib();
    println!(
        "{n} pages: {:.1} bytes a page (resident), {:.2} µs a check",
        (after.saturating_sub(before) * 1024) as f64 / n as f64,
        took.as_secs_f64() * 1e6 / n as f64
    );
}
