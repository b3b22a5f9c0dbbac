//! The fetcher stage: polite, safe HTTP fetching.
//!
//! For each fetch job it checks robots.txt (fetching and caching it per host), follows
//! redirects by hand (up to `max_redirects`, every hop re-checked against robots and scope,
//! loops broken), caps body and decoded sizes, decodes HTML to UTF-8, records every exchange
//! in WARC, and reports when the host may be contacted next.

pub mod body;
pub mod net;
pub mod robots;
pub mod warcout;
mod worker;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use reqwest::header::{HeaderMap, LOCATION};
use trawl_core::clock::now_ms;
use trawl_core::scope::Scope;
use trawl_core::state::{RobotsAccess, RobotsEntry, State};
use trawl_core::urlnorm::{Normalizer, host_key};
use trawl_core::{
    CoreError, DiscoveredUrl, FetchFailure, FetchJob, Fetched, Hop, MESSAGE_VERSION, UrlKind,
};
use url::Url;

use crate::robots::{HostRules, LocalRobots};
use crate::warcout::{Exchange, WarcHandle};

pub use worker::run_worker;

/// Counter names in shared state.
pub mod counters {
    pub const ROBOTS_BLOCKED: &str = "fetcher.robots_blocked";
    pub const REDIRECT_OUT_OF_SCOPE: &str = "fetcher.redirect_out_of_scope";
    pub const RETRIES: &str = "fetcher.retries";
    pub const REQUESTS: &str = "fetcher.requests";
    pub const WIRE_BYTES: &str = "fetcher.wire_bytes";
    pub const REDIRECT_TO_SEEN: &str = "fetcher.redirect_to_seen";
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("shared state: {0}")]
    State(#[from] CoreError),
    #[error("HTTP client setup: {0}")]
    Client(String),
}

#[derive(Debug, Clone)]
pub struct FetcherConfig {
    pub crawl: String,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// The product token matched against robots.txt groups.
    pub robots_agent: String,
    pub connect_timeout: Duration,
    /// Whole request, body included.
    pub timeout: Duration,
    /// Bytes read from the wire per response; the rest is cut off.
    pub max_body_bytes: usize,
    /// Bytes a compressed body may decode to.
    pub max_decoded_bytes: usize,
    pub max_redirects: usize,
    pub allow_private: bool,
    /// Minimum gap between the end of one request to a host and the start of the next.
    pub delay: Duration,
    pub robots_ttl: Duration,
    /// Retries of a URL answered 429/503 before giving up.
    pub max_retries: u32,
    /// Backoff when 429/503 carry no usable Retry-After.
    pub default_backoff: Duration,
    /// Longest Retry-After honoured.
    pub max_backoff: Duration,
}

impl FetcherConfig {
    pub fn new(crawl: impl Into<String>) -> Self {
        Self {
            crawl: crawl.into(),
            user_agent: format!(
                "trawl/{} (+https://github.com/trawl-rs/trawl)",
                env!("CARGO_PKG_VERSION")
            ),
            robots_agent: "trawl".into(),
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(30),
            max_body_bytes: 10 * 1024 * 1024,
            max_decoded_bytes: 50 * 1024 * 1024,
            max_redirects: 10,
            allow_private: false,
            delay: Duration::from_millis(500),
            robots_ttl: Duration::from_secs(24 * 3600),
            max_retries: 3,
            default_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(600),
        }
    }
}

/// What the worker does with a job once the fetch is over.
#[derive(Debug)]
pub enum Outcome {
    Done(Box<Fetched>),
    /// 429/503: queue the job again; the host backs off until then.
    Retry {
        after: Duration,
        status: u16,
    },
}

#[derive(Debug)]
pub struct FetchOutput {
    pub outcome: Outcome,
    /// When the claimed host may be contacted again.
    pub next_allowed_ms: u64,
    /// Sitemaps announced by robots.txt files fetched along the way.
    pub discovered: Vec<DiscoveredUrl>,
}

struct Response {
    status: u16,
    headers: HeaderMap,
    payload: Vec<u8>,
    truncated: bool,
}

fn failure(kind: &str, message: impl Into<String>) -> FetchFailure {
    FetchFailure {
        kind: kind.to_string(),
        message: message.into(),
    }
}

pub struct Fetcher {
    cfg: FetcherConfig,
    client: reqwest::Client,
    state: Arc<dyn State>,
    scope: Scope,
    normalizer: Normalizer,
    warc: Option<WarcHandle>,
    robots: LocalRobots,
}

