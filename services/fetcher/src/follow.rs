//! One fetch job's exchange: robots.txt checked, redirects followed by hand (every hop
//! re-checked against robots and scope, loops and long chains broken), the response read.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::LOCATION;
use trawl_core::clock::now_ms;
use trawl_core::counters::Counter;
use trawl_core::urlnorm::host_key;
use trawl_core::{DiscoveredUrl, FetchFailure, FetchJob, Hop};
use url::Url;

pub use trawl_robots as robots;

use crate::robots::HostRules;
use crate::robots_fetch::RobotsDecision;
use crate::{FetchError, Fetcher, JobClock, Outcome, failed_outcome, failure, fetched_record};

/// Why a chain ends before its next request.
enum Stop {
    /// The hop may not be fetched: the record says why.
    Failed(FetchFailure),
    /// The crawl has the target already: the record points at it.
    Seen,
    /// The host's robots.txt is unreachable: the job waits and asks again.
    Wait { after: Duration, since: u64 },
}

impl Stop {
    /// The job's outcome, with the chain so far in its record.
    fn outcome(
        self,
        job: &FetchJob,
        url: &Url,
        hops: Vec<Hop>,
        wire_bytes: u64,
    ) -> Result<Outcome, FetchError> {
        match self {
            Stop::Failed(f) => failed_outcome(job, url.as_str(), hops, wire_bytes, f),
            Stop::Seen => {
                let status = hops.last().map_or(0, |h| h.status);
                let f = fetched_record(job, url.as_str(), hops, wire_bytes, status, None);
                Ok(Outcome::Done(Box::new(f)))
            }
            Stop::Wait { after, since } => Ok(Outcome::Wait { after, since }),
        }
    }
}

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
            // Redirect targets only: the job's own URL is where the chain starts.
            if !hops.is_empty()
                && let Some(stop) = self.check_redirect(&url, &hops).await?
            {
                return stop.outcome(job, &url, hops, wire_bytes);
            }
            let rules = match self.check_allowed(job, &url, clock, discovered).await? {
                Ok(r) => r,
                Err(stop) => return stop.outcome(job, &url, hops, wire_bytes),
            };
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
            let fetched = self.finish_response(job, &url, hops, wire_bytes, resp, &rules);
            return Ok(Outcome::Done(Box::new(fetched)));
        }
    }

    /// A redirect target's own checks, in this order: scope, loops, chain length, then
    /// whether the crawl has it already. The last check marks the target seen, so it
    /// runs only once the others have passed.
    async fn check_redirect(&self, url: &Url, hops: &[Hop]) -> Result<Option<Stop>, FetchError> {
        if !self.scope.contains(url) {
            self.state.count(&Counter::RedirectOutOfScope, 1).await?;
            let f = failure(
                "redirect_out_of_scope",
                format!("redirect to {url} leaves the crawl scope"),
            );
            return Ok(Some(Stop::Failed(f)));
        }
        if hops.iter().any(|h| h.url == url.as_str()) {
            let f = failure(
                "redirect_loop",
                format!("redirect loop: {url} was already visited in this chain"),
            );
            return Ok(Some(Stop::Failed(f)));
        }
        if hops.len() > self.cfg.max_redirects {
            let f = failure(
                "too_many_redirects",
                format!("more than {} redirects", self.cfg.max_redirects),
            );
            return Ok(Some(Stop::Failed(f)));
        }
        // A target the crawl already has (or will fetch on its own) is not fetched
        // twice: the record points at it and the chain ends here.
        if !self.one_shot && !self.state.seen_add(url.as_str()).await? {
            self.state.count(&Counter::RedirectToSeen, 1).await?;
            return Ok(Some(Stop::Seen));
        }
        Ok(None)
    }

    /// Every hop's checks before its request: the address policy, then the host's
    /// robots.txt. The rules come back for the request's crawl delay.
    async fn check_allowed(
        &self,
        job: &FetchJob,
        url: &Url,
        clock: &mut JobClock,
        discovered: &mut Vec<DiscoveredUrl>,
    ) -> Result<Result<Arc<HostRules>, Stop>, FetchError> {
        if let Some(f) = self.address_policy(url) {
            return Ok(Err(Stop::Failed(f)));
        }
        let rules = match self.rules_for(url, clock, discovered).await? {
            RobotsDecision::Rules(r) => r,
            RobotsDecision::Refused(f) => return Ok(Err(Stop::Failed(f))),
        };
        if rules.access == robots::Access::Unreachable {
            // Disallow while unreachable, and ask again later; only a sustained outage
            // makes the page blocked.
            let now = now_ms();
            let since = job.robots_wait_since_ms.unwrap_or(now);
            if now.saturating_sub(since) < self.cfg.robots_outage.as_millis() as u64 {
                self.state.count(&Counter::RobotsWaits, 1).await?;
                let after = self.cfg.robots_retry;
                return Ok(Err(Stop::Wait { after, since }));
            }
        }
        if !rules.allows(url) {
            self.state.count(&Counter::RobotsBlocked, 1).await?;
            let why = rules.access.blocked_reason();
            let f = failure("robots_disallowed", format!("{url}: {why}"));
            return Ok(Err(Stop::Failed(f)));
        }
        Ok(Ok(rules))
    }
}
