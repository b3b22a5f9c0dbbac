//! Hostile and odd responses: each gives a clear error or the right text, and the crawl
//! goes on.

use support::{error_kind, options, page, pages};
use trawl_testsite::{Robots, SiteConfig, TestSite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_is_recorded_and_the_crawl_goes_on() {
    let site = TestSite::start(SiteConfig {
        slow_secs: 4,
        huge_bytes: 4 * 1024 * 1024,
        bomb_bytes: 64 * 1024 * 1024,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/scenarios")], out.path());
    o.crawl.max_depth = 1;
    o.crawl.timeout_s = 1;
    o.crawl.max_body_bytes = 1024 * 1024;
    o.crawl.max_decoded_bytes = 8 * 1024 * 1024;
    o.crawl.concurrency_per_host = 4;
    let (rep, _) = trawl::crawl(o).await.unwrap();
    let pages = pages(out.path());

    let slow = page(&pages, "/slow");
    assert_eq!(error_kind(slow), Some("timeout"), "{slow}");
    let huge = page(&pages, "/huge");
    assert_eq!(error_kind(huge), Some("body_too_large"), "{huge}");
    let bomb = page(&pages, "/bomb");
    assert_eq!(error_kind(bomb), Some("decompression_limit"), "{bomb}");
    assert!(
        bomb["error"]["message"]
            .as_str()
            .unwrap()
            .contains("8388608")
    );
    let bin = page(&pages, "/binary.bin");
    assert_eq!(error_kind(bin), Some("unsupported_content_type"));
    assert_eq!(bin["status"], 200);
    assert_eq!(bin["content_type"], "application/octet-stream");

    let gz = page(&pages, "/gzip-page");
    assert!(
        gz["text"]
            .as_str()
            .unwrap()
            .contains("Gzip encoded page body."),
        "{gz}"
    );
    let latin1 = page(&pages, "/charset/latin1");
    assert!(
        latin1["text"]
            .as_str()
            .unwrap()
            .contains("Café crème brûlée à la française."),
        "{latin1}"
    );
    assert_eq!(latin1["charset"], "windows-1252");
    let meta = page(&pages, "/charset/meta");
    assert!(
        meta["text"]
            .as_str()
            .unwrap()
            .contains("“Smart quotes” – naïve café."),
        "{meta}"
    );
    let sjis = page(&pages, "/charset/sjis");
    assert_eq!(sjis["charset"], "Shift_JIS");
    assert!(
        sjis["text"]
            .as_str()
            .unwrap()
            .contains("日本語のテキストです。"),
        "{sjis}"
    );
    assert_eq!(sjis["title"], "日本語");

    assert!(rep.errors["timeout"] >= 1);
    // The scenario index itself and its ordinary links still made it.
    assert_eq!(page(&pages, "/scenarios")["status"], 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_5xx_disallows_everything_and_4xx_allows_everything() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(503),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    // No waiting for it to come back (tests/faults.rs has the wait): disallowed at once.
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.robots_outage_s = 0;
    trawl::crawl(o).await.unwrap();
    assert_eq!(
        site.log().len(),
        1,
        "only robots.txt may be requested: {:?}",
        site.log()
    );
    let p = &pages(out.path())[0];
    assert_eq!(error_kind(p), Some("robots_disallowed"));
    assert!(
        p["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable")
    );

    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 1,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    trawl::crawl(options(&[site.url("/page/1")], out.path()))
        .await
        .unwrap();
    assert_eq!(
        site.hits("/private/from-page").len(),
        1,
        "4xx robots.txt allows all"
    );
}
