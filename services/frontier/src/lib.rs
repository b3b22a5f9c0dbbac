//! The frontier stage: decides which discovered URLs are crawled, in what order, and when.
//!
//! [`Frontier::ingest`] takes batches from `trawl.discovered` (normalize, scope, depth,
//! spider-trap defences, seen-set, budgets) and puts admitted URLs in per-host queues in the
//! shared [`State`]. [`dispatch`] claims ready hosts from the state and publishes fetch jobs
//! to `trawl.fetch`; the fetcher releases the host when its request ends, which is what
//! enforces politeness across every fetcher replica.

mod robots_gate;
mod traps;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use trawl_core::clock::now_ms;
use trawl_core::counters::Counter;
use trawl_core::pipeline::{Hops, Shutdown, StageContext, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_core::scope::{PathFilter, Scope};
use trawl_core::settings::CrawlSettings;
use trawl_core::state::{Admitted, Enqueued, State};
use trawl_core::urlnorm::{Normalizer, host_key};
use trawl_core::{
    CoreError, CoreResult, Discovered, DiscoveredUrl, FetchJob, MESSAGE_VERSION, UrlKind,
};
use url::Url;

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
        self.admit_all(&batch.urls).await
    }

    /// Decides one URL.
    pub async fn admit(&self, d: &DiscoveredUrl) -> Result<Admission, FrontierError> {
        let mut v = self.admit_all(std::slice::from_ref(d)).await?;
        Ok(v.pop().unwrap_or(Admission::Invalid))
    }

    /// The verdicts of `urls`, in order. Each step asks the shared state about the whole
    /// batch at once (the seen-set, each budget, then one atomic step that marks every
    /// new URL seen and queues the admitted ones, then the counters: a handful of round
    /// trips a batch, not several a link). Every URL gets the verdict it would have had
    /// alone, in order: the budgets count only what passed the steps before. A batch that
    /// fails midway is admitted again whole when it is redelivered: no URL is marked seen
    /// without its job queued.
    async fn admit_all(&self, urls: &[DiscoveredUrl]) -> Result<Vec<Admission>, FrontierError> {
        let mut out: Vec<Option<Admission>> = vec![None; urls.len()];
        let mut cands = Vec::with_capacity(urls.len());
        let mut in_batch = HashSet::new();
        for (i, d) in urls.iter().enumerate() {
            match self.check_static(d) {
                Ok(url) if !in_batch.insert(url.as_str().to_owned()) => {
                    out[i] = Some(Admission::Seen)
                }
                Ok(url) => cands.push(Candidate {
                    i,
                    host: host_key(&url),
                    url,
                }),
                Err(v) => out[i] = Some(v),
            }
        }
        let keys: Vec<String> = cands.iter().map(|c| c.url.as_str().to_owned()).collect();
        let seen = self.state.seen_contains_many(&keys).await?;
        // Each new URL with the verdict that turns it away, or none yet.
        let mut fresh: Vec<(Candidate, Option<Admission>)> = Vec::with_capacity(cands.len());
        let now = now_ms();
        for (c, seen) in cands.into_iter().zip(seen) {
            if seen {
                out[c.i] = Some(Admission::Seen);
                continue;
            }
            // Before any budget: a URL robots.txt disallows is not a page of the crawl.
            let blocked = !self
                .robots
                .allows(&*self.state, &c.host, &c.url, now)
                .await?;
            fresh.push((c, blocked.then_some(Admission::RobotsBlocked)));
        }
        let traps = &self.cfg.traps;
        let page = |c: &Candidate| urls[c.i].kind == UrlKind::Page;
        self.within_budget(&mut fresh, traps.max_query_variants, |c| {
            (c.url.query().is_some() && traps.max_query_variants > 0).then(|| {
                (
                    Counter::QueryVariants(traps::path_pattern(&c.host, c.url.path())),
                    Admission::Trap(TrapKind::QueryVariants),
                )
            })
        })
        .await?;
        self.within_budget(&mut fresh, self.cfg.max_pages_per_host, |c| {
            (self.cfg.max_pages_per_host > 0 && page(c))
                .then(|| (Counter::HostPages(c.host.clone()), Admission::HostBudget))
        })
        .await?;
        // Sitemaps and feeds are how pages are found, not pages: they use no page budget.
        self.within_budget(&mut fresh, self.cfg.max_pages, |c| {
            (self.cfg.max_pages > 0 && page(c))
                .then_some((Counter::FrontierAdmitted, Admission::MaxPages))
        })
        .await?;
        let items = fresh
            .iter()
            .map(|(c, v)| {
                let job = v.is_none().then(|| self.job(&urls[c.i], c));
                (c.url.as_str().to_owned(), job)
            })
            .collect();
        let admitted = self.state.admit_many(items).await?;
        let mut evicted = 0;
        for ((c, v), a) in fresh.into_iter().zip(admitted) {
            // Seen here: another frontier replica admitted it since the read above.
            out[c.i] = Some(match (a, v) {
                (Admitted::Seen, _) => Admission::Seen,
                (_, Some(v)) => v,
                (Admitted::Queued(Enqueued::AcceptedEvicting(n)), None) => {
                    evicted += n as i64;
                    Admission::Queued
                }
                (Admitted::Queued(Enqueued::Rejected), None) => Admission::Rejected,
                (Admitted::Queued(Enqueued::Accepted) | Admitted::Marked, None) => {
                    Admission::Queued
                }
            });
        }
        let out: Vec<Admission> = out
            .into_iter()
            .map(|v| v.unwrap_or(Admission::Invalid))
            .collect();
        self.count_verdicts(&out, evicted).await?;
        Ok(out)
    }

    /// The checks that need no shared state; the normalized URL when it passes them.
    fn check_static(&self, d: &DiscoveredUrl) -> Result<Url, Admission> {
        let Ok(url) = self.cfg.normalizer.parse(&d.url, None) else {
            return Err(Admission::Invalid);
        };
        // The path patterns choose among the pages linked: the start URLs, sitemaps and
        // feeds are the crawl's way in, not its pages.
        if !self.cfg.scope.contains(&url)
            || (d.depth > 0 && d.kind == UrlKind::Page && !self.cfg.paths.allows(&url))
        {
            return Err(Admission::OutOfScope);
        }
        if d.depth > self.cfg.max_depth {
            return Err(Admission::TooDeep);
        }
        if let Some(trap) = self.cfg.traps.check_static(&url) {
            return Err(Admission::Trap(trap));
        }
        Ok(url)
    }

    /// Counts one against a budget for each candidate still without a verdict that
    /// `budget` names, all in one step; those past `limit` get the verdict `budget` gave
    /// them. The n-th candidate of a counter takes the n-th unit the step added, so each
    /// sees the count it would have seen alone.
    async fn within_budget(
        &self,
        fresh: &mut [(Candidate, Option<Admission>)],
        limit: u64,
        budget: impl Fn(&Candidate) -> Option<(Counter, Admission)>,
    ) -> Result<(), FrontierError> {
        // Per counter: the counter, the verdict past it, and its candidates' positions.
        let mut groups: Vec<(Counter, Admission, Vec<usize>)> = Vec::new();
        let mut by_key: HashMap<String, usize> = HashMap::new();
        for (pos, (c, verdict)) in fresh.iter().enumerate() {
            if verdict.is_some() {
                continue;
            }
            if let Some((counter, past)) = budget(c) {
                let g = *by_key.entry(counter.key().into_owned()).or_insert_with(|| {
                    groups.push((counter, past, Vec::new()));
                    groups.len() - 1
                });
                groups[g].2.push(pos);
            }
        }
        if groups.is_empty() {
            return Ok(());
        }
        let adds: Vec<(Counter, i64)> = groups
            .iter()
            .map(|(c, _, members)| (c.clone(), members.len() as i64))
            .collect();
        let totals = self.state.count_many(&adds).await?;
        for ((_, past, members), total) in groups.into_iter().zip(totals) {
            let before = total - members.len() as i64;
            for (n, pos) in members.into_iter().enumerate() {
                if (before + n as i64 + 1).max(0) as u64 > limit {
                    fresh[pos].1 = Some(past.clone());
                }
            }
        }
        Ok(())
    }

    fn job(&self, d: &DiscoveredUrl, c: &Candidate) -> FetchJob {
        FetchJob {
            v: MESSAGE_VERSION,
            crawl: self.cfg.crawl.clone(),
            url: c.url.to_string(),
            host: c.host.clone(),
            depth: d.depth,
            kind: d.kind,
            priority: priority(d.depth, d.kind, 0),
            retries: 0,
            lastmod: d.lastmod.clone(),
            robots_wait_since_ms: None,
            claim: None,
        }
    }

    /// The batch's verdicts counted per verdict, not per URL, in one step. Seen URLs are
    /// not counted at all: a documentation page links to hundreds already seen.
    async fn count_verdicts(&self, verdicts: &[Admission], evicted: i64) -> CoreResult<()> {
        let mut counts: HashMap<&Admission, i64> = HashMap::new();
        for v in verdicts.iter().filter(|v| **v != Admission::Seen) {
            *counts.entry(v).or_default() += 1;
        }
        let mut adds: Vec<(Counter, i64)> = counts
            .into_iter()
            .filter_map(|(v, n)| Some((verdict_counter(v)?, n)))
            .collect();
        if evicted > 0 {
            adds.push((Counter::FrontierEvicted, evicted));
        }
        if !adds.is_empty() {
            self.state.count_many(&adds).await?;
        }
        Ok(())
    }
}

