//! The images and the compose stack, started for real: `docker-compose.yml` with
//! `deploy/compose/host-network.yml` (every address on loopback) runs the trawl image's
//! services over NATS and Redis containers; a crawl of a loopback site submitted from the
//! host writes every page the embedded crawler writes and indexes them with the model
//! baked into the indexer image, a fetcher killed, an indexer stopped, and NATS and Redis
//! killed and started again mid-crawl lose nothing, the API container (`trawl serve`) answers a scrape of the site, `stop` drains
//! every service (exit 0), and every trawl container runs as uid
//! 10001 on a read-only root filesystem. Needs a Docker engine (`scripts/docker.sh`, which
//! the test command runs); skipped with the reason otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::options;
use support::services::submit_wait;
use trawl_testsite::{Robots, SiteConfig, TestSite};

const PROJECT: &str = "trawltest";
const SERVICES: [&str; 8] = [
    "ingester",
    "frontier",
    "fetcher",
    "extractor",
    "renderer",
    "indexer",
    "notifier",
    "refiner",
];
/// Each service's metrics port in host-network.yml, in the order of [`SERVICES`].
const PORTS: [u16; 8] = [19108, 19101, 19102, 19103, 19106, 19104, 19105, 19107];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Whether an engine answers; without one the test is skipped, or fails where the test
/// command promised one (`TRAWL_REQUIRE_DOCKER=1`).
fn docker_ready() -> bool {
    let up = Command::new("docker")
        .arg("info")
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new("docker-compose")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !up {
        if std::env::var("TRAWL_REQUIRE_DOCKER").is_ok_and(|v| v == "1") {
            panic!("no Docker engine or docker-compose (scripts/docker.sh sets them up)");
        }
        eprintln!("SKIPPED: no Docker engine or docker-compose (scripts/docker.sh sets them up)");
    }
    up
}

fn model_dir() -> PathBuf {
    if let Ok(d) = std::env::var("TRAWL_MODEL_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"));
    cache.join("trawl/models/all-MiniLM-L6-v2")
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The stack of one test; taken down (volumes too) when dropped.
struct Stack {
    data: PathBuf,
    crawl: String,
}

impl Stack {
    fn compose(&self, args: &[&str]) -> Output {
        let root = root();
        Command::new("docker-compose")
            .current_dir(&root)
            .args(["-p", PROJECT, "-f", "docker-compose.yml"])
            .args(["-f", "deploy/compose/host-network.yml"])
            .args(args)
            .env("TRAWL_DATA_DIR", &self.data)
            // The ingester's archives: a directory of the test's, not one in the checkout.
            .env("TRAWL_ARCHIVES_DIR", &self.data)
            .env("TRAWL_CRAWL", &self.crawl)
            // The API container scrapes the loopback test site.
            .env("TRAWL_API_ALLOW_PRIVATE", "true")
            .output()
            .unwrap()
    }

    fn container(service: &str) -> String {
        format!("{PROJECT}_{service}_1")
    }

    fn inspect(service: &str, format: &str) -> String {
        ok(
            Command::new("docker")
                .args(["inspect", "-f", format, &Self::container(service)])
                .output()
                .unwrap(),
            "docker inspect",
        )
    }

    fn docker(args: &[&str]) -> String {
        ok(
            Command::new("docker").args(args).output().unwrap(),
            "docker",
        )
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.compose(&["down", "-v", "-t", "5"]);
    }
}

/// Every record the indexers wrote (the lines of each `pages-*.jsonl`), by URL.
fn records(dir: &Path) -> (BTreeMap<String, serde_json::Value>, usize) {
    let mut out = BTreeMap::new();
    let mut lines = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("pages-") && name.ends_with(".jsonl") {
            for l in std::fs::read_to_string(&p).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                lines += 1;
                out.insert(v["url"].as_str().unwrap().to_string(), v);
            }
        }
    }
    (out, lines)
}

