//! `trawl serve`, Firecrawl's v2 API: driven by the real `firecrawl-py` and
//! `langchain-firecrawl` (tests/py/firecrawl_sdk.py), and over raw HTTP for what the SDK
//! cannot show: Firecrawl's error body for bad requests, pagination through `next`, jobs
//! that outlive a `kill -9` of the server, per-key limits, the private-address default,
//! and `trawl map` printing what `/v2/map` answers.

mod formats;
mod mcp;
mod surface;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::api_site::Fixture;
use trawl_api::ServeConfig;
use trawl_core::settings::{CrawlSettings, Settings};

fn args(data: &Path, keys: &[&str]) -> ServeConfig {
    let settings = Settings {
        crawl: CrawlSettings {
            allow_private: true,
            delay_ms: 0,
            timeout_s: 10,
            ..CrawlSettings::default()
        },
        ..Settings::default()
    };
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data: data.to_path_buf(),
        api_keys: keys.iter().map(|k| k.to_string()).collect(),
        job_concurrency: 4,
        max_request_bytes: 1 << 20,
        ..ServeConfig::new(settings)
    }
}

/// A server in this process; it stops (its jobs left resumable) when the sender drops.
struct Api {
    base: String,
    _stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Api {
    async fn start(args: ServeConfig) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(trawl_api::serve_on(listener, args, async move {
            let _ = rx.await;
        }));
        Self {
            base,
            _stop: tx,
            task,
        }
    }

    async fn stop(self) {
        drop(self._stop);
        self.task.await.unwrap().unwrap();
    }
}

async fn post_json(url: &str, key: Option<&str>, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, v)
}

/// A mutated request body `i` posted to `url` is answered in Firecrawl's JSON, and never
/// with a 5xx but a site's own failure (a mangled URL's host does not answer).
async fn answers_hostile_body(url: &str, key: &str, i: usize, body: Vec<u8>) {
    let resp = reqwest::Client::new()
        .post(url)
        .bearer_auth(key)
        .body(body)
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("mutation {i}: not JSON ({code}): {e}: {text}"));
    assert!(v["success"].is_boolean(), "mutation {i}: {v}");
    if code >= 500 {
        let site_side = v["code"].as_str().is_some_and(|c| {
            c.starts_with("SCRAPE_") || c == "ROBOTS_UNREACHABLE" || c == "SITE_BUSY"
        });
        assert!(site_side, "mutation {i} ({code}): {v}");
    }
}

async fn get_json(url: &str) -> (u16, Value) {
    let resp = reqwest::get(url).await.unwrap();
    let status = resp.status().as_u16();
    (
        status,
        serde_json::from_str(&resp.text().await.unwrap()).unwrap(),
    )
}

