//! The formats that need a model or a browser: `json`, `summary`, `/v2/extract` against
//! llama.cpp's server (llama-cpp-python, the SmolLM2 GGUF the test command installs), and
//! `waitFor`, `actions`, `mobile` and screenshots in the system Chromium, driven by the
//! real `firecrawl-py` (tests/py/firecrawl_formats.py); the screenshots decoded here; the
//! new request bodies mutated; and the clear errors of a server with neither.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::api_site::Fixture;
use trawl_core::settings::LlmSettings;

use super::{Api, answers_hostile_body, args, post_json};

struct Llama(Child);

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// llama.cpp's server on a free port, or `None` (a skip, said why; a failure under
/// `TRAWL_REQUIRE_PY=1`) when it or the model is not installed.
fn llama() -> Option<(Llama, u16)> {
    let python = std::env::var("TRAWL_LLAMA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join(".venv-llama/bin/python3"));
    let gguf = std::env::var("TRAWL_TEST_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/trawl/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    if !python.exists() || !gguf.exists() {
        assert!(
            std::env::var("TRAWL_REQUIRE_PY").is_err(),
            "llama-cpp-python (.venv-llama) or the SmolLM2 GGUF is missing; the test command installs both"
        );
        eprintln!("SKIPPED: no .venv-llama with llama-cpp-python, or no SmolLM2 GGUF");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let child = Command::new(&python)
        .args(["-m", "llama_cpp.server", "--host", "127.0.0.1"])
        .args(["--n_ctx", "2048", "--n_threads", "1", "--port"])
        .arg(port.to_string())
        .arg("--model")
        .arg(&gguf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start llama_cpp.server");
    let server = Llama(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((server, port));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("llama_cpp.server did not listen on {port}");
}

fn chromium() -> bool {
    let found = trawl_renderer::find_chromium(None).is_some();
    if !found {
        assert!(
            std::env::var("TRAWL_REQUIRE_CHROMIUM").is_err(),
            "Chromium is required (TRAWL_REQUIRE_CHROMIUM=1); the test command installs it"
        );
        eprintln!("SKIPPED: no Chromium (install chromium-headless-shell)");
    }
    found
}

fn llm(port: u16) -> LlmSettings {
    LlmSettings {
        llm_endpoint: Some(format!("http://127.0.0.1:{port}/v1")),
        llm_model: "smollm2".into(),
        llm_context_tokens: 2048,
        llm_max_tokens: 200,
        llm_timeout_s: 120,
        ..LlmSettings::default()
    }
}

/// A PNG fetched and decoded: its width, height and the colour of its top-left pixel.
async fn png_size(url: &str) -> (u32, u32, [u8; 3]) {
    let bytes = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes.to_vec()));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("its pixels decode");
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    (info.width, info.height, [buf[0], buf[1], buf[2]])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn model_and_browser_formats_through_the_sdk_and_mutated_bodies() {
    if !support::python_has("firecrawl") || !chromium() {
        return;
    }
    let Some((_llama, port)) = llama() else {
        return;
    };
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = args(dir.path(), &["fc-test"]);
    cfg.settings.llm = llm(port);
    let api = Api::start(cfg).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/firecrawl_formats.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .env("FIRECRAWL_API_URL", &api.base)
        .env("FIRECRAWL_API_KEY", "fc-test")
        .env("SITE", site.url(""))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the SDK checks failed:\n{stdout}");
    assert!(stdout.contains("all passed"), "{stdout}");
    // The full-page screenshot decodes at the page's own size; the phone's is a phone's
    // width.
    let shot: Vec<&str> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SHOT "))
        .expect("a SHOT line")
        .split(' ')
        .collect();
    let (w, h, rgb) = png_size(shot[0]).await;
    let (pw, ph): (u32, u32) = (shot[1].parse().unwrap(), shot[2].parse().unwrap());
    assert_eq!((w, h), (pw, ph), "the PNG is the page's size");
    assert!(h > 3000, "{h}");
    // A picture of the page has its styles: the stylesheet's background.
    assert_eq!(rgb, [10, 200, 30], "the page's stylesheet was applied");
    let mobile = stdout
        .lines()
        .find_map(|l| l.strip_prefix("MOBILE "))
        .expect("a MOBILE line");
    let (w, h, _) = png_size(mobile).await;
    assert_eq!((w, h), (390, 844));
    mutated_bodies(&api.base, &site).await;
    // An extract's answer outlives a restart of the server.
    let (code, started) = post_json(
        &format!("{}/v2/extract", api.base),
        Some("fc-test"),
        json!({"urls": [site.url("/product")], "prompt": "The product's name.",
            "schema": {"type": "object", "properties": {"name": {"type": "string"}},
                "required": ["name"]}})
        .to_string(),
    )
    .await;
    assert_eq!(code, 200, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    let answer = extract_done(&api.base, &id).await;
    assert_eq!(answer["status"], "completed", "{answer}");
    assert!(answer["data"]["name"].is_string(), "{answer}");
    assert!(
        browsers() > 0,
        "the server's browser is this process's child"
    );
    api.stop().await;
    // No browser left behind once the server stopped.
    let deadline = Instant::now() + Duration::from_secs(10);
    while browsers() > 0 {
        assert!(Instant::now() < deadline, "a Chromium outlived the server");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut cfg = args(dir.path(), &["fc-test"]);
    cfg.settings.llm = llm(port);
    let again = Api::start(cfg).await;
    assert_eq!(extract_done(&again.base, &id).await, answer);
    again.stop().await;
}

/// An extract's status once it is no longer processing.
async fn extract_done(base: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v: Value = reqwest::Client::new()
            .get(format!("{base}/v2/extract/{id}"))
            .bearer_auth("fc-test")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v["status"] != "processing" {
            return v;
        }
        assert!(Instant::now() < deadline, "still processing: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Chromium processes this test process started (the server's browser is its child).
fn browsers() -> usize {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let Some((name, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            // `pid (comm) state ppid ...`; an exited child not yet reaped is a zombie.
            let mut f = rest.split_whitespace();
            let (state, ppid) = (f.next(), f.next());
            name.contains("chrom") && ppid == Some(me.as_str()) && state != Some("Z")
        })
        .count()
}

/// Every mutation of the new request bodies gets an answer in JSON, and none a 5xx but a
/// page the site or the browser failed on.
async fn mutated_bodies(base: &str, site: &Fixture) {
    let seeds = [
        json!({"url": site.url("/product"), "formats": ["summary", {"type": "json",
            "schema": {"type": "object", "properties": {"name": {"type": "string"}}}, "prompt": "name"}]}),
        json!({"url": site.url("/reveal"), "waitFor": 50, "mobile": true,
            "formats": ["markdown", {"type": "screenshot", "fullPage": true, "quality": 50,
                "viewport": {"width": 800, "height": 600}}],
            "actions": [{"type": "click", "selector": "#more", "all": true},
                {"type": "wait", "selector": "#extra p"}, {"type": "write", "text": "hi"},
                {"type": "press", "key": "Enter"}, {"type": "scroll", "direction": "down"},
                {"type": "executeJavascript", "script": "1 + 1"}, {"type": "pdf", "format": "A4"}]}),
        json!({"urls": [site.url("/product")], "prompt": "the price",
            "schema": {"type": "object", "properties": {"price": {"type": "number"}}}}),
    ];
    let seed_bytes: Vec<Vec<u8>> = seeds.iter().map(|s| s.to_string().into_bytes()).collect();
    let refs: Vec<&[u8]> = seed_bytes.iter().map(|s| s.as_slice()).collect();
    let mut bodies = Vec::new();
    let per_seed = 25;
    trawl_core::mutate::each_mutation(&refs, per_seed, |m| bodies.push(m.to_vec()));
    for (i, b) in bodies.into_iter().enumerate() {
        // Each seed's mutations go to its endpoint; every fourth to the other one.
        let extract = (i / (per_seed + 1) == 2) != (i % 4 == 3);
        let path = if extract { "/v2/extract" } else { "/v2/scrape" };
        answers_hostile_body(&format!("{base}{path}"), "fc-test", i, b).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_or_a_browser_the_formats_say_what_to_configure() {
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = args(dir.path(), &[]);
    cfg.settings.crawl.render = trawl_core::render::RenderMode::Never;
    let api = Api::start(cfg).await;
    let scrape = format!("{}/v2/scrape", api.base);
    for (body, code) in [
        (
            json!({"url": site.url("/product"), "formats": ["summary"]}),
            "LLM_NOT_CONFIGURED",
        ),
        (
            json!({"url": site.url("/product"), "formats": [{"type": "json", "prompt": "x"}]}),
            "LLM_NOT_CONFIGURED",
        ),
        (
            json!({"url": site.url("/product"), "formats": ["screenshot"]}),
            "BROWSER_UNAVAILABLE",
        ),
        (
            json!({"url": site.url("/product"), "actions": [{"type": "scrape"}]}),
            "BROWSER_UNAVAILABLE",
        ),
    ] {
        let (status, v) = post_json(&scrape, None, body.to_string()).await;
        assert_eq!((status, v["code"].as_str()), (400, Some(code)), "{v}");
        assert!(v["error"].as_str().unwrap().contains("set") || code.starts_with("BROWSER"));
    }
    let (status, v) = post_json(
        &format!("{}/v2/extract", api.base),
        None,
        json!({"urls": [site.url("/product")], "prompt": "x"}).to_string(),
    )
    .await;
    assert_eq!(
        (status, v["code"].as_str()),
        (400, Some("LLM_NOT_CONFIGURED")),
        "{v}"
    );
    // A JS-only page without a browser: its fetched version, and a warning saying so.
    let (status, v) = post_json(&scrape, None, json!({"url": site.url("/app")}).to_string()).await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["data"]["warning"]
            .as_str()
            .is_some_and(|w| w.contains("JavaScript")),
        "{v}"
    );
    // Bad actions are refused before any page is fetched, each naming what is wrong.
    for (actions, says) in [
        (json!([{"type": "fly"}]), "fly"),
        (json!([{"type": "wait"}]), "milliseconds"),
        (json!([{"type": "click", "selector": "div["}]), "selector"),
        (
            json!([{"type": "scroll", "direction": "sideways"}]),
            "sideways",
        ),
        (json!([{"type": "wait", "milliseconds": 120000}]), "60000"),
    ] {
        let body = json!({"url": site.url("/product"), "actions": actions});
        let (status, v) = post_json(&scrape, None, body.to_string()).await;
        assert_eq!(status, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains(says), "{says}: {v}");
    }
    api.stop().await;
}
