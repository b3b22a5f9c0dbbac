//! 8 tasks submit the same groups of near-copies in random order; exactly one member of each
//! group is kept. Run against the in-memory gate and against the real Redis on loopback.

use std::collections::HashMap;
use std::sync::Arc;

use trawl_cluster::redis_gate::RedisGate;
use trawl_cluster::redis_min_gate::RedisMinGate;
use trawl_core::mutate::Rng;
use trawl_dedup::gate::{Gate, GateMethod, GatePage, GateVerdict, MemoryGate, MemoryMinGate};
use trawl_dedup::{Fingerprint, hamming};

const GROUPS: usize = 60;
const TASKS: usize = 8;

/// Groups of 4 pages, near-copies of each other by `method`'s rule, groups far apart:
/// fingerprints pairwise within distance 2 (SimHash), or texts of 300 words of which 1 to
/// 3 differ (MinHash: 5-gram Jaccard about 0.9).
fn groups(method: GateMethod) -> Vec<Vec<GatePage>> {
    match method {
        GateMethod::SimHash => simhash_groups(),
        GateMethod::MinHash => text_groups(),
    }
}

fn simhash_groups() -> Vec<Vec<GatePage>> {
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
                .map(|(m, &s)| {
                    GatePage::from(Fingerprint {
                        simhash: s,
                        exact: (g * 10 + m) as u128,
                    })
                })
                .collect()
        })
        .collect()
}

fn text_groups() -> Vec<Vec<GatePage>> {
    let mut rng = Rng::new(43);
    (0..GROUPS)
        .map(|_| {
            let base: Vec<String> = (0..300)
                .map(|_| format!("w{}", rng.below(50_000)))
                .collect();
            (0..4)
                .map(|m| {
                    let mut words = base.clone();
                    // Member m changes words at m places, spread out (member 0 is the base).
                    for k in 0..m {
                        words[40 + 90 * k] = format!("edit{m}x{k}");
                    }
                    GatePage::of(&words.join(" "), GateMethod::MinHash)
                })
                .collect()
        })
        .collect()
}

