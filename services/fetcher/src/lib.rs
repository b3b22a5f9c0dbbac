//! The fetcher stage: polite, safe HTTP fetching.
//!
//! For each fetch job it checks robots.txt (fetching and caching it per host), follows
//! redirects by hand (up to `max_redirects`, every hop re-checked against robots and scope,
//! loops broken), caps body and decoded sizes, decodes HTML to UTF-8, records every exchange
//! in WARC, and reports when the host may be contacted next.

mod http;
pub mod net;
mod robots_fetch;
mod service;
pub mod warcout;
mod worker;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use reqwest::header::{HeaderMap, LOCATION};
use trawl_core::clock::now_ms;
use trawl_core::counters::Counter;
use trawl_core::scope::Scope;
use trawl_core::settings::CrawlSettings;
use trawl_core::state::State;
use trawl_core::urlnorm::{Normalizer, host_key};
use trawl_core::{
    CoreError, DiscoveredUrl, FetchFailure, FetchJob, Fetched, Hop, MESSAGE_VERSION, UrlKind,
};
use url::Url;

pub use trawl_robots as robots;

/// The decoded HTML a page carries to extraction, at most: what extraction reads
/// (`trawl_extract::content::MAX_HTML_BYTES`; `tests/memory.rs` checks they agree).
pub const PAGE_TEXT_MAX: usize = 8 << 20;

use crate::robots::LocalRobots;
use crate::robots_fetch::RobotsDecision;
use crate::warcout::WarcHandle;

use trawl_body as body;

pub use service::serve;
pub use worker::{run_worker, spawn};

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("shared state: {0}")]
    State(#[from] CoreError),
    #[error("HTTP client setup: {0}")]
    Client(String),
    /// The WARC writer failed: no page is handed on unarchived.
    #[error("WARC output failed: {0}")]
    Warc(String),
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
    /// When an unreachable robots.txt is asked again; and how long pages wait for it.
    pub robots_retry: Duration,
    pub robots_outage: Duration,
    /// Retries of a URL answered 429/503 before giving up.
    pub max_retries: u32,
    /// Backoff when 429/503 carry no usable Retry-After.
    pub default_backoff: Duration,
    /// Longest Retry-After honoured.
    pub max_backoff: Duration,
}

impl FetcherConfig {
    /// The fetcher of a crawl with every default setting.
    pub fn new(crawl: impl Into<String>) -> Self {
        Self::from_settings(crawl, &CrawlSettings::default())
    }

    /// The fetcher's part of a crawl's settings; the rest are the fetcher's own constants.
    pub fn from_settings(crawl: impl Into<String>, s: &CrawlSettings) -> Self {
        Self {
            crawl: crawl.into(),
            user_agent: s.user_agent(),
            robots_agent: s.robots_agent(),
            connect_timeout: Duration::from_secs(s.connect_timeout_s.max(1)),
            timeout: Duration::from_secs(s.timeout_s.max(1)),
            max_body_bytes: s.max_body_bytes,
            max_decoded_bytes: s.max_decoded_bytes,
            max_redirects: 10,
            allow_private: s.allow_private,
            delay: Duration::from_millis(s.delay_ms),
            robots_ttl: Duration::from_secs(24 * 3600),
            robots_retry: Duration::from_secs(s.robots_retry_s.max(1)),
            robots_outage: Duration::from_secs(s.robots_outage_s),
            max_retries: 3,
            default_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(600),
        }
    }

