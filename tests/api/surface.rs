//! The rest of Firecrawl's surface, driven by the real `firecrawl-py`
//! (tests/py/firecrawl_surface.py): `/v2/search` over the server's own indexes (and a
//! SearXNG-compatible backend), the team figures, `maxAge`, `/v2/parse`, crawl webhooks,
//! monitors over a changing site with a restart of the server between their checks, and
//! the SDK's v1 client through every v1 route. The webhook receiver here checks each
//! delivery's signature and refuses what it is told to, so retries are seen for real.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde_json::{Value, json};
use support::api_site::Fixture;

use super::{Api, args};

const SECRET: &str = "whsec-test-secret";

/// Every delivery attempt: its id, event type, the status answered and whether its
/// signature was right.
#[derive(Default)]
struct Log {
    attempts: Vec<Value>,
    /// `refuse`: every delivery refused; `first`: the next one refused, then accepted.
    mode: String,
}

type Shared = Arc<Mutex<Log>>;

fn signature(body: &[u8]) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    format!(
        "sha256={}",
        data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes())
    )
}

async fn receive(State(log): State<Shared>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let given = headers
        .get("x-firecrawl-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut l = log.lock().unwrap();
    let refuse = match l.mode.as_str() {
        "refuse" => true,
        "first" => {
            l.mode = String::new();
            true
        }
        _ => false,
    };
    let status = if refuse { 500 } else { 200 };
    l.attempts.push(json!({
        "id": headers.get("webhook-id").and_then(|v| v.to_str().ok()),
        "type": v["type"],
        "status": status,
        "signed": given == signature(&body),
        "body": v,
    }));
    StatusCode::from_u16(status).unwrap()
}

/// A SearXNG-compatible endpoint: web results for queries about "fresh news", none else.
async fn searx(Query(q): Query<Vec<(String, String)>>) -> axum::Json<Value> {
    let query = q
        .iter()
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let format = q
        .iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v.as_str())
        == Some("json");
    if !format || !query.contains("fresh news") {
        return axum::Json(json!({"query": query, "results": []}));
    }
    axum::Json(json!({"query": query, "results": [
        {"url": "https://news.example.org/today", "title": "Today's fresh news", "content": "What happened today."},
        {"url": "https://news.example.org/yesterday", "title": "Yesterday", "content": "What happened before."},
    ]}))
}

async fn receiver() -> (String, Shared) {
    let log: Shared = Arc::default();
    let app = Router::new()
        .route("/hook", post(receive))
        .route(
            "/log",
            get(|State(l): State<Shared>| async move {
                axum::Json(Value::Array(l.lock().unwrap().attempts.clone()))
            }),
        )
        .route(
            "/mode",
            post(|State(l): State<Shared>, body: String| async move {
                l.lock().unwrap().mode = body;
                "ok"
            }),
        )
        .route("/search", get(searx))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, log)
}