/// Per-job bookkeeping: when each host was last contacted, so that requests within one job
/// (robots.txt, redirect hops) are spaced like requests of different jobs.
#[derive(Default)]
struct JobClock {
    last_end: HashMap<String, (u64, Duration)>,
}

impl Fetcher {
    pub fn new(
        cfg: FetcherConfig,
        state: Arc<dyn State>,
        scope: Scope,
        normalizer: Normalizer,
        warc: Option<WarcHandle>,
    ) -> Result<Self, FetchError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.timeout)
            .pool_max_idle_per_host(8)
            .tcp_nodelay(true)
            .dns_resolver(net::GuardedResolver {
                allow_private: cfg.allow_private,
            })
            .build()
            .map_err(|e| FetchError::Client(e.to_string()))?;
        Ok(Self {
            cfg,
            client,
            state,
            scope,
            normalizer,
            warc,
            robots: LocalRobots::default(),
        })
    }

    pub fn config(&self) -> &FetcherConfig {
        &self.cfg
    }

    pub fn state(&self) -> &Arc<dyn State> {
        &self.state
    }

    /// Fetches one job, following redirects. Network trouble is reported in the result, not
    /// as an error; errors are for shared-state failures only.
    pub async fn fetch(&self, job: &FetchJob) -> Result<FetchOutput, FetchError> {
        let mut discovered = Vec::new();
        let mut clock = JobClock::default();
        let outcome = self.follow(job, &mut clock, &mut discovered).await?;
        let next_allowed_ms = match (&outcome, clock.last_end.get(&job.host)) {
            (Outcome::Retry { after, .. }, Some((end, _))) => end + after.as_millis() as u64,
            (Outcome::Retry { after, .. }, None) => now_ms() + after.as_millis() as u64,
            (_, Some((end, wait))) => end + wait.as_millis() as u64,
            (_, None) => now_ms(),
        };
        Ok(FetchOutput {
            outcome,
            next_allowed_ms,
            discovered,
        })
    }

    async fn follow(
        &self,
        job: &FetchJob,
        clock: &mut JobClock,
        discovered: &mut Vec<DiscoveredUrl>,
    ) -> Result<Outcome, FetchError> {
        let mut hops: Vec<Hop> = Vec::new();
        let mut wire_bytes = 0u64;
        let mut url = match Url::parse(&job.url) {
            Ok(u) => u,
            Err(e) => {
                return stopped(
                    job,
                    &job.url,
                    hops,
                    0,
                    failure("invalid_url", e.to_string()),
                );
            }
        };
        loop {
            let host = host_key(&url);
            if !hops.is_empty() {
                if !self.scope.contains(&url) {
                    self.state.incr(counters::REDIRECT_OUT_OF_SCOPE, 1).await?;
                    let f = failure(
                        "redirect_out_of_scope",
                        format!("redirect to {url} leaves the crawl scope"),
                    );
                    return stopped(job, url.as_str(), hops, wire_bytes, f);
                }
                if hops.iter().any(|h| h.url == url.as_str()) {
                    let f = failure(
                        "redirect_loop",
                        format!("redirect loop: {url} was already visited in this chain"),
                    );
                    return stopped(job, url.as_str(), hops, wire_bytes, f);
                }
                if hops.len() > self.cfg.max_redirects {
                    let f = failure(
                        "too_many_redirects",
                        format!("more than {} redirects", self.cfg.max_redirects),
                    );
                    return stopped(job, url.as_str(), hops, wire_bytes, f);
                }
                // A target the crawl already has (or will fetch on its own) is not fetched
                // twice: the record points at it and the chain ends here.
                if !self.state.seen_add(url.as_str()).await? {
                    self.state.incr(counters::REDIRECT_TO_SEEN, 1).await?;
                    let status = hops.last().map_or(0, |h| h.status);
                    let mut f = done_ok(job, url.as_str(), hops, wire_bytes, status, None);
                    f.fetched_at = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                    return Ok(Outcome::Done(Box::new(f)));
                }
            }
            if let Some(f) = self.address_policy(&url) {
                return stopped(job, url.as_str(), hops, wire_bytes, f);
            }
            let rules = match self.rules_for(&url, clock, discovered).await? {
                Ok(r) => r,
                Err(f) => {
                    return stopped(job, url.as_str(), hops, wire_bytes, f);
                }
            };
            if !rules.allows(&url) {
                self.state.incr(counters::ROBOTS_BLOCKED, 1).await?;
                let why = if rules.access == "rules" {
                    "disallowed by robots.txt"
                } else {
                    rules.access
                };
                let f = failure("robots_disallowed", format!("{url}: {why}"));
                return stopped(job, url.as_str(), hops, wire_bytes, f);
            }
            let crawl_delay = rules.robots.crawl_delay();
            let resp = match self.request(&url, &host, crawl_delay, clock).await {
                Ok(r) => r,
                Err(f) => {
                    return stopped(job, url.as_str(), hops, wire_bytes, f);
                }
            };
            wire_bytes += resp.payload.len() as u64;
            hops.push(Hop {
                url: url.to_string(),
                status: resp.status,
            });
            if (300..400).contains(&resp.status)
                && let Some(loc) = resp.headers.get(LOCATION).and_then(|v| v.to_str().ok())
            {
                match self.normalizer.parse(loc, Some(&url)) {
                    Ok(next) => {
                        url = next;
                        continue;
                    }
                    Err(e) => {
                        let f = failure("bad_redirect", format!("unusable Location {loc:?}: {e}"));
                        return stopped(job, url.as_str(), hops, wire_bytes, f);
                    }
                }
            }
            if matches!(resp.status, 429 | 503) && job.retries < self.cfg.max_retries {
                let after = self.retry_after(&resp.headers);
                self.state.incr(counters::RETRIES, 1).await?;
                return Ok(Outcome::Retry {
                    after,
                    status: resp.status,
                });
            }
            let fetched = self.finish_response(job, &url, hops, wire_bytes, resp);
            return Ok(Outcome::Done(Box::new(fetched)));
        }
    }

    fn address_policy(&self, url: &Url) -> Option<FetchFailure> {
        if self.cfg.allow_private {
            return None;
        }
        let ip: Option<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(v4)) => Some(v4.into()),
            Some(url::Host::Ipv6(v6)) => Some(v6.into()),
            _ => None,
        };
        match ip {
            Some(ip) if !net::is_public(ip) => Some(failure(
                "private_address",
                format!(
                    "{ip} is a private, loopback or link-local address (use --allow-private to crawl it)"
                ),
            )),
            _ => None,
        }
    }

    fn retry_after(&self, headers: &HeaderMap) -> Duration {
        let parsed = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let v = v.trim();
                if let Ok(secs) = v.parse::<u64>() {
                    return Some(Duration::from_secs(secs));
                }
                let at = httpdate::parse_http_date(v).ok()?;
                Some(
                    at.duration_since(std::time::SystemTime::now())
                        .unwrap_or_default(),
                )
            });
        parsed
            .unwrap_or(self.cfg.default_backoff)
            .min(self.cfg.max_backoff)
    }

    /// The robots rules of `url`'s host: local cache, then shared state, then the network.
    async fn rules_for(
        &self,
        url: &Url,
        clock: &mut JobClock,
        discovered: &mut Vec<DiscoveredUrl>,
    ) -> Result<Result<Arc<HostRules>, FetchFailure>, FetchError> {
        let host = host_key(url);
        let now = now_ms();
        if let Some(r) = self.robots.get(&host, now) {
            return Ok(Ok(r));
        }
        let ttl = self.cfg.robots_ttl.as_millis() as u64;
        let entry = match self.state.robots_get(&host, now).await? {
            Some(e) => e,
            None => {
                let robots_url = match url.join("/robots.txt") {
                    Ok(u) => u,
                    Err(e) => return Ok(Err(failure("invalid_url", e.to_string()))),
                };
                let access = match self.fetch_robots(&robots_url, &host, clock).await {
                    Ok(a) => a,
                    // Not a fact about the site's robots.txt: report it, cache nothing.
                    Err(f) => return Ok(Err(f)),
                };
                let entry = RobotsEntry {
                    access,
                    fetched_at_ms: now_ms(),
                };
                self.state.robots_put(&host, entry.clone(), ttl).await?;
                let rules = HostRules::from_entry(&entry, &self.cfg.robots_agent);
                // The file just fetched may ask for a longer gap than the one it was fetched
                // under: the next request waits for it.
                if let (Some(cd), Some((_, wait))) =
                    (rules.robots.crawl_delay(), clock.last_end.get_mut(&host))
                {
                    *wait = (*wait).max(cd);
                }
                // Announce sitemaps once per fetch of robots.txt; the frontier's scope and
                // seen-set decide whether they are crawled.
                discovered.extend(rules.robots.sitemaps().iter().map(|s| DiscoveredUrl {
                    url: s.to_string(),
                    depth: 0,
                    kind: UrlKind::Sitemap,
                }));
                let rules = Arc::new(rules);
                self.robots
                    .put(&host, rules.clone(), entry.fetched_at_ms + ttl);
                return Ok(Ok(rules));
            }
        };
        let rules = Arc::new(HostRules::from_entry(&entry, &self.cfg.robots_agent));
        self.robots
            .put(&host, rules.clone(), entry.fetched_at_ms + ttl);
        Ok(Ok(rules))
    }

    /// Fetches robots.txt; `Err` only when our own address policy refused the request.
    async fn fetch_robots(
        &self,
        robots_url: &Url,
        host: &str,
        clock: &mut JobClock,
    ) -> Result<RobotsAccess, FetchFailure> {
        // RFC 9309 2.3.1.2: follow at least five redirects.
        let mut url = robots_url.clone();
        for _ in 0..=5 {
            let resp = match self.request(&url, host, None, clock).await {
                Ok(r) => r,
                Err(f) if f.kind == "private_address" => return Err(f),
                Err(_) => return Ok(RobotsAccess::Unreachable),
            };
            match resp.status {
                200..=299 => {
                    let body = body::decode_content(
                        &resp.payload,
                        header_str(&resp.headers, "content-encoding"),
                        robotxt::BYTE_LIMIT + 1,
                    );
                    // A body too large to decode is still rules: the parser reads the first
                    // 500 KiB. Undecodable bytes mean nothing can be read: allow all.
                    return Ok(match body {
                        Ok(b) => RobotsAccess::Body(b),
                        Err(body::BodyError::DecompressionLimit { .. }) => {
                            RobotsAccess::Body(resp.payload)
                        }
                        Err(_) => RobotsAccess::Unavailable,
                    });
                }
                300..=399 => {
                    let next = resp
                        .headers
                        .get(LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|l| url.join(l).ok());
                    match next {
                        Some(n) if host_key(&n) == host || self.scope.contains(&n) => url = n,
                        _ => return Ok(RobotsAccess::Unavailable),
                    }
                }
                400..=499 => return Ok(RobotsAccess::Unavailable),
                _ => return Ok(RobotsAccess::Unreachable),
            }
        }
        Ok(RobotsAccess::Unavailable)
    }

    /// One HTTP request, spaced from the previous request to the same host in this job.
    async fn request(
        &self,
        url: &Url,
        host: &str,
        crawl_delay: Option<Duration>,
        clock: &mut JobClock,
    ) -> Result<Response, FetchFailure> {
        if let Some((end, wait)) = clock.last_end.get(host) {
            let at = end + wait.as_millis() as u64;
            let now = now_ms();
            if at > now {
                tokio::time::sleep(Duration::from_millis(at - now)).await;
            }
        }
        let wait = crawl_delay.unwrap_or_default().max(self.cfg.delay);
        let result = self.request_once(url).await;
        clock.last_end.insert(host.to_string(), (now_ms(), wait));
        let _ = self.state.incr(counters::REQUESTS, 1).await;
        result
    }

    async fn request_once(&self, url: &Url) -> Result<Response, FetchFailure> {
        const ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        const ACCEPT_ENCODING: &str = "gzip, deflate";
        let started = Utc::now();
        let mut resp = self
            .client
            .get(url.clone())
            .header("User-Agent", &self.cfg.user_agent)
            .header("Accept", ACCEPT)
            .header("Accept-Encoding", ACCEPT_ENCODING)
            .send()
            .await
            .map_err(classify)?;
        let status = resp.status();
        let version = resp.version();
        let ip = resp.remote_addr().map(|a| a.ip());
        let headers = resp.headers().clone();
        let mut payload = Vec::new();
        let mut truncated = false;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    let room = self.cfg.max_body_bytes.saturating_sub(payload.len());
                    if chunk.len() > room {
                        payload.extend_from_slice(&chunk[..room]);
                        truncated = true;
                        break;
                    }
                    payload.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(classify(e)),
            }
        }
        if let Some(warc) = &self.warc {
            let ex = Exchange {
                target_uri: url.to_string(),
                date: started,
                ip,
                request_head: request_head(url, &self.cfg.user_agent, ACCEPT, ACCEPT_ENCODING),
                response_head: response_head(version, status, &headers),
                payload: payload.clone(),
                truncated,
            };
            if let Err(e) = warc.write(ex).await {
                tracing::error!(error = %e, "WARC write failed");
            }
        }
        Ok(Response {
            status: status.as_u16(),
            headers,
            payload,
            truncated,
        })
    }

    fn finish_response(
        &self,
        job: &FetchJob,
        url: &Url,
        hops: Vec<Hop>,
        wire_bytes: u64,
        resp: Response,
    ) -> Fetched {
        let content_type = header_str(&resp.headers, "content-type").map(str::to_string);
        let mut fetched = done_ok(
            job,
            url.as_str(),
            hops,
            wire_bytes,
            resp.status,
            content_type.clone(),
        );
        if resp.truncated {
            fetched.error = Some(failure(
                "body_too_large",
                format!(
                    "body larger than the {}-byte cap; kept the first part",
                    self.cfg.max_body_bytes
                ),
            ));
        }
        if !(200..300).contains(&resp.status) {
            return fetched;
        }
        let decoded = match body::decode_content(
            &resp.payload,
            header_str(&resp.headers, "content-encoding"),
            self.cfg.max_decoded_bytes,
        ) {
            Ok(b) => b,
            Err(e) => {
                let kind = match e {
                    body::BodyError::DecompressionLimit { .. } => "decompression_limit",
                    body::BodyError::UnsupportedEncoding(_) => "unsupported_encoding",
                    body::BodyError::Corrupt { .. } => "corrupt_body",
                };
                fetched.error = Some(failure(kind, e.to_string()));
                return fetched;
            }
        };
        let mime = content_type.as_deref().map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
        match job.kind {
            UrlKind::Sitemap | UrlKind::Feed => fetched.body = decoded,
            UrlKind::Page => {
                if is_html(mime.as_deref(), &decoded) {
                    let (text, charset) = body::decode_html(&decoded, content_type.as_deref());
                    fetched.body = text.into_bytes();
                    fetched.charset = Some(charset.to_string());
                } else {
                    fetched.error = Some(failure(
                        "unsupported_content_type",
                        format!(
                            "{} is not HTML: recorded, not extracted",
                            mime.as_deref().unwrap_or("unknown type")
                        ),
                    ));
                }
            }
        }
        fetched
    }
}

