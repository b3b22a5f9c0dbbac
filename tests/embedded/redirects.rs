//! Redirects are followed by hand: every hop recorded and re-checked; loops broken.

use support::{error_kind, options, page, pages};
use trawl_testsite::{SiteConfig, TestSite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chains_loops_limits_scope_and_robots() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let seeds: Vec<String> = [
        "/redirect/chain/3",
        "/redirect/loop/a",
        "/redirect/long/12",
        "/redirect/offsite",
        "/redirect/disallowed",
    ]
    .iter()
    .map(|p| site.url(p))
    .collect();
    let mut o = options(&seeds, out.path());
    o.crawl.max_depth = 0;
    let (rep, _) = trawl::crawl(o).await.unwrap();
    let pages = pages(out.path());

    let chain = page(&pages, "/redirect/chain/3");
    let hops: Vec<(&str, u64)> = chain["redirects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["url"].as_str().unwrap(), h["status"].as_u64().unwrap()))
        .collect();
    assert_eq!(hops.len(), 5, "{hops:?}");
    assert!(hops[..4].iter().all(|(_, s)| (300..400).contains(s)));
    assert!(hops[4].0.ends_with("/page/1") && hops[4].1 == 200);
    assert!(chain["final_url"].as_str().unwrap().ends_with("/page/1"));
    assert_eq!(chain["status"], 200);
    assert_eq!(chain["title"], "Page 1");

    let lp = page(&pages, "/redirect/loop/a");
    assert_eq!(error_kind(lp), Some("redirect_loop"));
    assert_eq!(site.hits("/redirect/loop/a").len(), 1);
    assert_eq!(site.hits("/redirect/loop/b").len(), 1);

    let long = page(&pages, "/redirect/long/12");
    assert_eq!(error_kind(long), Some("too_many_redirects"));
    // 10 redirects followed: 11 requests, then it stops.
    assert_eq!(long["redirects"].as_array().unwrap().len(), 11);

    let off = page(&pages, "/redirect/offsite");
    assert_eq!(error_kind(off), Some("redirect_out_of_scope"));
    assert!(
        site.log().iter().all(|e| e.host.starts_with("127.0.0.1")),
        "the out-of-scope hop was fetched"
    );

    let dis = page(&pages, "/redirect/disallowed");
    assert_eq!(error_kind(dis), Some("robots_disallowed"));
    assert!(site.hits("/private/").is_empty());

    assert_eq!(rep.redirects.loops, 1);
    assert_eq!(rep.redirects.to_already_seen, 0);
    assert_eq!(rep.redirects.too_many, 1);
    assert_eq!(rep.redirects.out_of_scope, 1);
    assert!(rep.redirects.pages_redirected >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_crawled_url_is_not_fetched_twice() {
    let site = TestSite::start(SiteConfig {
        pages: 2,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    // /page/1 is a seed and also where the chain ends.
    let mut o = options(
        &[site.url("/page/1"), site.url("/redirect/chain/1")],
        out.path(),
    );
    o.crawl.max_depth = 0;
    o.concurrency = 1;
    let (rep, _) = trawl::crawl(o).await.unwrap();
    assert_eq!(site.hits("/page/1").len(), 1, "{:?}", site.log());
    let pages = pages(out.path());
    let chain = page(&pages, "/redirect/chain/1");
    assert!(chain["final_url"].as_str().unwrap().ends_with("/page/1"));
    assert!(chain["error"].is_null());
    assert_eq!(rep.redirects.to_already_seen, 1);
}
