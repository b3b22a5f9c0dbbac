//! A whole crawl of the test site: what is fetched, what is not, and what is written.

use support::{error_kind, options, page, pages, report};
use trawl_testsite::{SiteConfig, TestSite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawls_the_site_once_per_url_and_honours_robots_and_scope() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let (rep, outputs) = trawl::crawl(options(&[site.url("/")], out.path()))
        .await
        .unwrap();

    // Each chain page fetched exactly once, though every page links to variants of itself
    // (fragment, tracking parameters, upper-case scheme).
    for n in 1..=5 {
        let hits = site.hits(&format!("/page/{n}"));
        assert_eq!(
            hits.len(),
            1,
            "/page/{n} fetched {} times: {hits:?}",
            hits.len()
        );
    }
    // robots.txt: fetched once, and the disallowed paths never.
    assert_eq!(site.hits("/robots.txt").len(), 1);
    assert!(
        site.hits("/private/").is_empty(),
        "a disallowed path was fetched"
    );
    // Out of scope (another host name for the same server) never fetched.
    assert!(site.log().iter().all(|e| e.host.starts_with("127.0.0.1")));
    // The Sitemap: line of robots.txt led to the index, the gzip and the text sitemaps.
    for path in ["/sitemap.xml", "/sitemap-pages.xml.gz", "/sitemap.txt"] {
        assert_eq!(site.hits(path).len(), 1, "{path}");
    }
    for n in 1..=5 {
        assert_eq!(
            site.hits(&format!("/sm/{n}")).len(),
            1,
            "/sm/{n} from the sitemaps"
        );
    }

    let pages = pages(out.path());
    let p1 = page(&pages, "/page/1");
    assert_eq!(p1["status"], 200);
    assert_eq!(p1["title"], "Page 1");
    assert!(
        p1["text"]
            .as_str()
            .unwrap()
            .contains("This is page number 1 of the chain.")
    );
    assert!(!p1["text"].as_str().unwrap().contains("Test site footer"));
    assert_eq!(p1["depth"], 1);
    assert_eq!(p1["content_type"], "text/html; charset=utf-8");
    assert!(p1["fetched_at"].as_str().unwrap().ends_with('Z'));
    assert!(p1["links_found"].as_u64().unwrap() >= 5);
    assert_eq!(p1["redirects"][0]["status"], 200);
    // Links robots.txt disallows are turned away before admission: counted, no line.
    assert!(
        !pages
            .iter()
            .any(|p| p["url"].as_str().unwrap().contains("/private/")),
        "a disallowed link was admitted: {:?}",
        pages
            .iter()
            .filter(|p| p["url"].as_str().unwrap().contains("/private/"))
            .collect::<Vec<_>>()
    );

    // One record per fetched URL, no duplicates.
    let mut urls: Vec<&str> = pages.iter().map(|p| p["url"].as_str().unwrap()).collect();
    let n = urls.len();
    urls.sort();
    urls.dedup();
    assert_eq!(urls.len(), n, "duplicate records in pages.jsonl");

    let r = report(out.path());
    assert_eq!(r["pages"].as_i64().unwrap() as usize, pages.len());
    assert_eq!(rep.pages as usize, pages.len());
    assert!(r["robots_blocked"].as_i64().unwrap() >= 2, "{r}");
    assert!(
        r["frontier"]["robots_blocked"].as_i64().unwrap() >= 2,
        "{r}"
    );
    assert!(r["out_of_scope"].as_i64().unwrap() >= 1, "{r}");
    assert_eq!(
        r["status"]["2xx"].as_i64().unwrap() as usize,
        site.log()
            .iter()
            .filter(|e| e.status == 200 && e.target != "/robots.txt")
            .count()
    );
    assert!(r["bytes"].as_i64().unwrap() > 1000);
    assert!(r["pages_per_s"].as_f64().unwrap() > 0.0);
    assert!(!outputs.warc_files.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_unless_allowed() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    // An IP literal, and a name that resolves to loopback (checked after DNS resolution).
    let by_name = site.url("/page/2").replace("127.0.0.1", "localhost");
    let mut o = options(&[site.url("/page/1"), by_name], out.path());
    o.crawl.allow_private = false;
    trawl::crawl(o).await.unwrap();
    assert!(
        site.log().is_empty(),
        "no request may reach a loopback address: {:?}",
        site.log()
    );
    let pages = pages(out.path());
    assert_eq!(pages.len(), 2);
    for p in &pages {
        assert_eq!(error_kind(p), Some("private_address"), "{p}");
    }
    for p in &pages {
        assert!(
            p["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--allow-private"),
            "{p}"
        );
    }
    let named = page(&pages, "/page/2");
    assert!(
        named["error"]["message"]
            .as_str()
            .unwrap()
            .contains("localhost"),
        "{named}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_depth_and_max_pages_bound_the_crawl() {
    let site = TestSite::start(SiteConfig {
        pages: 50,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/page/1")], out.path());
    o.crawl.max_depth = 3;
    trawl::crawl(o).await.unwrap();
    assert_eq!(site.hits("/page/4").len(), 1);
    assert!(
        site.hits("/page/5").is_empty(),
        "depth 4 must not be fetched"
    );

    let out2 = tempfile::tempdir().unwrap();
    let site2 = TestSite::start(SiteConfig {
        pages: 50,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let mut o = options(&[site2.url("/page/1")], out2.path());
    o.crawl.max_pages = 7;
    let (rep, _) = trawl::crawl(o).await.unwrap();
    // Sitemaps are not pages: the budget counts pages alone, fetched or robots-blocked.
    let page_records = pages(out2.path())
        .into_iter()
        .filter(|p| p["kind"] == "page")
        .count();
    assert_eq!(page_records, 7);
    let fetched = site2
        .log()
        .iter()
        .filter(|e| e.target.starts_with("/page/") || e.target == "/")
        .count();
    assert!(fetched <= 7, "{:?}", site2.log());
    assert!(rep.frontier.max_pages_reached > 0);
}

#[tokio::test]
async fn bad_seeds_are_clear_errors() {
    let out = tempfile::tempdir().unwrap();
    let err = trawl::crawl(options(&["ftp://example.org/".into()], out.path()))
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("unsupported scheme"), "{err:#}");
    let err = trawl::crawl(options(&[], out.path())).await.unwrap_err();
    assert!(format!("{err:#}").contains("nothing to crawl"), "{err:#}");
}