/// The counter of a verdict; none for [`Admission::Seen`].
fn verdict_counter(v: &Admission) -> Option<Counter> {
    Some(match v {
        Admission::Trap(kind) => Counter::FrontierTrap(kind.name().into()),
        Admission::Queued => Counter::FrontierQueued,
        Admission::Invalid => Counter::FrontierInvalidUrl,
        Admission::OutOfScope => Counter::FrontierOutOfScope,
        Admission::TooDeep => Counter::FrontierTooDeep,
        Admission::RobotsBlocked => Counter::FrontierRobotsBlocked,
        Admission::HostBudget => Counter::FrontierHostBudget,
        Admission::MaxPages => Counter::FrontierMaxPages,
        Admission::Rejected => Counter::FrontierRejectedFull,
        Admission::Seen => return None,
    })
}

/// A URL that passed the checks needing no shared state.
struct Candidate {
    /// Its position in the batch.
    i: usize,
    url: Url,
    host: String,
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
            let (host, id) = (claim.job.host.clone(), claim.job.claim.clone());
            let id = id.as_deref();
            match holding(&*state, &host, id, fetch.publish(claim.job)).await {
                Ok(()) => {
                    if let Some(id) = id {
                        state.handed(&host, id, now_ms()).await?;
                    }
                    continue;
                }
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

/// Runs `work` (a publish that may wait on a full fetch queue or a restarting server)
/// while renewing the named claim `claim` on `host` every [`State::renew_every`], so the
/// wait never outlives the claim's lease. A renewal that fails is logged: the lease then
/// ends and the job goes back in its host's queue, and the copy published under the
/// expired claim is dropped by the fetcher that takes it.
async fn holding<T>(
    state: &dyn State,
    host: &str,
    claim: Option<&str>,
    work: impl std::future::Future<Output = T>,
) -> T {
    let (Some(id), Some(every)) = (claim, state.renew_every()) else {
        return work.await;
    };
    tokio::pin!(work);
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tick.tick() => match state.hold(host, id, now_ms()).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(host, "claim lost while its job was published"),
                Err(e) => tracing::warn!(host, "claim not renewed: {e}"),
            },
        }
    }
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
    workers.join().await
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
            tdmrep: None,
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

    /// One batch gets the verdicts its URLs get one at a time: repeats seen once, each
    /// budget counting only what passed the checks before it, sitemaps outside the page
    /// budgets, and the same counters.
    #[tokio::test]
    async fn a_batch_decides_as_its_urls_one_at_a_time() {
        let setup = || {
            let (mut f, state) = frontier(5, 7);
            f.cfg.max_pages_per_host = 4;
            f.cfg.scope = Scope::new(ScopeKind::Domain, &[Url::parse("http://h/").unwrap()]);
            (f, state)
        };
        let mut urls = Vec::new();
        for i in 0..12 {
            let host = ["h", "a.h", "b.h"][i % 3];
            urls.push(d(&format!("http://{host}/p{}", i % 5), 1));
            urls.push(d(&format!("http://{host}/cal?m={i}"), 1));
        }
        let mut sitemap = d("http://a.h/sitemap.xml", 1);
        sitemap.kind = UrlKind::Sitemap;
        urls.insert(9, sitemap);
        urls.push(d("ftp://h/x", 1));
        urls.push(d("http://h/p0#again", 1));

        let (alone, alone_state) = setup();
        let mut singly = Vec::new();
        for u in &urls {
            singly.push(alone.admit(u).await.unwrap());
        }
        let (batched, batch_state) = setup();
        let batch = Discovered {
            v: MESSAGE_VERSION,
            crawl: "t".into(),
            source: None,
            urls,
        };
        let got = batched.ingest(&batch).await.unwrap();
        assert_eq!(got, singly);
        for v in [
            Admission::Queued,
            Admission::Seen,
            Admission::Invalid,
            Admission::HostBudget,
            Admission::MaxPages,
            Admission::Trap(TrapKind::QueryVariants),
        ] {
            assert!(got.contains(&v), "{v:?} not in {got:?}");
        }
        assert_eq!(
            batch_state.counters().await.unwrap(),
            alone_state.counters().await.unwrap()
        );
        assert_eq!(batch_state.queued().await.unwrap(), 8);
    }

    #[test]
    fn shallower_pages_rank_first_and_sitemaps_lead_their_depth() {
        assert!(priority(0, UrlKind::Page, 0) < priority(1, UrlKind::Page, 0));
        assert!(priority(1, UrlKind::Sitemap, 0) < priority(1, UrlKind::Page, 0));
        assert!(priority(1, UrlKind::Page, 3600) < priority(1, UrlKind::Page, 0));
    }
}