    /// Caps both body limits at `bytes` (a message size the queue can carry).
    pub fn cap_bodies(&mut self, bytes: usize) {
        self.max_body_bytes = self.max_body_bytes.min(bytes);
        self.max_decoded_bytes = self.max_decoded_bytes.min(bytes);
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
    /// The host's robots.txt is unreachable: queue the job again (not counted as a retry)
    /// and ask again after `after`; `since` is when the job started waiting.
    Wait {
        after: Duration,
        since: u64,
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

pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) payload: Vec<u8>,
    pub(crate) truncated: bool,
    /// The response's WARC record.
    pub(crate) archived: Option<trawl_core::WarcRef>,
    /// `sha1:` + base32 of the payload.
    pub(crate) payload_digest: String,
    /// The earlier crawl's facts, when the request was conditional on them.
    pub(crate) prior: Option<trawl_core::history::Prior>,
    /// The record was a revisit of this earlier full response.
    pub(crate) revisit_of: Option<trawl_core::WarcRef>,
}

pub(crate) fn failure(kind: &str, message: impl Into<String>) -> FetchFailure {
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
    active: std::sync::atomic::AtomicUsize,
    /// An earlier crawl: its validators make requests conditional.
    history: Option<Arc<dyn trawl_core::history::History>>,
    /// Fetch only pages whose revisit time has come (`trawl watch`).
    due_only: bool,
    /// Single requests outside a crawl: no seen-set.
    one_shot: bool,
}

/// Per-job bookkeeping: when each host was last contacted, so that requests within one job
/// (robots.txt, redirect hops) are spaced like requests of different jobs.
#[derive(Default)]
pub(crate) struct JobClock {
    pub(crate) hosts: HashMap<String, HostClock>,
}

/// The end of the last request to a host and the gap the next one waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostClock {
    pub(crate) ended_ms: u64,
    pub(crate) gap: Duration,
}

impl HostClock {
    pub(crate) fn next_allowed_ms(&self) -> u64 {
        self.ended_ms.saturating_add(self.gap.as_millis() as u64)
    }
}

/// The URL's sitemap says the page changed after the earlier crawl fetched it: a page not
/// due yet by its interval is fetched anyway.
pub fn changed_since(job: &FetchJob, prior: &trawl_core::history::Prior) -> bool {
    let parse = |s: &str| chrono::DateTime::parse_from_rfc3339(s).ok();
    match (
        job.lastmod.as_deref().and_then(parse),
        parse(&prior.fetched_at),
    ) {
        (Some(modified), Some(fetched)) => modified > fetched,
        _ => false,
    }
}

