//! An HTTP test site on loopback for trawl's tests and benchmarks.
//!
//! It serves scenario routes (redirect chains and loops, robots.txt variants, gzip sitemaps,
//! feeds, spider traps, 429 with Retry-After, slow, huge and gzip-bomb bodies, legacy
//! charsets, binary content, pages with robots directives and AI-usage signals, documents
//! that are not HTML) and, optionally, a directory. Every request is logged with its start
//! and end time so tests can check politeness from the server's side.
//!
//! [`web`] is the other site: a synthetic web of millions of pages over many loopback
//! hosts, for scale tests and benchmarks.

mod changing;
pub mod docs;
pub mod js;
pub mod policy;
mod scenarios;
pub mod web;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::serve::ListenerExt;
use serde::{Deserialize, Serialize};

/// What `/robots.txt` answers.
#[derive(Debug, Clone)]
pub enum Robots {
    /// 200 with this body; `{origin}` is replaced by `http://127.0.0.1:PORT`.
    Body(String),
    /// This status with an empty body.
    Status(u16),
    /// Not routed: served from the directory (or 404).
    FromDir,
    /// `status` to the first `times` requests, then 200 with `then` (a robots.txt blip).
    FailFirst {
        status: u16,
        times: u32,
        then: String,
    },
}

impl Default for Robots {
    fn default() -> Self {
        Robots::Body(
            "User-agent: *\nDisallow: /private/\nSitemap: {origin}/sitemap.xml\n".to_string(),
        )
    }
}

#[derive(Debug, Clone)]
pub struct SiteConfig {
    pub robots: Robots,
    /// Serve this directory for paths no scenario claims.
    pub dir: Option<PathBuf>,
    /// Number of `/page/N` pages in the chain.
    pub pages: u32,
    /// Size of `/huge`.
    pub huge_bytes: usize,
    /// Inflated size of `/bomb`.
    pub bomb_bytes: usize,
    /// Decoded size of each `/farm/N` page (a hostile host: gzip pages that inflate to
    /// this, each with `farm_links` links).
    pub farm_bytes: usize,
    pub farm_links: usize,
    /// Seconds `/slow` waits before answering.
    pub slow_secs: u64,
    /// Append every log entry as a JSON line to this file.
    pub log_file: Option<PathBuf>,
    /// `/.well-known/tdmrep.json`'s body (`{origin}` replaced); 404 when `None`.
    pub tdmrep: Option<String>,
}

impl Default for SiteConfig {
    fn default() -> Self {
        Self {
            robots: Robots::default(),
            dir: None,
            pages: 5,
            huge_bytes: 30 * 1024 * 1024,
            bomb_bytes: 200 * 1024 * 1024,
            farm_bytes: 48 * 1024 * 1024,
            farm_links: 60_000,
            slow_secs: 5,
            log_file: None,
            tdmrep: None,
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LogEntry {
    pub method: String,
    /// Path and query.
    pub target: String,
    pub status: u16,
    /// The Host header: tells `localhost` from `127.0.0.1` requests.
    pub host: String,
    pub user_agent: String,
    /// The request's validators, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_none_match: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_modified_since: Option<String>,
    /// Microseconds since the Unix epoch when the request arrived.
    pub start_us: u64,
    /// Microseconds since the Unix epoch when the response was handed to the connection.
    pub end_us: u64,
}

#[derive(Clone)]
pub(crate) struct Shared {
    pub cfg: Arc<SiteConfig>,
    pub origin: String,
    pub log: Arc<Mutex<Vec<LogEntry>>>,
    pub log_file: Option<Arc<Mutex<std::fs::File>>>,
    pub hits: Arc<Mutex<std::collections::HashMap<String, u32>>>,
    pub bomb: Arc<std::sync::OnceLock<bytes::Bytes>>,
    pub farm: Arc<std::sync::OnceLock<bytes::Bytes>>,
    pub changing: Arc<Mutex<changing::Pages>>,
    /// robots.txt requests answered so far.
    pub robots_served: Arc<std::sync::atomic::AtomicU32>,
}

/// A running test site; it stops when dropped.
pub struct TestSite {
    pub addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn header(h: &axum::http::HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn record(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let start_us = now_us();
    let method = req.method().to_string();
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let user_agent = req
        .headers()
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let host = header(req.headers(), "host").unwrap_or_default();
    let if_none_match = header(req.headers(), "if-none-match");
    let if_modified_since = header(req.headers(), "if-modified-since");
    let resp = next.run(req).await;
    let entry = LogEntry {
        method,
        target,
        status: resp.status().as_u16(),
        host,
        user_agent,
        if_none_match,
        if_modified_since,
        start_us,
        end_us: now_us(),
    };
    if let Some(f) = &s.log_file {
        use std::io::Write;
        if let Ok(line) = serde_json::to_string(&entry) {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "{line}");
        }
    }
    s.log.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
    resp
}

impl TestSite {
    /// Starts the site on `127.0.0.1:port` (0 picks a free port).
    pub async fn start_on(cfg: SiteConfig, port: u16) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let log_file = match &cfg.log_file {
            Some(p) => Some(Arc::new(Mutex::new(std::fs::File::create(p)?))),
            None => None,
        };
        let shared = Shared {
            cfg: Arc::new(cfg),
            origin: format!("http://{addr}"),
            log: Arc::default(),
            log_file,
            hits: Arc::default(),
            bomb: Arc::default(),
            farm: Arc::default(),
            changing: Arc::default(),
            robots_served: Arc::default(),
        };
        let app: Router = scenarios::router(shared.clone())
            .layer(middleware::from_fn_with_state(shared.clone(), record));
        // Without TCP_NODELAY, a response written as headers then body waits for the
        // client's delayed ACK (40 ms on Linux) on every keep-alive request.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared, task })
    }

    pub async fn start(cfg: SiteConfig) -> anyhow::Result<Self> {
        Self::start_on(cfg, 0).await
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.shared.origin, path)
    }

    pub fn origin(&self) -> &str {
        &self.shared.origin
    }

    /// Every request so far, in arrival order.
    pub fn log(&self) -> Vec<LogEntry> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets (or with `None` removes) the page at `/changing/{name}`; `validators` decides
    /// whether it is served with `ETag` and `Last-Modified` (and 304s).
    pub fn set_page(&self, name: &str, body: Option<&str>, validators: bool) {
        self.shared
            .changing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set(name, body.map(str::to_string), validators);
    }

    /// Requests to paths starting with `prefix`.
    /// Requests a counting scenario has started (`slow`, `retry/NAME`, ...), answered or
    /// not: the access log has a request only once it is answered.
    pub fn started(&self, key: &str) -> u32 {
        let hits = self.shared.hits.lock().unwrap_or_else(|e| e.into_inner());
        hits.get(key).copied().unwrap_or(0)
    }

    pub fn hits(&self, prefix: &str) -> Vec<LogEntry> {
        self.log()
            .into_iter()
            .filter(|e| e.target.starts_with(prefix))
            .collect()
    }
}

impl Drop for TestSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}
