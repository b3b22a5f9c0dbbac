//! A synthetic web for scale tests: millions of distinct, deterministic pages over many
//! hosts, each host on its own loopback address (127.0.0.0/8 is all loopback), so a
//! crawler's per-host queues and politeness are real.
//!
//! Host `h` serves pages `/p/0` to `/p/{per_host - 1}` (`/` redirects to `/p/0`). Page `n` links to
//! its children in an 8-ary tree (`8n+1` to `8n+8`, so every page is reachable from its
//! host's root), to a dozen other pages of its host and to three pages of other hosts,
//! with a made-up vocabulary of Zipf-distributed words for text (about 2.5 KB a page).
//! Mixed in, all deterministic in the page number:
//! - near-duplicate families: every 20th page is its predecessor's text with one line
//!   changed;
//! - redirect chains (`/r/{n}/{k}`: k + 1 hops to `/p/{n}`) from every 10th page, and a
//!   redirect loop (`/loop/{n}/a` <-> `/b`) from every 100th;
//! - links robots.txt disallows (`/private/`) from every 50th page, and a broken link (404)
//!   from every 20th;
//! - a query trap, `/search?page=N` linking to `?page=N+1` without end, from every 200th;
//! - slow hosts (every `slow_every`-th host answers after `slow_ms`) and erroring hosts
//!   (every `error_every`-th host answers 500 to every 10th page).
//!
//! The server keeps what a test needs to judge a crawl without a request log: the most
//! requests one host had in flight at once, each page's fetches (a page fetched twice is
//! counted), and [`WebConfig::expected`] says how many pages a complete crawl fetches.

mod text;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::serve::ListenerExt;
use serde::Serialize;

use text::{Rng, Words};

/// The shape of a synthetic web.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// Pages in all (split evenly over the hosts).
    pub pages: u64,
    pub hosts: u32,
    /// The first host's address; host `h` is this address plus `h`.
    pub first_addr: Ipv4Addr,
    /// Every host's port (0: one picked for the first host, then used by all).
    pub port: u16,
    /// Every `slow_every`-th host (0: none) waits `slow_ms` before each answer.
    pub slow_every: u32,
    pub slow_ms: u64,
    /// Every `error_every`-th host (0: none) answers 500 to every 10th page.
    pub error_every: u32,
    /// Varies every page's text.
    pub seed: u64,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            pages: 100_000,
            hosts: 20,
            first_addr: Ipv4Addr::new(127, 1, 0, 1),
            port: 0,
            slow_every: 10,
            slow_ms: 3,
            error_every: 10,
            seed: 1,
        }
    }
}

/// What a complete, polite crawl of the web does, from its shape alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expected {
    /// Pages `/p/N` in all, each to be fetched once.
    pub pages: u64,
    /// Of those, the ones answered with 200.
    pub pages_ok: u64,
    /// Pages that are near-copies of the page before them.
    pub near_copies: u64,
}

impl WebConfig {
    pub fn per_host(&self) -> u64 {
        self.pages / u64::from(self.hosts.max(1))
    }

    fn is(every: u32, h: u32) -> bool {
        every > 0 && h % every == every - 1
    }

    pub fn slow(&self, h: u32) -> bool {
        Self::is(self.slow_every, h)
    }

    pub fn erroring(&self, h: u32) -> bool {
        Self::is(self.error_every, h)
    }

    fn fails(&self, h: u32, n: u64) -> bool {
        self.erroring(h) && n % 10 == 3
    }

    fn near_copy(n: u64) -> bool {
        n % 20 == 19
    }

    pub fn expected(&self) -> Expected {
        let per = self.per_host();
        let mut e = Expected {
            pages: per * u64::from(self.hosts),
            pages_ok: 0,
            near_copies: 0,
        };
        for h in 0..self.hosts {
            let failing = if self.erroring(h) {
                (0..per).filter(|n| n % 10 == 3).count() as u64
            } else {
                0
            };
            e.pages_ok += per - failing;
            e.near_copies += (0..per)
                .filter(|n| Self::near_copy(*n) && !self.fails(h, *n))
                .count() as u64;
        }
        e
    }
}

/// What the server saw, for a test or a benchmark to judge the crawl by.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct WebStats {
    pub requests: u64,
    /// Distinct pages `/p/N` requested.
    pub pages_fetched: u64,
    /// Requests for a page already requested before.
    pub pages_fetched_again: u64,
    /// The most requests any one host had in flight at the same time.
    pub max_in_flight_per_host: u32,
    pub robots_requests: u64,
    pub private_requests: u64,
    pub trap_requests: u64,
}

struct HostState {
    in_flight: AtomicU32,
    /// One bit per page: requested yet.
    fetched: Vec<AtomicU64>,
}