fn is_html(mime: Option<&str>, body: &[u8]) -> bool {
    match mime {
        Some("text/html") | Some("application/xhtml+xml") => true,
        Some("") | None => {
            let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            head.trim_start().starts_with("<!doctype html") || head.contains("<html")
        }
        _ => false,
    }
}

fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

fn classify(e: reqwest::Error) -> FetchFailure {
    let mut chain = e.to_string();
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(&e);
    while let Some(s) = src {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        src = s.source();
    }
    if chain.contains(net::BLOCKED_MARKER) {
        return failure(
            "private_address",
            format!("{chain} (use --allow-private to crawl it)"),
        );
    }
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        if chain.contains("dns error") || chain.contains("failed to lookup") {
            "dns"
        } else {
            "connect"
        }
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "request"
    };
    failure(kind, chain)
}

/// Ends a fetch with a failure record.
fn stopped(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    f: FetchFailure,
) -> Result<Outcome, FetchError> {
    Ok(Outcome::Done(Box::new(done(
        job, final_url, hops, wire_bytes, f,
    ))))
}

fn done(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    f: FetchFailure,
) -> Fetched {
    let status = hops.last().map_or(0, |h| h.status);
    let mut out = done_ok(job, final_url, hops, wire_bytes, status, None);
    out.error = Some(f);
    out
}