/// One phase of the SDK script; its stdout.
async fn phase(name: &str, api: &str, site: &str, hooks: &str, state: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/firecrawl_surface.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .arg(name)
        .env("FIRECRAWL_API_URL", api)
        .env("FIRECRAWL_API_KEY", "fc-test")
        .env("SITE", site)
        .env("HOOKS", hooks)
        .env("STATE", state)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!(
        "--- phase {name}\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "phase {name} of the SDK checks failed:\n{stdout}"
    );
    assert!(stdout.contains("all passed"), "{stdout}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn search_monitors_webhooks_and_v1_through_the_sdk_across_a_restart() {
    if !support::python_has("firecrawl") {
        return;
    }
    let site = Fixture::start().await;
    let (hooks, log) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let config = || {
        let mut cfg = args(&dir.path().join("serve"), &["fc-test"]);
        cfg.search_backend = Some(format!("{hooks}/search"));
        cfg.settings.process.webhook_secret = Some(SECRET.into());
        cfg.settings.crawl.webhook_backoff_ms = 300;
        cfg.settings.crawl.webhook_tries = 30;
        cfg.monthly_credits = 100_000;
        // The schedule test runs a monitor every two seconds.
        cfg.monitor_min_interval_s = 1;
        cfg
    };
    let api = Api::start(config()).await;
    let out = phase("one", &api.base, &site.url(""), &hooks, &state).await;

    // The API's hits are `trawl search`'s: the same function over the crawl job's index,
    // one result per page.
    let line = |p: &str| -> Value {
        serde_json::from_str(
            out.lines()
                .find_map(|l| l.strip_prefix(p))
                .unwrap_or_else(|| panic!("no {p}line")),
        )
        .unwrap()
    };
    let (job, urls) = (line("SEARCH_JOB "), line("SEARCH_URLS "));
    let index = dir
        .path()
        .join("serve/jobs")
        .join(job.as_str().unwrap())
        .join("index");
    let found = trawl_runtime::search::search(&trawl_runtime::search::SearchQuery {
        index,
        query: "rivers carry water from the mountains".into(),
        k: 3 * trawl_api::search::CHUNKS_PER_RESULT,
        mode: trawl_index::Mode::Hybrid,
        model_dir: None,
    })
    .await
    .unwrap();
    let mut pages: Vec<String> = Vec::new();
    for h in found.hits {
        if !pages.contains(&h.url) && pages.len() < 3 {
            pages.push(h.url);
        }
    }
    assert_eq!(
        json!(pages),
        urls,
        "the API and trawl search give the same pages"
    );

    // The monitor's second check runs while every delivery is refused; the server then
    // stops with them waiting, and the next one delivers them all.
    log.lock().unwrap().mode = "refuse".into();
    phase("two", &api.base, &site.url(""), &hooks, &state).await;
    let refused = log
        .lock()
        .unwrap()
        .attempts
        .iter()
        .filter(|a| a["status"] == 500)
        .count();
    assert!(
        refused > 0,
        "deliveries were refused while the receiver was down"
    );
    api.stop().await;
    log.lock().unwrap().mode = String::new();
    let api = Api::start(config()).await;
    phase("three", &api.base, &site.url(""), &hooks, &state).await;
    api.stop().await;

    // Every event was delivered in the end, signed, and a refused one came again under
    // the same id.
    let attempts = log.lock().unwrap().attempts.clone();
    assert!(
        attempts.iter().all(|a| a["signed"] == true),
        "every delivery is signed"
    );
    let delivered: std::collections::HashSet<&str> = attempts
        .iter()
        .filter(|a| a["status"] == 200)
        .filter_map(|a| a["id"].as_str())
        .collect();
    for a in attempts.iter().filter(|a| a["status"] == 500) {
        let id = a["id"].as_str().unwrap();
        assert!(
            delivered.contains(id),
            "the refused delivery {id} ({}) was never delivered",
            a["type"]
        );
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// Every mutation of the new request bodies (search, monitors, the v1 routes, a crawl's
/// webhook) gets an answer in Firecrawl's JSON, and none a 5xx but a site's own failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutated_bodies_of_the_new_routes_get_json_answers() {
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(args(dir.path(), &["fc-test"])).await;
    let seeds: Vec<(&str, Value)> = vec![
        (
            "/v2/search",
            json!({"query": "rivers", "limit": 3, "sources": [{"type": "web"}],
            "includeDomains": ["127.0.0.1"], "scrapeOptions": {"formats": ["markdown"]}}),
        ),
        (
            "/v2/monitor",
            json!({"name": "m", "schedule": {"text": "every 30 minutes", "timezone": "UTC"},
            "targets": [{"type": "scrape", "urls": [site.url("/a")]},
                        {"type": "crawl", "url": site.url("/wiki/"), "crawlOptions": {"limit": 3}},
                        {"type": "search", "queries": ["rivers"], "maxResults": 2}],
            "webhook": {"url": site.url("/hook"), "events": ["monitor.page"]}, "retentionDays": 7}),
        ),
        (
            "/v1/scrape",
            json!({"url": site.url("/a"), "formats": ["markdown", "json", "changeTracking"],
            "jsonOptions": {"prompt": "p"}, "changeTrackingOptions": {"modes": ["git-diff"], "tag": "t"},
            "timeout": 30000}),
        ),
        (
            "/v1/crawl",
            json!({"url": site.url("/blog/post-1"), "limit": 2, "maxDepth": 1,
            "allowBackwardLinks": true, "ignoreSitemap": true,
            "scrapeOptions": {"formats": ["markdown"]}, "webhook": {"url": site.url("/hook"), "events": ["page"]}}),
        ),
        (
            "/v1/map",
            json!({"url": site.url("/"), "sitemapOnly": true, "limit": 5}),
        ),
        (
            "/v1/batch/scrape",
            json!({"urls": [site.url("/a")], "formats": ["markdown"],
            "webhook": {"url": site.url("/hook")}, "ignoreInvalidURLs": true}),
        ),
    ];
    let seed_bytes: Vec<Vec<u8>> = seeds
        .iter()
        .map(|(_, s)| s.to_string().into_bytes())
        .collect();
    let refs: Vec<&[u8]> = seed_bytes.iter().map(|s| s.as_slice()).collect();
    let per_seed = 20;
    let mut bodies = Vec::new();
    trawl_core::mutate::each_mutation(&refs, per_seed, |m| bodies.push(m.to_vec()));
    for (i, b) in bodies.into_iter().enumerate() {
        let path = seeds[(i / (per_seed + 1)).min(seeds.len() - 1)].0;
        super::answers_hostile_body(&format!("{}{path}", api.base), "fc-test", i, b).await;
    }
    api.stop().await;
}
