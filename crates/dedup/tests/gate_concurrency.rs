//! 8 tasks submit the same groups of near-copies in random order; exactly one member of each
//! group is kept. Run against the in-memory gate and against the real Redis on loopback.

use std::collections::HashMap;
use std::sync::Arc;

use trawl_core::mutate::Rng;
use trawl_dedup::gate::{Gate, MemoryGate, Verdict};
use trawl_dedup::redis_gate::RedisGate;
use trawl_dedup::{Fingerprint, hamming};

const GROUPS: usize = 60;
const TASKS: usize = 8;

/// Groups of 4 fingerprints, pairwise within distance 2, groups far apart.
fn groups() -> Vec<Vec<Fingerprint>> {
    let mut rng = Rng::new(42);
    let mut bases: Vec<u64> = Vec::new();
    while bases.len() < GROUPS {
        let b = rng.next_u64();
        if bases.iter().all(|o| hamming(*o, b) > 12) {
            bases.push(b);
        }
    }
    bases
        .iter()
        .enumerate()
        .map(|(g, &b)| {
            // Two different bits.
            let i = rng.below(64);
            let j = (i + 1 + rng.below(63)) % 64;
            [b, b ^ (1 << i), b ^ (1 << j), b ^ (1 << i) ^ (1 << j)]
                .iter()
                .enumerate()
                .map(|(m, &s)| Fingerprint {
                    simhash: s,
                    exact: (g * 10 + m) as u128,
                })
                .collect()
        })
        .collect()
}

async fn run(gate: Arc<dyn Gate>) {
    let groups = Arc::new(groups());
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let (gate, groups) = (gate.clone(), groups.clone());
        handles.push(tokio::spawn(async move {
            let mut order: Vec<(usize, usize)> = (0..GROUPS)
                .flat_map(|g| (0..4).map(move |m| (g, m)))
                .collect();
            let mut rng = Rng::new(1000 + t as u64);
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            let mut kept = Vec::new();
            for (g, m) in order {
                let id = format!("g{g}-m{m}-t{t}");
                match gate.check_and_insert(groups[g][m], &id).await.unwrap() {
                    Verdict::Kept => kept.push(g),
                    Verdict::Duplicate { of, distance } => {
                        assert!(of.starts_with(&format!("g{g}-")), "{id} matched {of}");
                        assert!(distance <= 2);
                    }
                }
            }
            kept
        }));
    }
    let mut per_group: HashMap<usize, usize> = HashMap::new();
    for h in handles {
        for g in h.await.unwrap() {
            *per_group.entry(g).or_default() += 1;
        }
    }
    assert_eq!(per_group.len(), GROUPS, "every group keeps one");
    assert!(per_group.values().all(|&n| n == 1), "{per_group:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_gate_keeps_exactly_one_per_group() {
    run(Arc::new(MemoryGate::new(2))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_gate_keeps_exactly_one_per_group() {
    let crawl = format!(
        "test-{}-{}",
        std::process::id(),
        trawl_core::clock::now_ms()
    );
    let gate = match RedisGate::connect("redis://127.0.0.1:6379", &crawl, 2).await {
        Ok(g) => g,
        Err(e) => {
            if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("Redis is required (TRAWL_REQUIRE_SERVICES=1): {e}");
            }
            eprintln!("SKIPPED: no Redis on 127.0.0.1:6379 ({e}); scripts/services.sh starts one");
            return;
        }
    };
    let gate = Arc::new(gate);
    run(gate.clone()).await;
    // A redelivery of a kept page is still kept, not a copy of itself.
    let own = Fingerprint {
        simhash: 1,
        exact: u128::MAX,
    };
    for delivery in ["first", "redelivered"] {
        let v = gate.check_and_insert(own, "self").await.unwrap();
        assert_eq!(v, Verdict::Kept, "{delivery}");
    }
    gate.clear().await.unwrap();
}
