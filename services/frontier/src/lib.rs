//! The frontier stage: decides which discovered URLs are crawled, in what order, and when.
//!
//! [`Frontier::ingest`] takes batches from `trawl.discovered` (normalize, scope, depth,
//! spider-trap defences, seen-set, budgets) and puts admitted URLs in per-host queues in the
//! shared [`State`]. [`dispatch`] claims ready hosts from the state and publishes fetch jobs
//! to `trawl.fetch`; the fetcher releases the host when its request ends, which is what
//! enforces politeness across every fetcher replica.

mod robots_gate;
mod traps;

use std::sync::Arc;
use std::time::Duration;

use trawl_core::clock::now_ms;
use trawl_core::counters::Counter;
use trawl_core::pipeline::{Hops, Shutdown, StageContext, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_core::scope::{PathFilter, Scope};
use trawl_core::settings::CrawlSettings;
use trawl_core::state::{Enqueued, State};
use trawl_core::urlnorm::{Normalizer, host_key};
use trawl_core::{CoreError, Discovered, DiscoveredUrl, FetchJob, MESSAGE_VERSION, UrlKind};

pub mod recheck;

pub use traps::{TrapConfig, TrapKind};

impl FrontierConfig {
    /// The frontier's part of a crawl's settings.
    pub fn from_settings(crawl: &str, s: &CrawlSettings, scope: Scope) -> Self {
        FrontierConfig {
            crawl: crawl.to_string(),
            scope,
            max_depth: s.max_depth,
            max_pages: s.max_pages,
            max_pages_per_host: s.max_pages_per_host,
            traps: TrapConfig::from_settings(s),
            normalizer: s.normalizer(),
            robots_agent: s.robots_agent(),
            // The settings were validated where the crawl was planned or submitted.
            paths: s.path_filter().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "path patterns ignored");
                PathFilter::default()
            }),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FrontierError {
    #[error("shared state: {0}")]
    State(#[from] CoreError),
}

#[derive(Debug, Clone)]
pub struct FrontierConfig {
    pub crawl: String,
    pub scope: Scope,
    /// Links deeper than this (seeds are depth 0) are not followed.
    pub max_depth: u32,
    /// Stop admitting URLs after this many (0: no limit).
    pub max_pages: u64,
    /// Stop admitting URLs of one host after this many (0: no limit).
    pub max_pages_per_host: u64,
    pub traps: TrapConfig,
    pub normalizer: Normalizer,
    /// The user-agent token robots.txt groups are matched with.
    pub robots_agent: String,
    /// Include and exclude patterns of the pages linked (not of the start URLs, nor of
    /// sitemaps and feeds); a page they leave out is out of scope.
    pub paths: PathFilter,
}

/// What happened to one discovered URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Admission {
    Queued,
    Seen,
    Invalid,
    OutOfScope,
    TooDeep,
    Trap(TrapKind),
    /// Its host's robots.txt disallows it: never admitted, no budget used.
    RobotsBlocked,
    HostBudget,
    MaxPages,
    Rejected,
}

/// Lower is sooner. Shallower pages first; sitemaps and feeds before pages of their depth
/// (they discover many URLs per request); `staleness_s` (time since the last fetch, for
/// re-crawls) moves a page ahead of fresher ones at the same depth.
pub fn priority(depth: u32, kind: UrlKind, staleness_s: u64) -> i64 {
    let kind_bonus = match kind {
        UrlKind::Sitemap | UrlKind::Feed => 500_000,
        UrlKind::Page => 0,
    };
    i64::from(depth) * 1_000_000 - kind_bonus - staleness_s.min(499_999) as i64
}

pub struct Frontier {
    cfg: FrontierConfig,
    state: Arc<dyn State>,
    robots: robots_gate::RobotsGate,
}

impl Frontier {
    pub fn new(cfg: FrontierConfig, state: Arc<dyn State>) -> Self {
        let robots = robots_gate::RobotsGate::new(cfg.robots_agent.clone());
        Self { cfg, state, robots }
    }

    /// Admits or drops every URL of a batch; returns the verdicts in order.
    pub async fn ingest(&self, batch: &Discovered) -> Result<Vec<Admission>, FrontierError> {
        let mut out = Vec::with_capacity(batch.urls.len());
        // Counted per batch, not per URL: a documentation page links to hundreds of URLs
        // and shared-state round trips would dominate. Seen URLs are not counted at all.
        let mut counts: std::collections::HashMap<Admission, i64> = Default::default();
        for d in &batch.urls {
            let v = self.admit(d).await?;
            if v != Admission::Seen {
                *counts.entry(v.clone()).or_default() += 1;
            }
            out.push(v);
        }
        for (v, n) in counts {
            let counter = match v {
                Admission::Trap(kind) => Counter::FrontierTrap(kind.name().into()),
                Admission::Queued => Counter::FrontierQueued,
                Admission::Invalid => Counter::FrontierInvalidUrl,
                Admission::OutOfScope => Counter::FrontierOutOfScope,
                Admission::TooDeep => Counter::FrontierTooDeep,
                Admission::RobotsBlocked => Counter::FrontierRobotsBlocked,
                Admission::HostBudget => Counter::FrontierHostBudget,
                Admission::MaxPages => Counter::FrontierMaxPages,
                Admission::Rejected => Counter::FrontierRejectedFull,
                Admission::Seen => continue,
            };
            self.state.count(&counter, n).await?;
        }
        Ok(out)
    }

    /// Decides one URL.
    pub async fn admit(&self, d: &DiscoveredUrl) -> Result<Admission, FrontierError> {
        let Ok(url) = self.cfg.normalizer.parse(&d.url, None) else {
            return Ok(Admission::Invalid);
        };
        // The path patterns choose among the pages linked: the start URLs, sitemaps and
        // feeds are the crawl's way in, not its pages.
        if !self.cfg.scope.contains(&url)
            || (d.depth > 0 && d.kind == UrlKind::Page && !self.cfg.paths.allows(&url))
        {
            return Ok(Admission::OutOfScope);
        }
        if d.depth > self.cfg.max_depth {
            return Ok(Admission::TooDeep);
        }
        if let Some(trap) = self.cfg.traps.check_static(&url) {
            return Ok(Admission::Trap(trap));
        }
        if !self.state.seen_add(url.as_str()).await? {
            return Ok(Admission::Seen);
        }
        let host = host_key(&url);
        // Before any budget: a URL robots.txt disallows is not a page of the crawl.
        if !self
            .robots
            .allows(&*self.state, &host, &url, now_ms())
            .await?
        {
            return Ok(Admission::RobotsBlocked);
        }
        if url.query().is_some() && self.cfg.traps.max_query_variants > 0 {
            let pattern = Counter::QueryVariants(traps::path_pattern(&host, url.path()));
            if self.state.count(&pattern, 1).await? as u64 > self.cfg.traps.max_query_variants {
                return Ok(Admission::Trap(TrapKind::QueryVariants));
            }
        }
        if self.cfg.max_pages_per_host > 0 && d.kind == UrlKind::Page {
            let budget = Counter::HostPages(host.clone());
            if self.state.count(&budget, 1).await? as u64 > self.cfg.max_pages_per_host {
                return Ok(Admission::HostBudget);
            }
        }
        // Sitemaps and feeds are how pages are found, not pages: they use no page budget.
        if self.cfg.max_pages > 0
            && d.kind == UrlKind::Page
            && self.state.count(&Counter::FrontierAdmitted, 1).await? as u64 > self.cfg.max_pages
        {
            return Ok(Admission::MaxPages);
        }
        let job = FetchJob {
            v: MESSAGE_VERSION,
            crawl: self.cfg.crawl.clone(),
            url: url.to_string(),
            host,
            depth: d.depth,
            kind: d.kind,
            priority: priority(d.depth, d.kind, 0),
            retries: 0,
            lastmod: d.lastmod.clone(),
            robots_wait_since_ms: None,
            claim: None,
        };
        Ok(match self.state.enqueue(job).await? {
            Enqueued::Accepted => Admission::Queued,
            Enqueued::AcceptedEvicting(n) => {
                self.state
                    .count(&Counter::FrontierEvicted, n as i64)
                    .await?;
                Admission::Queued
            }
            Enqueued::Rejected => Admission::Rejected,
        })
    }
}

/// Moves jobs from ready hosts to the fetch queue until the stop. Publishing waits while
/// the fetch queue is full, so the frontier never runs ahead of the fetchers.
pub async fn dispatch(
    state: Arc<dyn State>,
    fetch: Arc<dyn Queue<FetchJob>>,
    stop: impl Into<Shutdown>,
) -> Result<(), FrontierError> {
    const IDLE_POLL: Duration = Duration::from_millis(20);
    let mut stop = stop.into();
    while !stop.is_shutdown() {
        let now = now_ms();
        if let Some(claim) = state.claim(now).await? {
            match fetch.publish(claim.job).await {
                Ok(()) => continue,
                Err(CoreError::Closed) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        let wait = match state.next_ready_ms().await? {
            Some(at) if at > now => Duration::from_millis(at - now).min(IDLE_POLL),
            Some(_) => {
                tokio::task::yield_now().await;
                continue;
            }
            None => IDLE_POLL,
        };
        // Woken early when a host is released or work arrives.
        stop.run_until(state.wait_change(wait)).await;
    }
    Ok(())
}

/// Feeds `trawl.discovered` batches through [`Frontier::ingest`] until the stop.
pub async fn run_ingest(
    frontier: Arc<Frontier>,
    discovered: Arc<dyn Queue<Discovered>>,
    stop: impl Into<Shutdown>,
) -> Result<(), FrontierError> {
    let mut stop = stop.into();
    while let Some(batch) = stop
        .run_until(discovered.pull(16, Duration::from_millis(200)))
        .await
    {
        for d in batch? {
            frontier.ingest(&d.msg).await?;
            discovered.ack(d.id).await?;
        }
    }
    Ok(())
}

/// The frontier's two loops (admission and dispatch) over the hops.
pub fn spawn(workers: &mut Workers, frontier: &Arc<Frontier>, hops: &Hops, stop: &Shutdown) {
    workers.spawn(run_ingest(
        frontier.clone(),
        hops.discovered.clone(),
        stop.clone(),
    ));
    workers.spawn(dispatch(
        frontier.state.clone(),
        hops.fetch.clone(),
        stop.clone(),
    ));
}

/// The frontier as one stage of a cluster crawl; on a re-crawl, with its end-of-crawl check.
pub async fn serve(ctx: StageContext, recheck: Option<recheck::Recheck>) -> StageResult {
    let cfg = FrontierConfig::from_settings(&ctx.spec.crawl, &ctx.spec.settings, ctx.spec.scope());
    let frontier = Arc::new(Frontier::new(cfg, ctx.state.clone()));
    ctx.set_ready();
    let mut workers = Workers::new();
    spawn(&mut workers, &frontier, &ctx.hops, &ctx.shutdown);
    if let Some(r) = recheck {
        workers.spawn(r.run(
            ctx.state.clone(),
            ctx.hops.discovered.clone(),
            ctx.shutdown.clone(),
        ));
    }
    // One failing half ends the stage (the service starts it again): the other must not
    // keep it alive without its partner.
    Ok(workers.join().await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_core::scope::ScopeKind;
    use trawl_core::state::{MemoryState, WorkTracker};
    use url::Url;

    fn frontier(max_depth: u32, max_pages: u64) -> (Frontier, Arc<MemoryState>) {
        let state = Arc::new(MemoryState::new(1000, 1, WorkTracker::default()));
        let cfg = FrontierConfig {
            crawl: "t".into(),
            scope: Scope::new(ScopeKind::Host, &[Url::parse("http://h/").unwrap()]),
            max_depth,
            max_pages,
            max_pages_per_host: 0,
            traps: TrapConfig {
                max_query_variants: 3,
                ..TrapConfig::default()
            },
            normalizer: Normalizer::default(),
            robots_agent: "trawl".into(),
            paths: Default::default(),
        };
        (Frontier::new(cfg, state.clone()), state)
    }

    fn d(url: &str, depth: u32) -> DiscoveredUrl {
        DiscoveredUrl {
            url: url.into(),
            depth,
            kind: UrlKind::Page,
            lastmod: None,
        }
    }

    #[tokio::test]
    async fn path_patterns_filter_links_but_not_start_urls() {
        let (mut f, _) = frontier(5, 0);
        f.cfg.paths = PathFilter::new(&["^/docs/".into()], &["/old/".into()], false).unwrap();
        assert_eq!(
            f.admit(&d("http://h/", 0)).await.unwrap(),
            Admission::Queued
        );
        assert_eq!(
            f.admit(&d("http://h/docs/a", 1)).await.unwrap(),
            Admission::Queued
        );
        assert_eq!(
            f.admit(&d("http://h/blog/a", 1)).await.unwrap(),
            Admission::OutOfScope
        );
        assert_eq!(
            f.admit(&d("http://h/docs/old/a", 1)).await.unwrap(),
            Admission::OutOfScope
        );
        let mut sitemap = d("http://h/sitemap.xml", 1);
        sitemap.kind = UrlKind::Sitemap;
        assert_eq!(f.admit(&sitemap).await.unwrap(), Admission::Queued);
    }

    #[tokio::test]
    async fn verdicts() {
        let (f, _) = frontier(2, 0);
        assert_eq!(
            f.admit(&d("http://h/a#x", 1)).await.unwrap(),
            Admission::Queued
        );
        assert_eq!(
            f.admit(&d("http://H:80/a", 1)).await.unwrap(),
            Admission::Seen
        );
        assert_eq!(
            f.admit(&d("http://other/a", 1)).await.unwrap(),
            Admission::OutOfScope
        );
        assert_eq!(
            f.admit(&d("http://h/deep", 3)).await.unwrap(),
            Admission::TooDeep
        );
        assert_eq!(
            f.admit(&d("ftp://h/x", 1)).await.unwrap(),
            Admission::Invalid
        );
        assert_eq!(
            f.admit(&d("http://h/x/y/x/y/x/y", 1)).await.unwrap(),
            Admission::Trap(TrapKind::RepeatedSegments)
        );
        let long = format!("http://h/{}", "a".repeat(3000));
        assert_eq!(
            f.admit(&d(&long, 1)).await.unwrap(),
            Admission::Trap(TrapKind::UrlTooLong)
        );
        for i in 0..3 {
            let u = format!("http://h/cal/2024?m={i}");
            assert_eq!(f.admit(&d(&u, 1)).await.unwrap(), Admission::Queued);
        }
        // Digits in the path are folded into one pattern, so /cal/2025 shares the budget.
        assert_eq!(
            f.admit(&d("http://h/cal/2025?m=9", 1)).await.unwrap(),
            Admission::Trap(TrapKind::QueryVariants)
        );
    }

    #[tokio::test]
    async fn urls_robots_txt_disallows_use_no_budget() {
        use trawl_core::state::{RobotsAccess, RobotsEntry};
        let (f, state) = frontier(5, 3);
        let rules = b"User-agent: *\nDisallow: /old/\n".to_vec();
        let entry = RobotsEntry {
            access: RobotsAccess::Body(rules),
            fetched_at_ms: now_ms(),
        };
        state.robots_put("h", entry, 3_600_000).await.unwrap();
        // Disallowed links come first, as a documentation page's links to old editions do.
        let mut urls: Vec<_> = (0..10)
            .map(|i| d(&format!("http://h/old/{i}"), 1))
            .collect();
        urls.extend((0..3).map(|i| d(&format!("http://h/new/{i}"), 1)));
        let batch = Discovered {
            v: MESSAGE_VERSION,
            crawl: "t".into(),
            source: None,
            urls,
        };
        let v = f.ingest(&batch).await.unwrap();
        assert!(
            v[..10].iter().all(|a| *a == Admission::RobotsBlocked),
            "{v:?}"
        );
        assert!(
            v[10..].iter().all(|a| *a == Admission::Queued),
            "the budget is the allowed pages': {v:?}"
        );
        let c = state.counters().await.unwrap();
        assert_eq!(c[Counter::FrontierRobotsBlocked.key().as_ref()], 10);
        assert_eq!(state.queued().await.unwrap(), 3);
    }

    #[tokio::test]
    async fn max_pages_caps_admissions() {
        let (f, state) = frontier(5, 2);
        let batch = Discovered {
            v: MESSAGE_VERSION,
            crawl: "t".into(),
            source: None,
            urls: (0..5).map(|i| d(&format!("http://h/{i}"), 0)).collect(),
        };
        let v = f.ingest(&batch).await.unwrap();
        assert_eq!(v.iter().filter(|v| **v == Admission::Queued).count(), 2);
        assert_eq!(state.queued().await.unwrap(), 2);
        assert_eq!(
            state.counters().await.unwrap()[Counter::FrontierMaxPages.key().as_ref()],
            3
        );
    }

    #[test]
    fn shallower_pages_rank_first_and_sitemaps_lead_their_depth() {
        assert!(priority(0, UrlKind::Page, 0) < priority(1, UrlKind::Page, 0));
        assert!(priority(1, UrlKind::Sitemap, 0) < priority(1, UrlKind::Page, 0));
        assert!(priority(1, UrlKind::Page, 3600) < priority(1, UrlKind::Page, 0));
    }
}