async fn wait_done(url: &str, secs: u64) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let (code, v) = get_json(url).await;
        assert_eq!(code, 200, "{v}");
        if v["status"] != "scraping" {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still scraping: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn firecrawl_py_and_langchain_work_unchanged() {
    if !support::python_has("firecrawl") || !support::python_has("langchain_firecrawl") {
        return;
    }
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(args(dir.path(), &["fc-test"])).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/firecrawl_sdk.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .env("FIRECRAWL_API_URL", &api.base)
        .env("FIRECRAWL_API_KEY", "fc-test")
        .env("SITE", site.url(""))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the SDK checks failed:\n{stdout}");
    assert!(stdout.contains("all passed"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_get_firecrawls_error_body_and_never_a_crash() {
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(args(dir.path(), &["k1"])).await;
    let scrape = format!("{}/v2/scrape", api.base);
    let k = Some("k1");
    let cases: Vec<(&str, String, u16)> = vec![
        ("not JSON", "{not json".into(), 400),
        ("no url", r#"{"formats":["markdown"]}"#.into(), 400),
        ("a relative url", r#"{"url":"/a"}"#.into(), 400),
        (
            "a wrong type",
            r#"{"url":"http://x/","onlyMainContent":"yes"}"#.into(),
            400,
        ),
        (
            "an unknown format",
            format!(r#"{{"url":"{}","formats":["audio"]}}"#, site.url("/")),
            400,
        ),
        (
            "a bad selector",
            format!(r#"{{"url":"{}","includeTags":["div["]}}"#, site.url("/")),
            400,
        ),
    ];
    for (what, body, want) in cases {
        let (code, v) = post_json(&scrape, k, body).await;
        assert_eq!(code, want, "{what}: {v}");
        assert_eq!(v["success"], false, "{what}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{what}: {v}"
        );
    }
    // Unknown fields are ignored.
    let (code, v) = post_json(
        &scrape,
        k,
        format!(
            r#"{{"url":"{}","origin":"python-sdk@9","someNewField":[1,2]}}"#,
            site.url("/")
        ),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let crawl = format!("{}/v2/crawl", api.base);
    for (what, body) in [
        (
            "ignoreRobotsTxt",
            format!(r#"{{"url":"{}","ignoreRobotsTxt":true}}"#, site.url("/")),
        ),
        (
            "a bad path pattern",
            format!(
                r#"{{"url":"{}","includePaths":["(unclosed"]}}"#,
                site.url("/")
            ),
        ),
        (
            "a bad sitemap mode",
            format!(r#"{{"url":"{}","sitemap":"sometimes"}}"#, site.url("/")),
        ),
    ] {
        let (code, v) = post_json(&crawl, k, body).await;
        assert_eq!((code, &v["success"]), (400, &json!(false)), "{what}: {v}");
    }
    // No key, a wrong key: 401 with the error body; health and metrics need none.
    let (code, v) = post_json(&scrape, None, format!(r#"{{"url":"{}"}}"#, site.url("/"))).await;
    assert_eq!((code, &v["success"]), (401, &json!(false)), "{v}");
    let (code, _) = post_json(
        &scrape,
        Some("k2"),
        format!(r#"{{"url":"{}"}}"#, site.url("/")),
    )
    .await;
    assert_eq!(code, 401);
    assert_eq!(
        reqwest::get(format!("{}/healthz", api.base))
            .await
            .unwrap()
            .status(),
        200
    );
    // Too large a body: 413, still Firecrawl's shape.
    let (code, v) = post_json(&scrape, k, vec![b' '; 2 << 20]).await;
    assert_eq!((code, &v["success"]), (413, &json!(false)), "{v}");
    // Unknown paths and jobs.
    let (code, v) = post_json(&format!("{}/v2/nothing", api.base), k, "{}").await;
    assert_eq!((code, &v["success"]), (404, &json!(false)), "{v}");
    // Hostile bodies: every mutation of valid requests is answered, none with a 5xx
    // other than a fetch failure of a mangled URL.
    let seeds = [
        format!(
            r#"{{"url":"{}","formats":["markdown","html",{{"type":"changeTracking","modes":["git-diff"]}}],"includeTags":["main"],"timeout":5000}}"#,
            site.url("/a")
        ),
        format!(
            r#"{{"url":"{}","limit":2,"includePaths":["^/b"],"scrapeOptions":{{"formats":["links"]}}}}"#,
            site.url("/")
        ),
    ];
    let seed_bytes: Vec<&[u8]> = seeds.iter().map(|s| s.as_bytes()).collect();
    let mut bodies = Vec::new();
    trawl_core::mutate::each_mutation(&seed_bytes, 60, |m| bodies.push(m.to_vec()));
    for (i, b) in bodies.into_iter().enumerate() {
        let path = if i % 2 == 0 { "/v2/scrape" } else { "/v2/map" };
        answers_hostile_body(&format!("{}{path}", api.base), "k1", i, b).await;
    }
    let metrics = reqwest::get(format!("{}/metrics", api.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("trawl_api_requests_total{route=\"/v2/scrape\",status=\"400\"}"),
        "{metrics}"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crawl_is_read_page_by_page_through_next() {
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(args(dir.path(), &[])).await;
    let (code, v) = post_json(
        &format!("{}/v2/crawl", api.base),
        None,
        json!({"url": site.url("/"), "limit": 5, "scrapeOptions": {"formats": ["markdown", "links"]}}).to_string(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let status_url = v["url"].as_str().unwrap().to_string();
    assert!(status_url.ends_with(v["id"].as_str().unwrap()));
    let done = wait_done(&status_url, 60).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        (done["completed"].as_u64(), done["total"].as_u64()),
        (Some(5), Some(5)),
        "{done}"
    );
    let mut seen = Vec::new();
    let mut next = Some(format!("{status_url}?limit=2"));
    let mut pages = 0;
    while let Some(url) = next {
        let (_, v) = get_json(&url).await;
        pages += 1;
        for d in v["data"].as_array().unwrap() {
            assert!(d["markdown"].as_str().is_some_and(|m| !m.is_empty()), "{d}");
            assert!(d["links"].is_array(), "links format: {d}");
            assert_eq!(d["metadata"]["statusCode"], 200);
            seen.push(d["metadata"]["sourceURL"].as_str().unwrap().to_string());
        }
        // The page size asked for stays on `next`.
        next = v["next"].as_str().map(str::to_string);
        if let Some(n) = &next {
            assert!(n.ends_with("&limit=2"), "{n}");
        }
        assert!(pages < 10, "next never ends");
    }
    assert_eq!(pages, 3, "5 documents at 2 a page");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((seen.len(), unique.len()), (5, 5), "{seen:?}");
    let (code, v) = get_json(&format!("{}/v2/crawl/{}", api.base, uuid::Uuid::new_v4())).await;
    assert_eq!((code, &v["error"]), (404, &json!("Job not found")));
    let (code, v) = get_json(&format!("{status_url}?skip=two")).await;
    assert_eq!((code, &v["success"]), (400, &json!(false)), "{v}");

    // A crawl under a path stays under it, though the site's sitemap (read by default)
    // lists pages elsewhere.
    let (_, v) = post_json(
        &format!("{}/v2/crawl", api.base),
        None,
        json!({"url": site.url("/blog/post-1"), "limit": 10}).to_string(),
    )
    .await;
    let done = wait_done(v["url"].as_str().unwrap(), 60).await;
    let mut urls: Vec<&str> = done["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["metadata"]["sourceURL"].as_str().unwrap())
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        vec![site.url("/blog/post-1"), site.url("/blog/post-2")],
        "{done}"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crawl_job_outlives_a_kill_of_the_server() {
    let Some(trawl) = support::bin("trawl") else {
        panic!("the trawl binary is built with the tests (cargo build --workspace)");
    };
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let start = || {
        tokio::process::Command::new(&trawl)
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--allow-private",
                "--delay",
                "0",
            ])
            .arg("--data")
            .arg(dir.path())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let up = |base: String| async move {
        for _ in 0..200 {
            if reqwest::get(format!("{base}/healthz")).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("trawl serve did not start");
    };
    let mut server = start();
    up(base.clone()).await;
    // 30 slow pages, one at a time: several seconds of crawl to kill in the middle of.
    let (code, v) = post_json(
        &format!("{base}/v2/crawl"),
        None,
        json!({"url": site.url("/slow/0"), "limit": 30, "sitemap": "skip", "maxConcurrency": 1})
            .to_string(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let status_url = format!("{base}/v2/crawl/{}", v["id"].as_str().unwrap());
    loop {
        let (_, v) = get_json(&status_url).await;
        if v["completed"].as_u64().unwrap_or(0) >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.start_kill().unwrap();
    server.wait().await.unwrap();
    let mut server = start();
    up(base.clone()).await;
    let done = wait_done(&status_url, 120).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["completed"], 30, "{done}");
    let mut urls = Vec::new();
    let mut next = Some(status_url.clone());
    while let Some(u) = next {
        let (_, v) = get_json(&u).await;
        urls.extend(
            v["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["metadata"]["sourceURL"].as_str().unwrap().to_string()),
        );
        next = v["next"].as_str().map(str::to_string);
    }
    let n = urls.len();
    urls.sort();
    urls.dedup();
    assert_eq!((n, urls.len()), (30, 30), "each page once across the kill");
    server.start_kill().unwrap();
    let _ = server.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_key_has_its_own_limits() {
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut a = args(dir.path(), &["k1", "k2"]);
    a.max_requests_per_key = 1;
    a.max_jobs_per_key = 1;
    let api = Api::start(a).await;
    let slow_scrape = |key: &'static str| {
        let url = format!("{}/v2/scrape", api.base);
        let body = json!({"url": site.url("/slow/1")}).to_string();
        async move { post_json(&url, Some(key), body).await }
    };
    let first = tokio::spawn(slow_scrape("k1"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (code, v) = slow_scrape("k1").await;
    assert_eq!(
        (code, &v["code"]),
        (429, &json!("RATE_LIMIT_EXCEEDED")),
        "{v}"
    );
    // Another key is not held back by the first.
    let (code, _) = slow_scrape("k2").await;
    assert_eq!(code, 200);
    assert_eq!(first.await.unwrap().0, 200);
    let crawl = format!("{}/v2/crawl", api.base);
    let body = json!({"url": site.url("/slow/0"), "limit": 20, "sitemap": "skip"}).to_string();
    let (code, v) = post_json(&crawl, Some("k1"), body.clone()).await;
    assert_eq!(code, 200, "{v}");
    let (code, _) = post_json(&crawl, Some("k1"), body.clone()).await;
    assert_eq!(code, 429);
    // A job is its key's: another key does not see it.
    let other = reqwest::Client::new()
        .get(format!("{crawl}/{}", v["id"].as_str().unwrap()))
        .bearer_auth("k2")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn loopback_is_refused_unless_allowed_and_map_matches_the_cli() {
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut a = args(dir.path(), &[]);
    a.settings.crawl.allow_private = false;
    let strict = Api::start(a).await;
    let (code, v) = post_json(
        &format!("{}/v2/scrape", strict.base),
        None,
        json!({"url": site.url("/")}).to_string(),
    )
    .await;
    assert_eq!(
        (code, &v["code"]),
        (403, &json!("ADDRESS_NOT_ALLOWED")),
        "{v}"
    );
    strict.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(args(dir.path(), &[])).await;
    let (code, v) = post_json(
        &format!("{}/v2/map", api.base),
        None,
        json!({"url": site.url("/")}).to_string(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let mut from_api: Vec<String> = v["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["url"].as_str().unwrap().to_string())
        .collect();
    api.stop().await;
    let trawl = support::bin("trawl").expect("the trawl binary is built with the tests");
    let out = tokio::process::Command::new(trawl)
        .args(["map", &site.url("/"), "--allow-private", "--delay", "0"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut from_cli: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    from_api.sort();
    from_cli.sort();
    assert_eq!(from_api, from_cli);
    assert!(
        from_cli.contains(&site.url("/only-in-sitemap")),
        "{from_cli:?}"
    );
    assert!(
        !from_cli.iter().any(|u| u.contains("/private/")),
        "{from_cli:?}"
    );
}

/// `/v2/scrape` of a PDF, a DOCX and a Markdown file answers their Markdown, title and
/// metadata as a crawl reads them (the same reader); a broken PDF says why it has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_scraped_to_markdown() {
    let site = trawl_testsite::TestSite::start(trawl_testsite::SiteConfig {
        robots: trawl_testsite::Robots::Status(404),
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(args(dir.path(), &[])).await;
    let scrape = |path: &str| {
        let (url, body) = (
            format!("{}/v2/scrape", api.base),
            json!({"url": site.url(path), "formats": ["markdown"]}).to_string(),
        );
        async move { post_json(&url, None, body).await }
    };
    let (code, v) = scrape("/docs/guide.pdf").await;
    assert_eq!(code, 200, "{v}");
    let d = &v["data"];
    assert!(
        d["markdown"].as_str().unwrap().contains("The marmot digs"),
        "{d}"
    );
    assert_eq!(
        d["metadata"]["title"], "A guide to burrowing animals",
        "{d}"
    );
    assert_eq!(d["metadata"]["numPages"], 2, "{d}");
    let (code, v) = scrape("/docs/report.docx").await;
    assert_eq!(code, 200, "{v}");
    let md = v["data"]["markdown"].as_str().unwrap();
    assert!(
        md.contains("# The ocelot") && md.contains("| Cat | Weight |"),
        "{md}"
    );
    let (_, v) = scrape("/docs/README.md").await;
    assert!(
        v["data"]["markdown"]
            .as_str()
            .unwrap()
            .starts_with("# Marsupials"),
        "{v}"
    );
    let (code, v) = scrape("/docs/broken.pdf").await;
    assert_eq!(code, 200, "{v}");
    assert!(
        v["data"]["metadata"]["documentError"]
            .as_str()
            .unwrap()
            .contains("unreadable"),
        "{v}"
    );
    api.stop().await;
}

/// Jobs on the cluster: the four stage services as processes, `trawl serve --cluster` in
/// front; two crawls with different settings and a batch, one after another on the one
/// crawl id the services serve (each clears the last and its spec is taken up by every
/// stage before its seeds go out).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_run_on_the_cluster_one_after_another() {
    let Some(paths) = support::services::service_bins() else {
        return;
    };
    // A stage restarted under the next spec leaves the messages it had pulled to be
    // delivered again after the ack wait (the default is 2 minutes).
    let stack = support::services::Stack::start(
        &paths,
        &[("TRAWL_ACK_WAIT_S", "5"), ("TRAWL_CLAIM_TTL_S", "5")],
    );
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut a = args(dir.path(), &[]);
    a.cluster = true;
    a.settings.cluster.ack_wait_s = 5;
    a.settings.cluster.claim_ttl_s = 5;
    a.cluster_crawl = stack.crawl.clone();
    a.settings.cluster.queue_prefix = stack.prefix.clone();
    let api = Api::start(a).await;
    let crawl = format!("{}/v2/crawl", api.base);
    let first = post_json(
        &crawl,
        None,
        json!({"url": site.url("/"), "limit": 4, "sitemap": "skip"}).to_string(),
    )
    .await;
    // Queued behind the first: the services serve one crawl at a time.
    let second = post_json(
        &crawl,
        None,
        json!({"url": site.url("/"), "includePaths": ["^/blog/"], "sitemap": "skip",
               "scrapeOptions": {"formats": ["markdown", "links"]}})
        .to_string(),
    )
    .await;
    let batch = post_json(
        &format!("{}/v2/batch/scrape", api.base),
        None,
        json!({"urls": [site.url("/a"), site.url("/b"), site.url("/c")]}).to_string(),
    )
    .await;
    for (code, v) in [&first, &second, &batch] {
        assert_eq!(*code, 200, "{v}");
    }
    let urls = |v: &Value| -> Vec<String> {
        let mut u: Vec<String> = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["metadata"]["sourceURL"].as_str().unwrap().to_string())
            .collect();
        u.sort();
        u
    };
    let done = wait_done(first.1["url"].as_str().unwrap(), 180).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        (done["completed"].as_u64(), done["total"].as_u64()),
        (Some(4), Some(4)),
        "{done}"
    );
    assert_eq!(urls(&done).len(), 4, "{done}");
    assert!(urls(&done).contains(&site.url("/")));
    // The second crawl starts from nothing (the first's seen-set is gone: / again) under
    // its own settings (only the blog is followed, links kept).
    let done = wait_done(second.1["url"].as_str().unwrap(), 180).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        urls(&done),
        vec![
            site.url("/"),
            site.url("/blog/post-1"),
            site.url("/blog/post-2")
        ],
        "{done}"
    );
    assert!(done["data"][0]["links"].is_array(), "{done}");
    let done = wait_done(batch.1["url"].as_str().unwrap(), 180).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        urls(&done),
        vec![site.url("/a"), site.url("/b"), site.url("/c")],
        "{done}"
    );

    // A cancel admits nothing more; what is queued drains, and the next job runs.
    let (_, slow) = post_json(
        &crawl,
        None,
        json!({"url": site.url("/slow/0"), "limit": 60, "sitemap": "skip"}).to_string(),
    )
    .await;
    let slow_url = slow["url"].as_str().unwrap().to_string();
    loop {
        let (_, v) = get_json(&slow_url).await;
        if v["completed"].as_u64().unwrap_or(0) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cancel = reqwest::Client::new()
        .delete(&slow_url)
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 200);
    let (_, after) = post_json(
        &crawl,
        None,
        json!({"url": site.url("/"), "limit": 2, "sitemap": "skip"}).to_string(),
    )
    .await;
    let done = wait_done(after["url"].as_str().unwrap(), 180).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(urls(&done).len(), 2, "{done}");
    let (_, cancelled) = get_json(&slow_url).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let got = cancelled["completed"].as_u64().unwrap();
    assert!(
        (2..60).contains(&got),
        "{got} pages of a crawl cancelled after 2"
    );
    api.stop().await;
    stack.stop().await;
}
