//! Politeness, checked from the server's access log: gaps between requests to one host,
//! concurrency per host, crawl-delay, and backing off on 429.

use support::{max_overlap, min_gap_ms, options, page, pages};
use trawl_testsite::{LogEntry, Robots, SiteConfig, TestSite};

/// Smallest gap between the end of one request and the start of the next, in ms.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_separates_every_request_to_a_host() {
    let site = TestSite::start(SiteConfig {
        pages: 6,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.delay_ms = 250;
    o.concurrency = 8;
    trawl::crawl(o).await.unwrap();
    let log = site.log();
    assert!(log.len() >= 7, "{log:?}");
    assert_eq!(max_overlap(&log), 1);
    let gap = min_gap_ms(&log);
    // Milliseconds are truncated on both sides: allow one.
    assert!(gap >= 249.0, "requests {gap} ms apart with --delay 250");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_delay_from_robots_wins_over_a_smaller_delay() {
    let site = TestSite::start(SiteConfig {
        pages: 3,
        robots: Robots::Body("User-agent: *\nCrawl-delay: 1\n".into()),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.delay_ms = 100;
    o.crawl.max_depth = 1;
    trawl::crawl(o).await.unwrap();
    let log = site.log();
    assert!(log.len() >= 4, "{log:?}");
    // robots.txt included: the gap after it counts too.
    assert_eq!(log[0].target, "/robots.txt");
    let gap = min_gap_ms(&log);
    assert!(
        gap >= 999.0,
        "requests {gap} ms apart with Crawl-delay: 1: {log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_per_host_caps_parallel_requests() {
    let site = TestSite::start(SiteConfig {
        slow_secs: 1,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    // Five slow URLs (query variants of /slow) make overlap visible.
    let seeds: Vec<String> = (0..5).map(|i| site.url(&format!("/slow?i={i}"))).collect();
    let mut o = options(&seeds, out.path());
    o.concurrency = 8;
    o.crawl.concurrency_per_host = 2;
    trawl::crawl(o).await.unwrap();
    let slow: Vec<LogEntry> = site.hits("/slow");
    assert_eq!(slow.len(), 5);
    assert_eq!(max_overlap(&slow), 2, "{slow:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backs_off_on_429_with_retry_after() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let (rep, _) = trawl::crawl(options(&[site.url("/retry/a")], out.path()))
        .await
        .unwrap();
    let hits = site.hits("/retry/a");
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(hits[0].status, 429);
    assert_eq!(hits[1].status, 200);
    let waited_ms = (hits[1].start_us as f64 - hits[0].end_us as f64) / 1000.0;
    assert!(
        waited_ms >= 999.0,
        "retried after {waited_ms} ms; Retry-After said 1 s"
    );
    let pages = pages(out.path());
    assert_eq!(page(&pages, "/retry/a")["status"], 200);
    assert_eq!(rep.retries, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backs_off_on_503_until_the_retry_after_date() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    trawl::crawl(options(&[site.url("/unavailable/a")], out.path()))
        .await
        .unwrap();
    let hits = site.hits("/unavailable/a");
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(hits[0].status, 503);
    let waited_ms = (hits[1].start_us as f64 - hits[0].end_us as f64) / 1000.0;
    // An HTTP date has whole seconds: 2 s ahead is at least 1 s after truncation.
    assert!(waited_ms >= 1000.0, "retried after {waited_ms} ms");
    assert_eq!(page(&pages(out.path()), "/unavailable/a")["status"], 200);
}
