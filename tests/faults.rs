//! Faults and hostile sites: nothing lost. A robots.txt that fails once does not end the
//! crawl (its pages wait and are fetched once it answers); only a sustained outage records
//! them blocked; a retry the full frontier cannot take back is recorded, not dropped.

use std::sync::Arc;
use std::time::Duration;

use support::{error_kind, options, page, pages, report};
use trawl_core::queue::{MemoryQueue, Queue};
use trawl_core::scope::{Scope, ScopeKind};
use trawl_core::state::{MemoryState, State, WorkTracker};
use trawl_core::urlnorm::Normalizer;
use trawl_core::{FetchJob, Fetched, MESSAGE_VERSION, UrlKind};
use trawl_testsite::{Robots, SiteConfig, TestSite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robots_txt_blip_does_not_end_the_crawl() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::FailFirst {
            status: 503,
            times: 1,
            then: "User-agent: *\nAllow: /\n".into(),
        },
        pages: 11,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.robots_retry_s = 1;
    trawl::crawl(o).await.unwrap();
    let ps = pages(out.path());
    let chain: Vec<_> = ps
        .iter()
        .filter(|p| p["url"].as_str().unwrap().contains("/page/"))
        .collect();
    assert_eq!(chain.len(), 11, "every page of the chain");
    for p in &chain {
        assert_eq!(p["status"], 200, "{p}");
    }
    let r = report(out.path());
    assert_eq!(r["robots_blocked"], 0, "{r}");
    assert!(
        r["robots_waits"].as_i64().unwrap() >= 1,
        "the seed waited: {r}"
    );
    let asked = site.hits("/robots.txt").len();
    assert_eq!(asked, 2, "asked once more after the 503, then cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sustained_robots_outage_records_the_pages_blocked() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(503),
        pages: 3,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.robots_retry_s = 1;
    o.crawl.robots_outage_s = 2;
    let started = std::time::Instant::now();
    trawl::crawl(o).await.unwrap();
    let ps = pages(out.path());
    let seed = page(&ps, "/page/1");
    assert_eq!(error_kind(seed), Some("robots_disallowed"), "{seed}");
    assert!(
        seed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{seed}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "it waited out the outage"
    );
    let asked = site.hits("/robots.txt").len();
    assert!(
        asked >= 2,
        "robots.txt asked again while it waited: {asked}"
    );
    assert!(
        !site.hits("/page/").iter().any(|e| e.status == 200),
        "no page fetched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_the_full_frontier_turns_away_is_recorded() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let tracker = WorkTracker::default();
    // A frontier of one URL, held by a higher-ranked job of another host.
    let state = Arc::new(MemoryState::new(1, 1, tracker.clone()));
    let job = |url: &str, host: &str, priority: i64| FetchJob {
        v: MESSAGE_VERSION,
        crawl: "t".into(),
        url: url.into(),
        host: host.into(),
        kind: UrlKind::Page,
        priority,
        ..FetchJob::default()
    };
    state
        .enqueue(job("http://other.invalid/", "other.invalid", -1_000_000))
        .await
        .unwrap();
    let target = site.url("/retry/full");
    let host = target
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    let mut cfg = trawl_fetcher::FetcherConfig::new("t");
    cfg.allow_private = true;
    cfg.delay = Duration::ZERO;
    let seed = url::Url::parse(&target).unwrap();
    let fetcher = Arc::new(
        trawl_fetcher::Fetcher::new(
            cfg,
            state.clone() as Arc<dyn State>,
            Scope::new(ScopeKind::Any, &[seed]),
            Normalizer::default(),
            None,
        )
        .unwrap(),
    );
    let jobs: Arc<MemoryQueue<FetchJob>> = Arc::new(MemoryQueue::new(8, tracker.clone()));
    let fetched: Arc<MemoryQueue<Fetched>> = Arc::new(MemoryQueue::new(8, tracker.clone()));
    let discovered = Arc::new(MemoryQueue::new(8, tracker.clone()));
    jobs.publish(job(&target, host, 0)).await.unwrap();
    let (trigger, stop) = trawl_core::pipeline::shutdown();
    let worker = tokio::spawn(trawl_fetcher::run_worker(
        fetcher,
        jobs.clone() as Arc<dyn Queue<FetchJob>>,
        fetched.clone() as Arc<dyn Queue<Fetched>>,
        discovered as _,
        stop,
    ));
    let mut records = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !records.iter().any(|f: &Fetched| f.job.url == target)
        && std::time::Instant::now() < deadline
    {
        for d in fetched.pull(8, Duration::from_millis(200)).await.unwrap() {
            fetched.ack(d.id).await.unwrap();
            records.push(d.msg);
        }
    }
    trigger.trigger();
    worker.await.unwrap().unwrap();
    let rejected = records
        .iter()
        .find(|f| f.job.url == target)
        .expect("the 429 page has a record");
    let e = rejected.error.as_ref().expect("recorded as failed");
    assert_eq!(e.kind, "retry_rejected", "{e:?}");
    assert_eq!(rejected.status, 429);
    let counters = state.counters().await.unwrap();
    assert_eq!(counters["fetcher.retries_rejected"], 1, "{counters:?}");
}
