//! Discovery from sitemaps and feeds given on the command line, and spider-trap defences.

use support::{options, pages, report};
use trawl_testsite::{Robots, SiteConfig, TestSite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sitemaps_and_feeds_seed_the_crawl() {
    // robots.txt names no sitemap: everything comes from the options.
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[], out.path());
    o.targets.sitemaps = vec![site.url("/sitemap.xml")];
    o.targets.feeds = vec![site.url("/feed.rss"), site.url("/feed.atom")];
    trawl::crawl(o).await.unwrap();
    for n in 1..=5 {
        assert_eq!(site.hits(&format!("/sm/{n}")).len(), 1, "/sm/{n}");
    }
    for n in 1..=3 {
        assert_eq!(site.hits(&format!("/feeds/{n}")).len(), 1, "/feeds/{n}");
    }
    let pages = pages(out.path());
    let sitemap = pages
        .iter()
        .find(|p| p["url"].as_str().unwrap().ends_with("/sitemap.xml"))
        .unwrap();
    assert_eq!(sitemap["kind"], "sitemap");
    assert_eq!(sitemap["links_found"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traps_are_cut_off() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(
        &[site.url("/trap/cal/2024?m=1"), site.url("/trap/deep/")],
        out.path(),
    );
    o.crawl.max_query_variants = 5;
    trawl::crawl(o).await.unwrap();
    let cal = site.hits("/trap/cal/");
    assert_eq!(cal.len(), 5, "the calendar must stop at 5 query variants");
    let deep = site.hits("/trap/deep/");
    // /trap/deep/, /x/, /x/x/ are fine; a third x repeats a segment past the limit.
    assert_eq!(deep.len(), 3, "{deep:?}");
    let r = report(out.path());
    assert!(r["frontier"]["traps"]["query_variants"].as_i64().unwrap() >= 1);
    assert!(
        r["frontier"]["traps"]["repeated_segments"]
            .as_i64()
            .unwrap()
            >= 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_host_budget_stops_a_host() {
    let site = TestSite::start(SiteConfig {
        pages: 30,
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.max_pages_per_host = 4;
    trawl::crawl(o).await.unwrap();
    let pages_fetched = site.hits("/page/").len();
    assert!(pages_fetched <= 4, "{pages_fetched}");
    assert!(
        report(out.path())["frontier"]["host_budget_exceeded"]
            .as_i64()
            .unwrap()
            >= 1
    );
}