async fn canonical_urls(index: &Path) -> std::collections::BTreeSet<String> {
    let store = trawl_index::store::Store::open_existing(&index.display().to_string())
        .await
        .unwrap();
    trawl_index::store::string_column(store.chunks(), "canonical_url")
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Waits until every service answers `/healthz` on its port, then until Docker calls each
/// one healthy; returns both times since `since`.
async fn wait_started(since: Instant) -> (Duration, Duration) {
    let http = reqwest::Client::new();
    let deadline = since + Duration::from_secs(120);
    let mut answering = None;
    loop {
        assert!(Instant::now() < deadline, "the services did not start");
        if answering.is_none() {
            let mut all = true;
            for port in PORTS {
                let url = format!("http://127.0.0.1:{port}/healthz");
                all &= http
                    .get(url)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
            }
            if all {
                answering = Some(since.elapsed());
            }
        }
        let healthy = SERVICES
            .iter()
            .all(|s| Stack::inspect(s, "{{.State.Health.Status}}") == "healthy");
        if let (Some(a), true) = (answering, healthy) {
            return (a, since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_stack_crawls_what_the_embedded_crawler_crawls() {
    if !docker_ready() {
        return;
    }
    let trawl = support::bin("trawl").expect("the trawl binary (cargo test --workspace builds it)");
    let bins = trawl.parent().unwrap().to_path_buf();
    let model = model_dir();
    assert!(
        model.join("model.safetensors").exists(),
        "no model at {}",
        model.display()
    );
    let built = Instant::now();
    ok(
        Command::new(root().join("deploy/tests/build_images.sh"))
            .arg(&bins)
            .arg(&model)
            .output()
            .unwrap(),
        "building the images",
    );
    eprintln!("images built in {:.1} s", built.elapsed().as_secs_f64());
    for image in ["trawl:latest", "trawl:indexer", "trawl:renderer"] {
        let size = Stack::docker(&["image", "inspect", "-f", "{{.Size}}", image]);
        eprintln!("{image}: {} MB", size.parse::<u64>().unwrap() / 1_000_000);
    }

    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 30,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let seed = site.url("/page/1");
    // A page only a browser fills: the renderer container (Chromium inside) renders it as
    // the embedded crawl does.
    let app = site.url("/js/shell");
    let reference = tempfile::tempdir().unwrap();
    let mut o = options(&[seed.clone(), app.clone()], reference.path());
    o.index.no_index = false;
    o.index.settings.model_dir = Some(model.clone());
    trawl::crawl(o).await.unwrap();
    let expected = support::pages(reference.path());
    let expected_index = canonical_urls(&reference.path().join("index")).await;

    let data = tempfile::tempdir().unwrap();
    // The services run as uid 10001: the bind-mounted /data must be theirs to write.
    Command::new("chmod")
        .args(["0777", data.path().to_str().unwrap()])
        .status()
        .unwrap();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let stack = Stack {
        data: data.path().to_path_buf(),
        crawl: format!("ct{}", &tag[..10]),
    };
    let _ = stack.compose(&["down", "-v", "-t", "5"]);
    let started = Instant::now();
    let mut up = vec!["up", "-d", "--no-build", "nats", "redis", "api-host"];
    up.extend(SERVICES);
    ok(stack.compose(&up), "docker-compose up");
    let (answering, healthy) = wait_started(started).await;
    eprintln!(
        "stack up: every service answering /healthz after {:.1} s, healthy by Docker's check after {:.1} s",
        answering.as_secs_f64(),
        healthy.as_secs_f64()
    );

    let waiter = submit_wait(
        &trawl,
        &[&seed, &app, "--allow-private", "--delay", "150", "--refine"],
        &[
            ("TRAWL_CRAWL", &stack.crawl),
            ("TRAWL_NATS_URL", "nats://127.0.0.1:14222"),
            ("TRAWL_REDIS_URL", "redis://127.0.0.1:16379"),
        ],
    );
    // Mid-crawl: the fetcher killed (SIGKILL) and started again, then the indexer stopped
    // (SIGTERM: it drains and exits 0) and started again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_kill = records(data.path()).0.len();
    assert!(
        before_kill < expected.len(),
        "the crawl was still running at the kill"
    );
    Stack::docker(&["kill", &Stack::container("fetcher")]);
    Stack::docker(&["start", &Stack::container("fetcher")]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ok(
        stack.compose(&["stop", "-t", "60", "indexer"]),
        "stopping the indexer",
    );
    assert_eq!(Stack::inspect("indexer", "{{.State.ExitCode}}"), "0");
    ok(stack.compose(&["start", "indexer"]), "starting the indexer");
    // Then the backends, killed (SIGKILL) and started again on their volumes: the stages
    // ride through both with the default ack wait, claim lease and lifetime.
    for backend in ["nats", "redis"] {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        Stack::docker(&["kill", &Stack::container(backend)]);
        Stack::docker(&["start", &Stack::container(backend)]);
    }
    let report = waiter.await.unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(report["dead_letters"], 0, "{report}");

    // Every page of the embedded crawl, with the same status and text.
    let (got, lines) = records(data.path());
    assert_eq!(got.len(), expected.len(), "{:?}", got.keys());
    for e in &expected {
        let url = e["url"].as_str().unwrap();
        let g = got.get(url).unwrap_or_else(|| panic!("{url} is missing"));
        assert_eq!(g["status"], e["status"], "{url}");
        assert_eq!(g["text"], e["text"], "{url}");
    }
    eprintln!(
        "{} pages, {} lines ({} written again after the kill)",
        got.len(),
        lines,
        lines - got.len()
    );
    // Refined by the refiner container (the model-free engine): every kept HTML page has
    // a row (at least once: a redelivery may write one twice).
    let mut refined = std::collections::BTreeSet::new();
    for f in std::fs::read_dir(data.path()).unwrap() {
        let p = f.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("refined-") && name.ends_with(".jsonl") {
            for l in std::fs::read_to_string(&p).unwrap().lines() {
                let row: serde_json::Value = serde_json::from_str(l).unwrap();
                refined.insert(row["url"].as_str().unwrap().to_string());
            }
        }
    }
    let kept: Vec<&str> = got
        .values()
        .filter(|e| {
            // The cluster's own records: which copy of a page is kept is first come.
            e["status"] == 200
                && e["kind"] == "page"
                && e["duplicate_of"].is_null()
                && e["content_type"]
                    .as_str()
                    .is_some_and(|c| c.contains("html"))
        })
        .map(|e| e["final_url"].as_str().unwrap())
        .collect();
    assert!(!kept.is_empty());
    for url in &kept {
        assert!(refined.contains(*url), "{url} was not refined: {refined:?}");
    }
    // Indexed, embedded with the model baked into the indexer image.
    assert_eq!(
        canonical_urls(&data.path().join("index")).await,
        expected_index
    );

    // The API container (trawl serve) answers a scrape of the site.
    let http = reqwest::Client::new();
    let scraped: serde_json::Value = loop {
        let r = http
            .post("http://127.0.0.1:13002/v2/scrape")
            .header("content-type", "application/json")
            .body(serde_json::json!({"url": seed, "formats": ["markdown", "links"]}).to_string())
            .send()
            .await;
        if let Ok(r) = r {
            break serde_json::from_str(&r.text().await.unwrap()).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the api container never answered"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(scraped["success"], true, "{scraped}");
    assert_eq!(scraped["data"]["metadata"]["statusCode"], 200, "{scraped}");
    assert!(
        scraped["data"]["markdown"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{scraped}"
    );

    // Non-root on a read-only root filesystem, the process included.
    for s in SERVICES.iter().chain(&["api-host"]) {
        assert_eq!(
            Stack::inspect(s, "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}"),
            "10001:10001 true",
            "{s}"
        );
        assert_eq!(
            Stack::docker(&["exec", &Stack::container(s), "id", "-u"]),
            "10001"
        );
    }
    // A stop drains every service: each exits 0 on SIGTERM.
    ok(stack.compose(&["stop", "-t", "60"]), "docker-compose stop");
    for s in SERVICES.iter().chain(&["api-host"]) {
        assert_eq!(
            Stack::inspect(s, "{{.State.ExitCode}}"),
            "0",
            "{s} after SIGTERM"
        );
    }
    let (after, _) = records(data.path());
    assert_eq!(after.len(), got.len(), "nothing lost in the stop");
}
