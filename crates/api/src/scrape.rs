//! Single pages outside a crawl, for `/v2/scrape` and `trawl map`: the crawl's fetcher
//! (robots.txt on every hop, the private-address policy, redirects checked hop by hop,
//! the body caps) in its one-shot mode, behind a per-host politeness gate shared by every
//! request the process makes: one request to a host at a time, the next after the larger
//! of `--delay` and the site's Crawl-delay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use trawl_core::clock::now_ms;
use trawl_core::scope::{Scope, ScopeKind};
use trawl_core::settings::CrawlSettings;
use trawl_core::state::{MemoryState, State, WorkTracker};
use trawl_core::urlnorm::host_key;
use trawl_core::{FetchJob, Fetched, MESSAGE_VERSION, UrlKind};
use trawl_fetcher::{Fetcher, FetcherConfig, Outcome};
use url::Url;

use super::api::ApiError;

/// Hosts remembered by the gate before idle ones are forgotten.
const GATE_HOSTS: usize = 4096;

pub struct Scraper {
    fetcher: Fetcher,
    hosts: Mutex<HashMap<String, Arc<tokio::sync::Mutex<u64>>>>,
    /// The longest a scrape may take when the request gives no timeout.
    default_timeout: Duration,
}

impl Scraper {
    pub fn new(settings: &CrawlSettings) -> anyhow::Result<Self> {
        // The state holds the robots.txt cache the one-shot fetcher shares (bounded), and
        // counters; no URL is queued in it.
        let state: Arc<dyn State> = Arc::new(MemoryState::new(1, 1, WorkTracker::default()));
        let cfg = FetcherConfig::from_settings("serve", settings);
        let fetcher = Fetcher::new(
            cfg,
            state,
            Scope::new(ScopeKind::Any, &[]),
            settings.normalizer(),
            None,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .one_shot();
        Ok(Self {
            fetcher,
            hosts: Mutex::new(HashMap::new()),
            default_timeout: Duration::from_secs(settings.timeout_s.max(1) * 3),
        })
    }

    /// Fetches `url` politely; a failure the page cannot be made of is an [`ApiError`]
    /// with Firecrawl's codes (`SCRAPE_TIMEOUT`, `SCRAPE_DNS_RESOLUTION_ERROR`, ...).
    pub async fn fetch(&self, url: &Url, timeout: Option<Duration>) -> Result<Fetched, ApiError> {
        self.fetch_as(url, timeout, UrlKind::Page).await
    }

    /// [`Self::fetch`] of a listing (robots.txt, a sitemap): its body kept whole, as
    /// received, up to the decoded-size cap.
    pub async fn fetch_listing(
        &self,
        url: &Url,
        timeout: Option<Duration>,
    ) -> Result<Fetched, ApiError> {
        self.fetch_as(url, timeout, UrlKind::Sitemap).await
    }

    async fn fetch_as(
        &self,
        url: &Url,
        timeout: Option<Duration>,
        kind: UrlKind,
    ) -> Result<Fetched, ApiError> {
        let timeout = timeout.unwrap_or(self.default_timeout);
        match tokio::time::timeout(timeout, self.fetch_polite(url, kind)).await {
            Ok(r) => r,
            Err(_) => Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                Some("SCRAPE_TIMEOUT"),
                format!("scraping {url} took longer than {} ms", timeout.as_millis()),
            )),
        }
    }

    async fn fetch_polite(&self, url: &Url, kind: UrlKind) -> Result<Fetched, ApiError> {
        let host = host_key(url);
        let slot = self.slot(&host);
        let mut next_allowed = slot.lock().await;
        let wait = next_allowed.saturating_sub(now_ms());
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        let job = FetchJob {
            v: MESSAGE_VERSION,
            crawl: "serve".into(),
            url: url.to_string(),
            host,
            depth: 0,
            // A page's body comes cut to what extraction reads (HTML decoded to UTF-8,
            // `charset` set); a listing's whole, as received.
            kind,
            priority: 0,
            retries: 0,
            lastmod: None,
            robots_wait_since_ms: None,
            claim: None,
        };
        let out = self.fetcher.fetch(&job).await;
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                *next_allowed = now_ms();
                return Err(ApiError::internal(format!("fetching {url}: {e}")));
            }
        };
        *next_allowed = out.next_allowed_ms;
        match out.outcome {
            Outcome::Done(f) => match &f.error {
                Some(e) if !usable_failure(&e.kind) => Err(failure_error(&e.kind, &e.message)),
                _ => Ok(*f),
            },
            Outcome::Retry { after, status } => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                Some("SITE_BUSY"),
                format!(
                    "{url} answered {status}: the site asks to wait {} s before asking again",
                    after.as_secs()
                ),
            )),
            Outcome::Wait { after, .. } => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                Some("ROBOTS_UNREACHABLE"),
                format!(
                    "the robots.txt of {url} cannot be read now: its pages wait; ask again in {} s",
                    after.as_secs()
                ),
            )),
        }
    }

    fn slot(&self, host: &str) -> Arc<tokio::sync::Mutex<u64>> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        if hosts.len() >= GATE_HOSTS && !hosts.contains_key(host) {
            // Forget hosts nobody waits on and whose gap is over.
            let now = now_ms();
            hosts.retain(|_, s| {
                Arc::strong_count(s) > 1 || s.try_lock().map_or(true, |next| *next > now)
            });
        }
        hosts.entry(host.to_string()).or_default().clone()
    }
}

/// A page cut at the body cap is still a page.
fn usable_failure(kind: &str) -> bool {
    kind == "body_too_large"
}

fn failure_error(kind: &str, message: &str) -> ApiError {
    let lower = message.to_ascii_lowercase();
    let (status, code) = match kind {
        "timeout" => (StatusCode::REQUEST_TIMEOUT, "SCRAPE_TIMEOUT"),
        "dns" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "SCRAPE_DNS_RESOLUTION_ERROR",
        ),
        "robots_disallowed" => (StatusCode::FORBIDDEN, "ROBOTS_DISALLOWED"),
        "private_address" => (StatusCode::FORBIDDEN, "ADDRESS_NOT_ALLOWED"),
        _ if lower.contains("certificate") || lower.contains("tls") || lower.contains("ssl") => {
            (StatusCode::INTERNAL_SERVER_ERROR, "SCRAPE_SSL_ERROR")
        }
        "redirect_loop" | "too_many_redirects" | "bad_redirect" => {
            (StatusCode::INTERNAL_SERVER_ERROR, "SCRAPE_REDIRECT_ERROR")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "SCRAPE_FAILED"),
    };
    ApiError::new(status, Some(code), format!("{kind}: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_failures_get_firecrawls_codes() {
        assert_eq!(
            failure_error("dns", "x").code,
            Some("SCRAPE_DNS_RESOLUTION_ERROR")
        );
        assert_eq!(
            failure_error("timeout", "x").status,
            StatusCode::REQUEST_TIMEOUT
        );
        assert_eq!(
            failure_error("connect", "invalid peer certificate").code,
            Some("SCRAPE_SSL_ERROR")
        );
        assert_eq!(
            failure_error("robots_disallowed", "x").status,
            StatusCode::FORBIDDEN
        );
        assert!(usable_failure("body_too_large"));
    }
}
