//! One fetch job's exchange: robots.txt checked, redirects followed by hand (every hop
//! re-checked against robots and scope, loops and long chains broken), the response read.

use reqwest::header::LOCATION;
use trawl_core::clock::now_ms;
use trawl_core::counters::Counter;
use trawl_core::urlnorm::host_key;
use trawl_core::{DiscoveredUrl, FetchJob, Hop};
use url::Url;

pub use trawl_robots as robots;

use crate::robots_fetch::RobotsDecision;
use crate::{FetchError, Fetcher, JobClock, Outcome, failed_outcome, failure, fetched_record};

impl Fetcher {
    pub(crate) async fn follow(
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
}
