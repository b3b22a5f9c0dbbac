//! Memory stays bounded in bytes on a hostile host: pages that inflate to 48 MiB each and
//! carry 60,000 links. Its own test binary, so the process's peak resident size is this
//! crawl's.

use support::{options, pages, report};
use trawl_testsite::{Robots, SiteConfig, TestSite};

/// The process's peak resident set size, from the kernel.
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status");
    kib * 1024
}

#[test]
fn the_fetcher_keeps_what_extraction_reads() {
    assert_eq!(
        trawl_fetcher::PAGE_TEXT_MAX,
        trawl_extract::content::MAX_HTML_BYTES
    );
}

/// 30 pages of 48 MiB decoded each: 1.4 GiB of HTML in all. Bodies are cut where
/// extraction stops (8 MiB), the fetched and docs hops have byte budgets, and links past
/// 50,000 a page are counted, not followed: the crawl peaks well under 1 GiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_host_of_huge_pages_and_link_farms_stays_under_a_memory_bound() {
    const BOUND: u64 = 1 << 30;
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/farm/seed")], out.path());
    o.crawl.max_pages = 30;
    o.crawl.timeout_s = 60;
    trawl::crawl(o).await.unwrap();
    let peak = peak_rss_bytes();
    eprintln!("peak RSS {} MiB", peak >> 20);
    let ps = pages(out.path());
    assert_eq!(ps.len(), 30, "{}", report(out.path()));
    for p in &ps {
        assert_eq!(p["status"], 200, "{p}");
        assert_eq!(
            p["error"]["kind"], "body_too_large",
            "cut where extraction stops"
        );
        assert!(p["text"].as_str().unwrap().len() < 8 << 20);
    }
    let seed = &ps[0];
    assert_eq!(seed["links_found"], 60_000, "{}", seed["url"]);
    assert_eq!(seed["links_dropped"], 10_000);
    let r = report(out.path());
    assert!(
        r["frontier"]["links_dropped"].as_i64().unwrap() >= 10_000,
        "{r}"
    );
    assert!(peak < BOUND, "peak RSS {} MiB", peak >> 20);
}