struct Inner {
    cfg: WebConfig,
    words: Words,
    hosts: Vec<HostState>,
    port: u16,
    requests: AtomicU64,
    pages_fetched: AtomicU64,
    pages_again: AtomicU64,
    max_in_flight: AtomicU32,
    robots: AtomicU64,
    private: AtomicU64,
    trap: AtomicU64,
}

/// A running synthetic web; it stops when dropped.
pub struct Web {
    inner: Arc<Inner>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Web {
    /// Binds every host's address and starts serving.
    pub async fn start(cfg: WebConfig) -> anyhow::Result<Self> {
        anyhow::ensure!(cfg.hosts > 0, "a web needs at least one host");
        let per = cfg.per_host();
        let mut listeners = Vec::with_capacity(cfg.hosts as usize);
        let mut port = cfg.port;
        for h in 0..cfg.hosts {
            let addr = host_addr(cfg.first_addr, h)?;
            let l = tokio::net::TcpListener::bind((addr, port)).await?;
            port = l.local_addr()?.port();
            listeners.push(l);
        }
        let hosts = (0..cfg.hosts)
            .map(|_| HostState {
                in_flight: AtomicU32::new(0),
                fetched: (0..per.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            })
            .collect();
        let inner = Arc::new(Inner {
            cfg,
            words: Words::new(4096),
            hosts,
            port,
            requests: AtomicU64::new(0),
            pages_fetched: AtomicU64::new(0),
            pages_again: AtomicU64::new(0),
            max_in_flight: AtomicU32::new(0),
            robots: AtomicU64::new(0),
            private: AtomicU64::new(0),
            trap: AtomicU64::new(0),
        });
        let mut tasks = Vec::new();
        for (h, l) in listeners.into_iter().enumerate() {
            let app = Router::new()
                .fallback(serve)
                .with_state((inner.clone(), h as u32));
            let l = l.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            tasks.push(tokio::spawn(async move {
                let _ = axum::serve(l, app).await;
            }));
        }
        Ok(Web { inner, tasks })
    }

    /// `http://ADDR:PORT/` of every host: the crawl's seeds.
    pub fn roots(&self) -> Vec<String> {
        (0..self.inner.cfg.hosts)
            .map(|h| format!("{}/", self.inner.origin(h)))
            .collect()
    }

    pub fn config(&self) -> &WebConfig {
        &self.inner.cfg
    }

    pub fn stats(&self) -> WebStats {
        self.inner.stats()
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn host_addr(first: Ipv4Addr, h: u32) -> anyhow::Result<Ipv4Addr> {
    let a = u32::from(first)
        .checked_add(h)
        .map(Ipv4Addr::from)
        .ok_or_else(|| anyhow::anyhow!("host {h} is past the address space"))?;
    anyhow::ensure!(a.is_loopback(), "host {h} ({a}) is outside 127.0.0.0/8");
    Ok(a)
}

impl Inner {
    fn origin(&self, h: u32) -> String {
        let addr = host_addr(self.cfg.first_addr, h).unwrap_or(Ipv4Addr::LOCALHOST);
        format!("http://{}", SocketAddr::from((addr, self.port)))
    }

    fn stats(&self) -> WebStats {
        WebStats {
            requests: self.requests.load(Ordering::Relaxed),
            pages_fetched: self.pages_fetched.load(Ordering::Relaxed),
            pages_fetched_again: self.pages_again.load(Ordering::Relaxed),
            max_in_flight_per_host: self.max_in_flight.load(Ordering::Relaxed),
            robots_requests: self.robots.load(Ordering::Relaxed),
            private_requests: self.private.load(Ordering::Relaxed),
            trap_requests: self.trap.load(Ordering::Relaxed),
        }
    }

    fn mark_fetched(&self, h: u32, n: u64) {
        let word = &self.hosts[h as usize].fetched[(n / 64) as usize];
        let bit = 1u64 << (n % 64);
        if word.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            self.pages_fetched.fetch_add(1, Ordering::Relaxed);
        } else {
            self.pages_again.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counts a request in flight on its host for as long as it lives.
struct InFlight<'a>(&'a AtomicU32);

impl<'a> InFlight<'a> {
    fn enter(inner: &'a Inner, h: u32) -> Self {
        let c = &inner.hosts[h as usize].in_flight;
        let now = c.fetch_add(1, Ordering::SeqCst) + 1;
        inner.max_in_flight.fetch_max(now, Ordering::Relaxed);
        InFlight(c)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(State((inner, h)): State<(Arc<Inner>, u32)>, req: Request) -> Response {
    inner.requests.fetch_add(1, Ordering::Relaxed);
    let _flight = InFlight::enter(&inner, h);
    if inner.cfg.slow(h) {
        tokio::time::sleep(Duration::from_millis(inner.cfg.slow_ms)).await;
    }
    let path = req.uri().path();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        // The root is an address of page 0, not a page of its own: every page once.
        [""] => Redirect::permanent("/p/0").into_response(),
        ["p", n] => match n.parse::<u64>() {
            Ok(n) if n < inner.cfg.per_host() => page_response(&inner, h, n),
            _ => StatusCode::NOT_FOUND.into_response(),
        },
        ["robots.txt"] => {
            inner.robots.fetch_add(1, Ordering::Relaxed);
            (
                [(header::CONTENT_TYPE, "text/plain")],
                "User-agent: *\nDisallow: /private/\n",
            )
                .into_response()
        }
        ["r", n, k] => match (n.parse::<u64>(), k.parse::<u32>()) {
            (Ok(n), Ok(0)) => Redirect::permanent(&format!("/p/{n}")).into_response(),
            (Ok(n), Ok(k)) => Redirect::permanent(&format!("/r/{n}/{}", k - 1)).into_response(),
            _ => StatusCode::NOT_FOUND.into_response(),
        },
        ["loop", n, side] => {
            let other = if *side == "a" { "b" } else { "a" };
            Redirect::temporary(&format!("/loop/{n}/{other}")).into_response()
        }
        ["search"] => {
            inner.trap.fetch_add(1, Ordering::Relaxed);
            let at: u64 = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("page="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            search_page(&inner, h, at)
        }
        ["private", ..] => {
            inner.private.fetch_add(1, Ordering::Relaxed);
            StatusCode::FORBIDDEN.into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

fn page_response(inner: &Inner, h: u32, n: u64) -> Response {
    inner.mark_fetched(h, n);
    if inner.cfg.fails(h, n) {
        return (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response();
    }
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        render_page(inner, h, n),
    )
        .into_response()
}

/// Page `n` of host `h`.
fn render_page(inner: &Inner, h: u32, n: u64) -> String {
    let cfg = &inner.cfg;
    let per = cfg.per_host();
    // A near-copy is its predecessor's text (title and all) with one line of its own.
    let text_of = if WebConfig::near_copy(n) { n - 1 } else { n };
    let mut rng = Rng::new(text::seed(&[cfg.seed, u64::from(h), text_of]));
    let w = &inner.words;
    let words = 3 + rng.below(4) as usize;
    let title = w.phrase(&mut rng, words);
    let mut body = String::with_capacity(3200);
    for s in 0..3 + rng.below(3) {
        if s > 0 {
            body.push_str("<h2>");
            let words = 2 + rng.below(3) as usize;
            body.push_str(&w.phrase(&mut rng, words));
            body.push_str("</h2>");
        }
        body.push_str("<p>");
        for _ in 0..3 + rng.below(4) {
            w.sentence(&mut rng, &mut body);
        }
        body.push_str("</p>");
    }
    if text_of != n {
        body.push_str(&format!("<p>Printed as page {n}.</p>"));
    }
    // Links come from the page's own number, so near-copies link elsewhere.
    let mut links = Vec::with_capacity(32);
    let mut lr = Rng::new(text::seed(&[cfg.seed, u64::from(h), n, 1]));
    for c in 8 * n + 1..=8 * n + 8 {
        if c < per {
            links.push(format!("/p/{c}"));
        }
    }
    for _ in 0..12 {
        links.push(format!("/p/{}", lr.below(per)));
    }
    for _ in 0..3 {
        let other = lr.below(u64::from(cfg.hosts)) as u32;
        links.push(format!("{}/p/{}", inner.origin(other), lr.below(per)));
    }
    if n % 10 == 1 {
        links.push(format!("/r/{}/{}", lr.below(per), 1 + n % 4));
    }
    if n % 100 == 2 {
        links.push(format!("/loop/{n}/a"));
    }
    if n % 50 == 4 {
        links.push(format!("/private/{n}"));
    }
    if n % 20 == 6 {
        links.push(format!("/p/{}", per + n));
    }
    if n % 200 == 8 {
        links.push("/search?page=1".to_string());
    }
    let mut nav = String::new();
    for l in &links {
        nav.push_str(&format!("<li><a href=\"{l}\">{}</a></li>", w.pick(&mut lr)));
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><header><a href=\"/\">Home</a></header><main><article><h1>{title}</h1>{body}\
         </article><aside><ul>{nav}</ul></aside></main><footer>Host {h}</footer></body></html>"
    )
}

fn search_page(inner: &Inner, h: u32, at: u64) -> Response {
    let mut rng = Rng::new(text::seed(&[inner.cfg.seed, u64::from(h), at, 2]));
    let mut p = String::new();
    inner.words.sentence(&mut rng, &mut p);
    let next = at + 1;
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        format!(
            "<!doctype html><html><head><title>Results {at}</title></head><body><main>\
             <p>{p}</p><a href=\"/search?page={next}\">next</a></main></body></html>"
        ),
    )
        .into_response()
}

#[cfg(test)]
mod tests;
