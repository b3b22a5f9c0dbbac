//! 8 tasks submit the same groups of near-copies in random order; exactly one member of each
//! group is kept. Run against the in-memory gate and against the real Redis on loopback.

use std::collections::HashMap;
use std::sync::Arc;

use trawl_cluster::redis_gate::RedisGate;
use trawl_core::mutate::Rng;
use trawl_dedup::gate::{Gate, GateVerdict, MemoryGate};
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
                    GateVerdict::Kept => kept.push(g),
                    GateVerdict::Duplicate { of, distance } => {
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
        assert_eq!(v, GateVerdict::Kept, "{delivery}");
    }
    gate.clear().await.unwrap();
}

/// One of the processes of the test below (the test binary runs itself as its workers):
/// submits every fingerprint in an order of its own at an agreed moment, and prints the
/// groups it kept. A plain test run (without `TRAWL_GATE_CHILD`) returns at once.
#[tokio::test(flavor = "current_thread")]
async fn gate_process_worker() {
    let Ok(spec) = std::env::var("TRAWL_GATE_CHILD") else {
        return;
    };
    let mut parts = spec.splitn(3, ':');
    let t: u64 = parts.next().unwrap().parse().unwrap();
    let start_ms: u64 = parts.next().unwrap().parse().unwrap();
    let crawl = parts.next().unwrap();
    let gate = RedisGate::connect("redis://127.0.0.1:6379", crawl, 2)
        .await
        .unwrap();
    let groups = groups();
    let mut order: Vec<(usize, usize)> = (0..GROUPS)
        .flat_map(|g| (0..4).map(move |m| (g, m)))
        .collect();
    let mut rng = Rng::new(5000 + t);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let wait = start_ms.saturating_sub(trawl_core::clock::now_ms());
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    let mut kept = Vec::new();
    for (g, m) in order {
        let id = format!("g{g}-m{m}-p{t}");
        if gate.check_and_insert(groups[g][m], &id).await.unwrap() == GateVerdict::Kept {
            kept.push(g);
        }
    }
    println!("KEPT {}", serde_json::to_string(&kept).unwrap());
}

/// 8 processes, each with its own connection, submit the same groups of near-copies in
/// random orders against one Redis at the same moment: exactly one of each group is kept.
#[test]
fn redis_gate_keeps_exactly_one_per_group_across_processes() {
    let crawl = format!("mp-{}-{}", std::process::id(), trawl_core::clock::now_ms());
    // One runtime for the probe and the cleanup: the connection lives on it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let probe = rt.block_on(RedisGate::connect("redis://127.0.0.1:6379", &crawl, 2));
    let gate = match probe {
        Ok(g) => g,
        Err(e) => {
            if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("Redis is required (TRAWL_REQUIRE_SERVICES=1): {e}");
            }
            eprintln!("SKIPPED: no Redis on 127.0.0.1:6379 ({e})");
            return;
        }
    };
    let exe = std::env::current_exe().unwrap();
    // Time for all eight to start and connect before any submits.
    let start = trawl_core::clock::now_ms() + 1500;
    let children: Vec<_> = (0..TASKS)
        .map(|t| {
            std::process::Command::new(&exe)
                .args([
                    "gate_process_worker",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("TRAWL_GATE_CHILD", format!("{t}:{start}:{crawl}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut per_group: HashMap<usize, usize> = HashMap::new();
    let mut pids = std::collections::HashSet::new();
    for c in children {
        pids.insert(c.id());
        let out = c.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("KEPT ").map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("a worker printed no result: {stdout}"));
        for g in serde_json::from_str::<Vec<usize>>(line).unwrap() {
            *per_group.entry(g).or_default() += 1;
        }
    }
    assert_eq!(pids.len(), TASKS, "eight separate processes");
    assert_eq!(per_group.len(), GROUPS, "every group keeps one");
    assert!(per_group.values().all(|&n| n == 1), "{per_group:?}");
    rt.block_on(gate.clear()).unwrap();
}
