//! The fetcher stage: polite, safe HTTP fetching.
//!
//! For each fetch job it checks robots.txt (fetching and caching it per host), follows
//! redirects by hand (up to `max_redirects`, every hop re-checked against robots and scope,
//! loops broken), caps body and decoded sizes, decodes HTML to UTF-8, records every exchange
//! in WARC, and reports when the host may be contacted next.

mod follow;
mod http;
pub mod net;
mod outcome;
mod robots_fetch;
mod service;
pub mod warcout;
mod worker;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use reqwest::header::HeaderMap;
use trawl_core::clock::now_ms;
use trawl_core::scope::Scope;
use trawl_core::settings::CrawlSettings;
use trawl_core::state::State;
use trawl_core::urlnorm::Normalizer;
use trawl_core::{CoreError, DiscoveredUrl, FetchFailure, FetchJob, Fetched, UrlKind};
use url::Url;

pub use trawl_robots as robots;

/// The decoded HTML a page carries to extraction, at most: what extraction reads
/// (`trawl_extract::content::MAX_HTML_BYTES`; `tests/memory.rs` checks they agree).
pub const PAGE_TEXT_MAX: usize = 8 << 20;

use crate::robots::LocalRobots;
use crate::warcout::WarcHandle;

use outcome::{failed_outcome, fetched_record, header_str, rejected_retry};
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
    /// Fetch each host's `/.well-known/tdmrep.json` with its robots.txt.
    pub tdmrep: bool,
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
            tdmrep: s.tdmrep,
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
    use trawl_core::urlnorm::host_key;

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