/// The politeness rule: the next request to a host waits for the larger of the site's
/// Crawl-delay and the configured delay after the end of the last one.
pub fn politeness_gap(crawl_delay: Option<Duration>, delay: Duration) -> Duration {
    crawl_delay.unwrap_or_default().max(delay)
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
            active: Default::default(),
            history: None,
            due_only: false,
            one_shot: false,
        })
    }

    /// A fetcher of single pages outside a crawl (`trawl serve`'s scrapes, `trawl map`):
    /// a redirect is followed even to a URL fetched before, nothing is added to the
    /// state's seen-set (which would grow with every request a server answers), and a page
    /// that is not HTML keeps its body (cut as a page's is) instead of being refused.
    pub fn one_shot(mut self) -> Self {
        self.one_shot = true;
        self
    }

    /// Pages of the history not yet due again are not requested: they come out as a 304
    /// with no hop (no request made), and the writer carries them forward.
    pub fn due_only(mut self, yes: bool) -> Self {
        self.due_only = yes;
        self
    }

    /// The record of a page not due again, made without a request.
    async fn not_due(&self, job: &FetchJob) -> Option<Fetched> {
        // Sitemaps and feeds are always fetched: their `<lastmod>`s and entries are what
        // makes pages due.
        if !self.due_only || job.kind != UrlKind::Page {
            return None;
        }
        let prior = self.history.as_ref()?.prior(&job.url).await.ok()??;
        let due = chrono::DateTime::parse_from_rfc3339(prior.next_due.as_deref()?).ok()?;
        if !prior.was_ok() || due <= Utc::now() || changed_since(job, &prior) {
            return None;
        }
        let mut f = fetched_record(job, &prior.final_url, Vec::new(), 0, 304, None);
        f.facts = prior.facts;
        Some(f)
    }

    /// A re-crawl of `history`: each request carries the earlier response's validators,
    /// and a 304 or an unchanged payload is archived as a WARC revisit record.
    pub fn with_history(mut self, history: Arc<dyn trawl_core::history::History>) -> Self {
        self.history = Some(history);
        self
    }

    /// Why the WARC writer stopped, if it has.
    pub fn warc_failure(&self) -> Option<String> {
        self.warc.as_ref()?.failure()
    }

    pub fn state(&self) -> &Arc<dyn State> {
        &self.state
    }

    /// Jobs being fetched by this process right now.
    pub fn in_flight(&self) -> usize {
        self.active.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Fetches one job, following redirects. Network trouble is reported in the result, not
    /// as an error; errors are for shared-state failures only.
    pub async fn fetch(&self, job: &FetchJob) -> Result<FetchOutput, FetchError> {
        if let Some(f) = self.not_due(job).await {
            return Ok(FetchOutput {
                outcome: Outcome::Done(Box::new(f)),
                next_allowed_ms: now_ms(),
                discovered: Vec::new(),
            });
        }
        let mut discovered = Vec::new();
        let mut clock = JobClock::default();
        self.active
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let outcome = self.follow(job, &mut clock, &mut discovered).await;
        self.active
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let outcome = outcome?;
        let next_allowed_ms = match (&outcome, clock.hosts.get(&job.host)) {
            (Outcome::Retry { after, .. } | Outcome::Wait { after, .. }, Some(h)) => {
                h.ended_ms.max(now_ms()) + after.as_millis() as u64
            }
            (Outcome::Retry { after, .. } | Outcome::Wait { after, .. }, None) => {
                now_ms() + after.as_millis() as u64
            }
            (_, Some(h)) => h.next_allowed_ms(),
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
                return failed_outcome(
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
                    self.state.count(&Counter::RedirectOutOfScope, 1).await?;
                    let f = failure(
                        "redirect_out_of_scope",
                        format!("redirect to {url} leaves the crawl scope"),
                    );
                    return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
                }
                if hops.iter().any(|h| h.url == url.as_str()) {
                    let f = failure(
                        "redirect_loop",
                        format!("redirect loop: {url} was already visited in this chain"),
                    );
                    return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
                }
                if hops.len() > self.cfg.max_redirects {
                    let f = failure(
                        "too_many_redirects",
                        format!("more than {} redirects", self.cfg.max_redirects),
                    );
                    return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
                }
                // A target the crawl already has (or will fetch on its own) is not fetched
                // twice: the record points at it and the chain ends here.
                if !self.one_shot && !self.state.seen_add(url.as_str()).await? {
                    self.state.count(&Counter::RedirectToSeen, 1).await?;
                    let status = hops.last().map_or(0, |h| h.status);
                    let f = fetched_record(job, url.as_str(), hops, wire_bytes, status, None);
                    return Ok(Outcome::Done(Box::new(f)));
                }
            }
            if let Some(f) = self.address_policy(&url) {
                return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
            }
            let rules = match self.rules_for(&url, clock, discovered).await? {
                RobotsDecision::Rules(r) => r,
                RobotsDecision::Refused(f) => {
                    return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
                }
            };
            if rules.access == robots::Access::Unreachable {
                // Disallow while unreachable, and ask again later; only a sustained outage
                // makes the page blocked.
                let now = now_ms();
                let since = job.robots_wait_since_ms.unwrap_or(now);
                if now.saturating_sub(since) < self.cfg.robots_outage.as_millis() as u64 {
                    self.state.count(&Counter::RobotsWaits, 1).await?;
                    return Ok(Outcome::Wait {
                        after: self.cfg.robots_retry,
                        since,
                    });
                }
            }
            if !rules.allows(&url) {
                self.state.count(&Counter::RobotsBlocked, 1).await?;
                let why = rules.access.blocked_reason();
                let f = failure("robots_disallowed", format!("{url}: {why}"));
                return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
            }
            let crawl_delay = rules.robots.crawl_delay();
            let resp = match self.request(&url, &host, crawl_delay, clock).await {
                Ok(r) => r,
                Err(f) => {
                    return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
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
                        return failed_outcome(job, url.as_str(), hops, wire_bytes, f);
                    }
                }
            }
            if matches!(resp.status, 429 | 503) && job.retries < self.cfg.max_retries {
                let after = self.retry_after(&resp.headers);
                self.state.count(&Counter::Retries, 1).await?;
                return Ok(Outcome::Retry {
                    after,
                    status: resp.status,
                });
            }
            let fetched = self.finish_response(job, &url, hops, wire_bytes, resp);
            return Ok(Outcome::Done(Box::new(fetched)));
        }
    }

    pub(crate) fn address_policy(&self, url: &Url) -> Option<FetchFailure> {
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

    fn finish_response(
        &self,
        job: &FetchJob,
        url: &Url,
        hops: Vec<Hop>,
        wire_bytes: u64,
        resp: Response,
    ) -> Fetched {
        let content_type = header_str(&resp.headers, "content-type").map(str::to_string);
        let mut fetched = fetched_record(
            job,
            url.as_str(),
            hops,
            wire_bytes,
            resp.status,
            content_type.clone(),
        );
        fetched.facts = response_facts(&resp);
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
        // A page keeps only what extraction reads; listings are read whole (to 50 MiB).
        let keep = match job.kind {
            UrlKind::Page => PAGE_TEXT_MAX,
            UrlKind::Sitemap | UrlKind::Feed => usize::MAX,
        };
        let decoded = match body::decode_prefix(
            &resp.payload,
            header_str(&resp.headers, "content-encoding"),
            keep,
            self.cfg.max_decoded_bytes,
        ) {
            Ok((b, total)) => {
                if total > b.len() {
                    fetched.error.get_or_insert_with(|| cut_page(total));
                }
                b
            }
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
        let mime = content_type.as_deref().map(body::mime_type);
        match job.kind {
            UrlKind::Sitemap | UrlKind::Feed => fetched.body = decoded,
            UrlKind::Page => {
                if body::is_html(content_type.as_deref(), &decoded) {
                    let (mut text, charset) = body::decode_html(&decoded, content_type.as_deref());
                    if text.len() > PAGE_TEXT_MAX {
                        // A charset that takes more bytes in UTF-8 than in its own.
                        let mut cut = PAGE_TEXT_MAX;
                        while !text.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        let total = text.len();
                        text.truncate(cut);
                        text.shrink_to_fit();
                        fetched.error.get_or_insert_with(|| cut_page(total));
                    }
                    fetched.body = text.into_bytes();
                    fetched.charset = Some(charset.to_string());
                } else if self.one_shot {
                    // A single request answers whatever the page is (text, JSON, ...),
                    // as received and cut to what extraction would read.
                    fetched.body = decoded;
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

/// The error of a page kept cut at what extraction reads.
fn cut_page(total: usize) -> FetchFailure {
    failure(
        "body_too_large",
        format!(
            "page of {total} bytes decoded, larger than the {PAGE_TEXT_MAX} bytes extraction reads; kept the first part"
        ),
    )
}

/// What a later crawl needs of this response. A 304 keeps the earlier payload's digest and
/// validators where it sends none (RFC 9110 15.4.5: it may omit them); a revisit record
/// points at the earlier full response, which stays the page's record.
fn response_facts(resp: &Response) -> trawl_core::ResponseFacts {
    let prior = resp.prior.as_ref().map(|p| &p.facts);
    let header = |name: &str| header_str(&resp.headers, name).map(str::to_string);
    let not_modified = resp.status == 304;
    let keep = |now: Option<String>, then: Option<&Option<String>>| {
        now.or_else(|| then.filter(|_| not_modified).cloned().flatten())
    };
    trawl_core::ResponseFacts {
        etag: keep(header("etag"), prior.map(|p| &p.etag)),
        last_modified: keep(header("last-modified"), prior.map(|p| &p.last_modified)),
        payload_digest: if not_modified {
            prior.and_then(|p| p.payload_digest.clone())
        } else {
            Some(resp.payload_digest.clone())
        },
        warc: match &resp.revisit_of {
            Some(full) => Some(full.clone()),
            None => resp.archived.clone(),
        },
        revisit: resp.revisit_of.as_ref().and(resp.archived.clone()),
    }
}

pub(crate) fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Ends a fetch with a failure record.
fn failed_outcome(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    f: FetchFailure,
) -> Result<Outcome, FetchError> {
    Ok(Outcome::Done(Box::new(failed_record(
        job, final_url, hops, wire_bytes, f,
    ))))
}

/// The record of a job the frontier could not take back for a retry (it is full): the
/// page is recorded failed rather than dropped unseen.
pub(crate) fn rejected_retry(job: &FetchJob, status: u16) -> Fetched {
    let hop = Hop {
        url: job.url.clone(),
        status,
    };
    let why = match status {
        0 => "waiting for robots.txt".to_string(),
        s => format!("retrying after {s}"),
    };
    failed_record(
        job,
        &job.url,
        if status == 0 { Vec::new() } else { vec![hop] },
        0,
        failure(
            "retry_rejected",
            format!("{why}: the frontier is full and could not take the URL back"),
        ),
    )
}

/// The record of a fetch that failed: the hops so far, the last status, the failure.
fn failed_record(
    job: &FetchJob,
    final_url: &str,
    hops: Vec<Hop>,
    wire_bytes: u64,
    f: FetchFailure,
) -> Fetched {
    let status = hops.last().map_or(0, |h| h.status);
    let mut out = fetched_record(job, final_url, hops, wire_bytes, status, None);
    out.error = Some(f);
    out
}

/// The record of a fetch, without its body (the caller adds it).
fn fetched_record(
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
        facts: Default::default(),
        render: None,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_sitemap_lastmod_after_the_earlier_fetch_makes_a_page_due() {
        let prior = trawl_core::history::Prior {
            fetched_at: "2026-11-01T10:00:00Z".into(),
            ..Default::default()
        };
        let job = |lastmod: Option<&str>| FetchJob {
            lastmod: lastmod.map(str::to_string),
            ..FetchJob::default()
        };
        assert!(changed_since(&job(Some("2026-11-02T00:00:00Z")), &prior));
        assert!(!changed_since(&job(Some("2026-10-30T00:00:00Z")), &prior));
        assert!(!changed_since(&job(None), &prior));
        assert!(!changed_since(&job(Some("yesterday")), &prior));
    }

    use super::*;

    /// The one request path refuses private addresses itself: robots.txt and its
    /// redirects, which never pass the page loop's check, and IP-literal hosts, which never
    /// reach the guarded resolver.
    #[tokio::test]
    async fn every_request_refuses_a_private_ip_literal() {
        let state = Arc::new(trawl_core::state::MemoryState::new(
            10,
            1,
            trawl_core::state::WorkTracker::default(),
        ));
        let seed = Url::parse("http://example.org/").unwrap();
        let fetcher = Fetcher::new(
            FetcherConfig::new("t"),
            state as Arc<dyn State>,
            Scope::new(trawl_core::scope::ScopeKind::Any, &[seed]),
            Normalizer::default(),
            None,
        )
        .unwrap();
        for target in [
            "http://127.0.0.1:9/robots.txt",
            "http://[::1]:9/x",
            "http://169.254.169.254/latest/meta-data/",
            "http://[64:ff9b::a9fe:a9fe]/",
        ] {
            let url = Url::parse(target).unwrap();
            let host = host_key(&url);
            let Err(err) = fetcher
                .request(&url, &host, None, &mut JobClock::default())
                .await
            else {
                panic!("{target} was requested");
            };
            assert_eq!(err.kind, "private_address", "{target}: {err:?}");
        }
    }

    #[test]
    fn politeness_waits_for_the_larger_delay() {
        let d = Duration::from_millis(100);
        let at = |cd| {
            HostClock {
                ended_ms: 1000,
                gap: politeness_gap(cd, d),
            }
            .next_allowed_ms()
        };
        assert_eq!(at(None), 1100);
        assert_eq!(at(Some(Duration::from_secs(2))), 3000);
    }

    #[test]
    fn config_from_settings_keeps_one_robots_token() {
        let s = CrawlSettings {
            user_agent: Some(" MyBot/2.0 (+http://x)".into()),
            ..CrawlSettings::default()
        };
        let c = FetcherConfig::from_settings("c", &s);
        assert_eq!(c.robots_agent, "MyBot");
        assert_eq!(FetcherConfig::new("c").robots_agent, "trawl");
    }
}