async fn run(gate: Arc<dyn Gate>) {
    let method = gate.method();
    let groups = Arc::new(groups(method));
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
                match gate.check_and_insert(&groups[g][m], &id).await.unwrap() {
                    GateVerdict::Kept => kept.push(g),
                    GateVerdict::Duplicate { of, distance } => {
                        assert!(of.starts_with(&format!("g{g}-")), "{id} matched {of}");
                        assert!(distance <= 2);
                    }
                    GateVerdict::Similar { of, similarity } => {
                        assert!(of.starts_with(&format!("g{g}-")), "{id} matched {of}");
                        assert!(similarity >= 0.8, "{similarity}");
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
async fn memory_minhash_gate_keeps_exactly_one_per_group() {
    run(Arc::new(MemoryMinGate::new(0.8))).await;
}

const REDIS: &str = "redis://127.0.0.1:6379";

/// The crawl's gate of `method` in the Redis on loopback, `None` (the test skipped, saying
/// why) when there is none and the test command did not ask for services.
async fn redis_gate(method: GateMethod, crawl: &str) -> Option<Arc<dyn Gate>> {
    let gate: Result<Arc<dyn Gate>, _> = match method {
        GateMethod::SimHash => RedisGate::connect(REDIS, crawl, 2)
            .await
            .map(|g| Arc::new(g) as _),
        GateMethod::MinHash => RedisMinGate::connect(REDIS, crawl, 0.8)
            .await
            .map(|g| Arc::new(g) as _),
    };
    match gate {
        Ok(g) => Some(g),
        Err(e) => {
            if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
                panic!("Redis is required (TRAWL_REQUIRE_SERVICES=1): {e}");
            }
            eprintln!("SKIPPED: no Redis on 127.0.0.1:6379 ({e}); scripts/services.sh starts one");
            None
        }
    }
}

async fn clear(method: GateMethod, crawl: &str) {
    match method {
        GateMethod::SimHash => {
            RedisGate::connect(REDIS, crawl, 2)
                .await
                .unwrap()
                .clear()
                .await
        }
        GateMethod::MinHash => {
            let g = RedisMinGate::connect(REDIS, crawl, 0.8).await.unwrap();
            g.clear().await
        }
    }
    .unwrap();
}

async fn redis_keeps_exactly_one_per_group(method: GateMethod) {
    let crawl = format!(
        "test-{}-{}-{method:?}",
        std::process::id(),
        trawl_core::clock::now_ms()
    );
    let Some(gate) = redis_gate(method, &crawl).await else {
        return;
    };
    run(gate.clone()).await;
    // A redelivery of a kept page is still kept, not a copy of itself.
    let own = match method {
        GateMethod::SimHash => GatePage::from(Fingerprint {
            simhash: 1,
            exact: u128::MAX,
        }),
        GateMethod::MinHash => GatePage::of("a page of its own, unlike the others", method),
    };
    for delivery in ["first", "redelivered"] {
        let v = gate.check_and_insert(&own, "self").await.unwrap();
        assert_eq!(v, GateVerdict::Kept, "{delivery}");
    }
    clear(method, &crawl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_gate_keeps_exactly_one_per_group() {
    redis_keeps_exactly_one_per_group(GateMethod::SimHash).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_minhash_gate_keeps_exactly_one_per_group() {
    redis_keeps_exactly_one_per_group(GateMethod::MinHash).await;
}

/// One of the processes of the test below (the test binary runs itself as its workers):
/// submits every fingerprint in an order of its own at an agreed moment, and prints the
/// groups it kept. A plain test run (without `TRAWL_GATE_CHILD`) returns at once.
#[tokio::test(flavor = "current_thread")]
async fn gate_process_worker() {
    let Ok(spec) = std::env::var("TRAWL_GATE_CHILD") else {
        return;
    };
    let mut parts = spec.splitn(4, ':');
    let t: u64 = parts.next().unwrap().parse().unwrap();
    let start_ms: u64 = parts.next().unwrap().parse().unwrap();
    let method = match parts.next().unwrap() {
        "minhash" => GateMethod::MinHash,
        _ => GateMethod::SimHash,
    };
    let crawl = parts.next().unwrap();
    let gate = redis_gate(method, crawl).await.expect("Redis");
    let groups = groups(method);
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
        if gate.check_and_insert(&groups[g][m], &id).await.unwrap() == GateVerdict::Kept {
            kept.push(g);
        }
    }
    println!("KEPT {}", serde_json::to_string(&kept).unwrap());
}

/// 8 processes, each with its own connection, submit the same groups of near-copies in
/// random orders against one Redis at the same moment: exactly one of each group is kept.
#[test]
fn redis_gate_keeps_exactly_one_per_group_across_processes() {
    across_processes(GateMethod::SimHash, "simhash");
}

#[test]
fn redis_minhash_gate_keeps_exactly_one_per_group_across_processes() {
    across_processes(GateMethod::MinHash, "minhash");
}

fn across_processes(method: GateMethod, name: &str) {
    let crawl = format!(
        "mp-{}-{}-{name}",
        std::process::id(),
        trawl_core::clock::now_ms()
    );
    // One runtime for the probe and the cleanup: the connection lives on it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    if rt.block_on(redis_gate(method, &crawl)).is_none() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // Time for all eight to start and connect before any submits.
    let start = trawl_core::clock::now_ms() + 1500;
    let children: Vec<_> = (0..TASKS)
        .map(|t| {
            std::process::Command::new(&exe)
                .args([
                    // The worker test by its full name in this binary.
                    concat!(module_path!(), "::gate_process_worker")
                        .split_once("::")
                        .map_or("gate_process_worker", |(_, name)| name),
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("TRAWL_GATE_CHILD", format!("{t}:{start}:{name}:{crawl}"))
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
    rt.block_on(clear(method, &crawl));
}

/// Pages in families that drift (each member a little off the one before: 1 or 2 bits of
/// its SimHash, with every third an exact copy of the one before, or a few words of its
/// text), in one order for both gates.
fn drifting_pages(method: GateMethod) -> Vec<(String, GatePage)> {
    let mut rng = Rng::new(44);
    let mut out: Vec<(String, GatePage)> = Vec::new();
    for family in 0..12u128 {
        if method == GateMethod::MinHash {
            break;
        }
        let mut print = rng.next_u64();
        let mut exact = family * 10;
        for member in 0..6u128 {
            if member % 3 != 2 {
                for _ in 0..1 + rng.below(2) {
                    print ^= 1 << rng.below(64);
                }
                exact = family * 10 + member;
            }
            let page = GatePage::from(Fingerprint {
                simhash: print,
                exact,
            });
            out.push((format!("f{family}-m{member}"), page));
        }
    }
    for family in 0..12 {
        if method == GateMethod::SimHash {
            break;
        }
        let mut words: Vec<String> = (0..150)
            .map(|_| format!("w{}", rng.below(50_000)))
            .collect();
        for member in 0..6 {
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(words.len());
                words[at] = format!("f{family}m{member}x{}", rng.below(1000));
            }
            let page = GatePage::of(&words.join(" "), GateMethod::MinHash);
            out.push((format!("f{family}-m{member}"), page));
        }
    }
    // One large family whose members share band buckets, past their bound: 300 prints
    // that differ only in the top band's bits, or 100 texts that differ in one word.
    let big = match method {
        GateMethod::SimHash => 300,
        GateMethod::MinHash => 100,
    };
    let mut print = rng.next_u64();
    let words: Vec<String> = (0..200)
        .map(|_| format!("w{}", rng.below(50_000)))
        .collect();
    for member in 0..big {
        let page = match method {
            GateMethod::SimHash => {
                print ^= 1 << (42 + rng.below(22));
                GatePage::from(Fingerprint {
                    simhash: print,
                    exact: 1_000_000 + member as u128,
                })
            }
            GateMethod::MinHash => {
                let mut w = words.clone();
                w[100] = format!("big{member}");
                GatePage::of(&w.join(" "), method)
            }
        };
        out.push((format!("big-m{member}"), page));
    }
    // Interleave the families, as a crawl meets them.
    let mut order: Vec<usize> = (0..out.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order.into_iter().map(|i| out[i].clone()).collect()
}

/// The Lua scripts and the in-process gates make the same decision for every page, and a
/// second showing of every page (redeliveries) gets its first answer again.
async fn redis_decides_as_memory_does(method: GateMethod) {
    let crawl = format!(
        "parity-{}-{}-{method:?}",
        std::process::id(),
        trawl_core::clock::now_ms()
    );
    let Some(redis) = redis_gate(method, &crawl).await else {
        return;
    };
    // The in-process gate, and how many pages it stores.
    let (memory, memory_len): (Arc<dyn Gate>, Box<dyn Fn() -> usize>) = match method {
        GateMethod::SimHash => {
            let g = Arc::new(MemoryGate::new(2));
            (g.clone(), Box::new(move || g.len()))
        }
        GateMethod::MinHash => {
            let g = Arc::new(MemoryMinGate::new(0.8));
            (g.clone(), Box::new(move || g.len()))
        }
    };
    let pages = drifting_pages(method);
    let mut first = Vec::new();
    for (id, page) in &pages {
        let m = memory.check_and_insert(page, id).await.unwrap();
        let r = redis.check_and_insert(page, id).await.unwrap();
        match (&m, &r) {
            (
                GateVerdict::Similar {
                    of: a,
                    similarity: x,
                },
                GateVerdict::Similar {
                    of: b,
                    similarity: y,
                },
            ) => {
                assert_eq!(a, b, "{id}");
                assert!((x - y).abs() < 1e-6, "{id}: {x} vs {y}");
            }
            _ => assert_eq!(m, r, "{id}"),
        }
        first.push(r);
    }
    let copies = first.iter().filter(|v| **v != GateVerdict::Kept).count();
    assert!(
        copies * 4 >= pages.len() * 3,
        "most family members are copies: {copies} of {}",
        pages.len()
    );
    // Copies name pages shown before them, so each family's chain ends at a kept page.
    for (k, (id, _)) in pages.iter().enumerate() {
        if let Some(of) = first[k].original() {
            let at = pages.iter().position(|(p, _)| p == of).unwrap();
            assert!(at < k, "{id} names the later {of}");
        }
    }
    let conn = redis::Client::open(REDIS)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = match method {
        GateMethod::SimHash => format!("trawl:{{{crawl}}}:sh:n"),
        GateMethod::MinHash => format!("trawl:{{{crawl}}}:mh:n"),
    };
    let stored = |mut conn: redis::aio::MultiplexedConnection| {
        let key = key.clone();
        async move {
            redis::cmd("GET")
                .arg(key)
                .query_async::<usize>(&mut conn)
                .await
                .unwrap()
        }
    };
    // Both store the same pages (SimHash: not the exact copies).
    let before = stored(conn.clone()).await;
    assert_eq!(before, memory_len());
    if method == GateMethod::SimHash {
        assert!(before < pages.len(), "{before} of {}", pages.len());
    }
    for ((id, page), was) in pages.iter().zip(&first) {
        assert_eq!(
            &redis.check_and_insert(page, id).await.unwrap(),
            was,
            "{id} again"
        );
        assert_eq!(&memory.check_and_insert(page, id).await.unwrap(), was);
    }
    assert_eq!(
        stored(conn.clone()).await,
        before,
        "a redelivery is not stored twice"
    );
    assert_eq!(memory_len(), before);

    clear(method, &crawl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_simhash_gate_decides_as_the_memory_gate_does() {
    redis_decides_as_memory_does(GateMethod::SimHash).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_minhash_gate_decides_as_the_memory_gate_does() {
    redis_decides_as_memory_does(GateMethod::MinHash).await;
}