fn done_ok(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    status: u16,
    content_type: Option<String>,
) -> Fetched {
    Fetched {
        v: MESSAGE_VERSION,
        crawl: job.crawl.clone(),
        job: job.clone(),
        final_url: final_url.to_string(),
        status,
        redirects: hops,
        content_type,
        fetched_at: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        body: Vec::new(),
        charset: None,
        wire_bytes,
        error: None,
    }
}

fn request_head(url: &Url, ua: &str, accept: &str, accept_encoding: &str) -> Vec<u8> {
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    format!(
        "GET {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {ua}\r\nAccept: {accept}\r\nAccept-Encoding: {accept_encoding}\r\n\r\n",
        host_key(url)
    )
    .into_bytes()
}

fn response_head(
    version: reqwest::Version,
    status: reqwest::StatusCode,
    headers: &HeaderMap,
) -> Vec<u8> {
    let v = match version {
        reqwest::Version::HTTP_09 => "HTTP/0.9",
        reqwest::Version::HTTP_10 => "HTTP/1.0",
        reqwest::Version::HTTP_2 => "HTTP/2",
        reqwest::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    };
    let mut out = format!(
        "{v} {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    for (name, value) in headers {
        // The body is stored de-chunked: a reader must not try to de-chunk it again.
        if name.as_str() == "transfer-encoding" {
            out.extend_from_slice(b"X-Crawler-Transfer-Encoding");
        } else {
            out.extend_from_slice(name.as_str().as_bytes());
        }
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}
