//! Helpers for the end-to-end tests: crawl options for the test site, and readers for the
//! outputs a crawl writes.

use std::path::Path;

use serde_json::Value;
use trawl_runtime::CrawlPlan;

/// Options for crawling the loopback test site fast: private addresses allowed, no delay.
pub fn options(seeds: &[String], out: &Path) -> CrawlPlan {
    let mut o = CrawlPlan::with_seeds(seeds.iter().cloned(), out);
    o.crawl.allow_private = true;
    o.crawl.delay_ms = 0;
    o.concurrency = 8;
    o.crawl.timeout_s = 10;
    // These tests are about crawling; the index has its own tests (index_search.rs).
    o.index.no_index = true;
    o
}

/// Every line of `pages.jsonl`.
pub fn pages(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("pages.jsonl")).expect("pages.jsonl exists");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// Every line of every `pages*.jsonl` in `dir`: the cluster's indexers write one file each.
pub fn all_pages(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("pages") && name.ends_with(".jsonl") {
            for l in std::fs::read_to_string(&p).unwrap().lines() {
                out.push(serde_json::from_str(l).expect("each line is JSON"));
            }
        }
    }
    out
}

/// The record whose `url` ends with `suffix`; panics with the list when absent.
pub fn page<'a>(pages: &'a [Value], suffix: &str) -> &'a Value {
    pages
        .iter()
        .find(|p| p["url"].as_str().is_some_and(|u| u.ends_with(suffix)))
        .unwrap_or_else(|| {
            let urls: Vec<&str> = pages.iter().filter_map(|p| p["url"].as_str()).collect();
            panic!("no page ending in {suffix}; have {urls:?}")
        })
}

pub fn report(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report.json exists"))
        .expect("report.json is JSON")
}

pub fn error_kind(p: &Value) -> Option<&str> {
    p["error"]["kind"].as_str()
}

/// The embedding model's directory; `None` (a skip, said why) when it is missing, a failure
/// under `TRAWL_REQUIRE_MODEL=1` (set by CI).
pub fn embedding_model() -> Option<std::path::PathBuf> {
    let model = trawl_index::model::resolve_dir(None);
    if let Err(e) = trawl_index::model::check_dir(&model) {
        if std::env::var("TRAWL_REQUIRE_MODEL").is_ok_and(|v| v == "1") {
            panic!("the embedding model is required (TRAWL_REQUIRE_MODEL=1): {e}");
        }
        eprintln!("SKIPPED: {e}");
        return None;
    }
    Some(model)
}

/// Whether a Python module can be imported; `TRAWL_REQUIRE_PY=1` (set by CI) turns a
/// missing module into a failure instead of a skip.
pub fn python_has(module: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("TRAWL_REQUIRE_PY").is_ok_and(|v| v == "1") {
            panic!("python module {module} is required (TRAWL_REQUIRE_PY=1) but missing");
        }
        eprintln!("SKIPPED: python3 module {module} is not installed (pip install {module})");
    }
    ok
}

/// Smallest gap between one request's end and the next one's start, in ms.
pub fn min_gap_ms(log: &[trawl_testsite::LogEntry]) -> f64 {
    let mut log = log.to_vec();
    log.sort_by_key(|e| e.start_us);
    log.windows(2)
        .map(|w| (w[1].start_us as f64 - w[0].end_us as f64) / 1000.0)
        .fold(f64::INFINITY, f64::min)
}

/// Most requests in flight at once.
pub fn max_overlap(log: &[trawl_testsite::LogEntry]) -> usize {
    let mut events: Vec<(u64, i32)> = Vec::new();
    for e in log {
        events.push((e.start_us, 1));
        events.push((e.end_us, -1));
    }
    // Ends before starts at the same instant: touching is not overlapping.
    events.sort();
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in events {
        cur += d;
        max = max.max(cur);
    }
    max as usize
}

/// Whether NATS and Redis answer on loopback; with `TRAWL_REQUIRE_SERVICES=1` (the test
/// command) their absence is a failure, otherwise the caller skips and says why.
pub fn services_up() -> bool {
    let nats = std::net::TcpStream::connect("127.0.0.1:4222").is_ok();
    let redis = std::net::TcpStream::connect("127.0.0.1:6379").is_ok();
    if nats && redis {
        return true;
    }
    if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
        panic!("nats-server and redis-server required (TRAWL_REQUIRE_SERVICES=1)");
    }
    eprintln!("SKIPPED: nats-server or redis-server not running on loopback");
    false
}

/// A binary of the workspace: they sit beside the test's directory (`target/<profile>/`).
/// One older than a source file it is built from is refused: `cargo test -p trawl-tests`
/// rebuilds the stage libraries this test links but not the service binaries, and would
/// otherwise test the old service.
pub fn bin(name: &str) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?;
    let p = dir.join(name);
    if !p.exists() {
        return None;
    }
    if let Some(src) = stale::newer_source(&p, name) {
        panic!(
            "{} is older than {}, which it is built from: build it again \
             (`cargo build --bin {name}`, or test the whole workspace: `cargo test --workspace`)",
            p.display(),
            src.display()
        );
    }
    Some(p)
}

/// Removes a test crawl's streams from the shared nats-server and its keys from `redis_url`.
pub async fn cleanup(prefix: &str, crawl: &str, redis_url: Option<&str>) {
    let client = async_nats::connect("nats://127.0.0.1:4222").await.unwrap();
    let js = async_nats::jetstream::new(client);
    for hop in trawl_core::pipeline::Hop::ALL {
        let q = trawl_cluster::jetstream::QueueConfig::for_hop(prefix, hop);
        let _ = js.delete_stream(&q.stream).await;
        let _ = js.delete_stream(&q.dead_letter_stream).await;
    }
    if let Some(url) = redis_url {
        let st = trawl_cluster::redis_state::RedisState::connect(url, crawl, 1, 1, 1)
            .await
            .unwrap();
        st.clear().await.unwrap();
    }
}
pub mod api_site;
pub mod changing;
pub mod documents;
pub mod policy;
pub mod services;
pub mod stale;
