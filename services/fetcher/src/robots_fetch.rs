//! Fetching robots.txt for a host and turning it into rules: local parsed cache, then the
//! shared raw cache, then the network (RFC 9309 status handling, redirects, 500 KiB cap).

use std::sync::Arc;

use reqwest::header::LOCATION;
use trawl_core::clock::now_ms;
use trawl_core::state::{RobotsAccess, RobotsEntry};
use trawl_core::urlnorm::host_key;
use trawl_core::{DiscoveredUrl, FetchFailure, UrlKind};
use url::Url;

use crate::robots::HostRules;
use crate::{FetchError, Fetcher, JobClock, failure, header_str};
use trawl_body as body;

/// Whether a URL's host can be crawled at all: its rules, or why they could not be had
/// (an error of this fetch, not a fact about the site: nothing is cached).
pub(crate) enum RobotsDecision {
    Rules(Arc<HostRules>),
    Refused(FetchFailure),
}

/// Makes the next request to `host` wait at least `crawl_delay` after the last one.
fn hold(clock: &mut JobClock, host: &str, crawl_delay: Option<std::time::Duration>) {
    if let (Some(cd), Some(h)) = (crawl_delay, clock.hosts.get_mut(host)) {
        h.gap = h.gap.max(cd);
    }
}

impl Fetcher {
    /// The robots rules of `url`'s host: local cache, then shared state, then the network.
    pub(crate) async fn rules_for(
        &self,
        url: &Url,
        clock: &mut JobClock,
        discovered: &mut Vec<DiscoveredUrl>,
    ) -> Result<RobotsDecision, FetchError> {
        let host = host_key(url);
        let now = now_ms();
        if let Some(r) = self.robots.get(&host, now) {
            return Ok(RobotsDecision::Rules(r));
        }
        let ttl = self.cfg.robots_ttl.as_millis() as u64;
        let entry = match self.state.robots_get(&host, now).await? {
            Some(e) => e,
            None => {
                let robots_url = match url.join("/robots.txt") {
                    Ok(u) => u,
                    Err(e) => {
                        return Ok(RobotsDecision::Refused(failure(
                            "invalid_url",
                            e.to_string(),
                        )));
                    }
                };
                let access = match self.fetch_robots(&robots_url, &host, clock).await {
                    Ok(a) => a,
                    // Not a fact about the site's robots.txt: report it, cache nothing.
                    Err(f) => return Ok(RobotsDecision::Refused(f)),
                };
                // An unreachable robots.txt is a blip until shown otherwise: asked again soon.
                let ttl = match access {
                    RobotsAccess::Unreachable => self.cfg.robots_retry.as_millis() as u64,
                    _ => ttl,
                };
                let mut entry = RobotsEntry {
                    access,
                    fetched_at_ms: now_ms(),
                    tdmrep: None,
                };
                // The file just fetched may ask for a longer gap than the one it was fetched
                // under: the next request (tdmrep.json, then the page) waits for it.
                let crawl_delay = HostRules::from_entry(&entry, &self.cfg.robots_agent)
                    .robots
                    .crawl_delay();
                hold(clock, &host, crawl_delay);
                if entry.access != RobotsAccess::Unreachable {
                    entry.tdmrep = self.fetch_tdmrep(url, &host, clock).await;
                    hold(clock, &host, crawl_delay);
                }
                self.state.robots_put(&host, entry.clone(), ttl).await?;
                let rules = HostRules::from_entry(&entry, &self.cfg.robots_agent);
                // Announce sitemaps once per fetch of robots.txt; the frontier's scope and
                // seen-set decide whether they are crawled.
                discovered.extend(rules.robots.sitemaps().iter().map(|s| DiscoveredUrl {
                    url: s.to_string(),
                    depth: 0,
                    kind: UrlKind::Sitemap,
                    lastmod: None,
                }));
                let rules = Arc::new(rules);
                self.robots
                    .put(&host, rules.clone(), entry.fetched_at_ms + ttl);
                return Ok(RobotsDecision::Rules(rules));
            }
        };
        let rules = Arc::new(HostRules::from_entry(&entry, &self.cfg.robots_agent));
        let ttl = match entry.access {
            RobotsAccess::Unreachable => self.cfg.robots_retry.as_millis() as u64,
            _ => ttl,
        };
        self.robots
            .put(&host, rules.clone(), entry.fetched_at_ms + ttl);
        Ok(RobotsDecision::Rules(rules))
    }

    /// The host's `/.well-known/tdmrep.json` when it answers 2xx with a body of rules
    /// (redirects followed as for robots.txt); anything else is no file.
    async fn fetch_tdmrep(&self, url: &Url, host: &str, clock: &mut JobClock) -> Option<Vec<u8>> {
        if !self.cfg.tdmrep {
            return None;
        }
        let at = url.join("/.well-known/tdmrep.json").ok()?;
        match self.fetch_robots(&at, host, clock).await {
            Ok(RobotsAccess::Body(b)) if b.len() <= crate::robots::signals::TDMREP_LIMIT => Some(b),
            _ => None,
        }
    }

    /// Fetches robots.txt; `Err` only when our own address policy refused the request.
    async fn fetch_robots(
        &self,
        robots_url: &Url,
        host: &str,
        clock: &mut JobClock,
    ) -> Result<RobotsAccess, FetchFailure> {
        // RFC 9309 2.3.1.2: follow at least five redirects; a loop is no robots.txt.
        let mut url = robots_url.clone();
        let mut visited = std::collections::HashSet::new();
        for _ in 0..=5 {
            if !visited.insert(url.to_string()) {
                return Ok(RobotsAccess::Unavailable);
            }
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
                        crate::robots::BYTE_LIMIT + 1,
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
}
