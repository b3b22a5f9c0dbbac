//! The embedded crawler on the synthetic web (`trawl_testsite::web`): six hosts on their
//! own loopback addresses, with near-copies, redirect chains and a loop, robots.txt
//! exclusions, broken links, a query trap, a slow host and erroring hosts. Judged from the
//! crawl's own `pages.jsonl` and from the server's counters: every page written and fetched
//! once, never two requests in flight to one host, nothing robots.txt excludes fetched,
//! the trap cut at its budget, the near-copies flagged; with the frontier's memory kept
//! small, so most of it waits in its spill file.

use std::collections::HashMap;

use support::{options, pages};
use trawl_testsite::web::{Web, WebConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_of_a_synthetic_web_once_and_politely() {
    let web = Web::start(WebConfig {
        pages: 6_000,
        hosts: 6,
        first_addr: [127, 2, 0, 1].into(),
        slow_every: 3,
        slow_ms: 2,
        error_every: 4,
        ..WebConfig::default()
    })
    .await
    .unwrap();
    let expected = web.config().expected();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&web.roots(), out.path());
    o.concurrency = 16;
    o.crawl.max_query_variants = 40;
    // The frontier runs thousands of URLs ahead: most of them wait in its spill file.
    o.queued_in_memory = 300;
    // The dedup gate moves to its file a sixth of the way in.
    o.gate_in_memory = 1_000;
    trawl::crawl(o).await.unwrap();
    let spill = out.path().join(trawl_store::dir::SPILL_FILE);
    assert_eq!(std::fs::metadata(spill).unwrap().len(), 0, "read through");
    let gate = out.path().join(trawl_store::gate_file::GATE_FILE);
    assert!(
        !gate.exists(),
        "the gate's file goes with the crawl's process"
    );

    let seen = web.stats();
    assert_eq!(seen.pages_fetched, expected.pages, "{seen:?}");
    assert_eq!(seen.pages_fetched_again, 0, "{seen:?}");
    assert_eq!(seen.max_in_flight_per_host, 1, "{seen:?}");
    assert_eq!(seen.private_requests, 0, "{seen:?}");
    // One trap per host, each cut at the query-variant budget.
    assert!(seen.trap_requests <= 6 * 41, "{seen:?}");
    assert_eq!(seen.robots_requests, 6, "{seen:?}");

    let pages = pages(out.path());
    let mut by_url: HashMap<String, usize> = HashMap::new();
    let (mut ok, mut failed, mut flagged) = (0, 0, 0);
    for p in &pages {
        let url = p["final_url"].as_str().unwrap();
        let Some(path) = url.splitn(4, '/').nth(3) else {
            continue;
        };
        // Broken links (404), and redirects whose target the crawl fetches anyway, are
        // records of their own, not pages of the web.
        match (path.starts_with("p/"), p["status"].as_u64()) {
            (true, Some(200)) => ok += 1,
            (true, Some(500)) => failed += 1,
            _ => continue,
        }
        *by_url.entry(url.to_string()).or_default() += 1;
        if p["duplicate_of"].is_string() {
            flagged += 1;
        }
    }
    assert!(by_url.values().all(|n| *n == 1), "a page written twice");
    assert_eq!(by_url.len() as u64, expected.pages);
    assert_eq!(ok, expected.pages_ok);
    assert_eq!(failed, expected.pages - expected.pages_ok);
    // Each near-copy differs from its original by one line; the SimHash gate flags at
    // least nine in ten (its pairs are not all within its distance).
    assert!(
        flagged * 10 >= expected.near_copies * 9,
        "{flagged} of {} near-copies flagged",
        expected.near_copies
    );
}

/// A frontier cap far below the size of the web: the crawl still ends, and every URL the
/// cap dropped (evicted, or turned away) is recorded in the crawl store, as many as the
/// report counts, none of them fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_frontier_records_every_url_it_drops() {
    let web = Web::start(WebConfig {
        pages: 800,
        hosts: 3,
        first_addr: [127, 2, 1, 1].into(),
        ..WebConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&web.roots(), out.path());
    o.crawl.max_queued = 40;
    o.queued_in_memory = 10;
    o.crawl.max_query_variants = 5;
    let (report, _) = trawl::crawl(o).await.unwrap();
    let counted = report.frontier.evicted + report.frontier.rejected_full;
    assert!(counted > 100, "the cap dropped {counted}");

    let db = rusqlite::Connection::open(out.path().join("crawl.db")).unwrap();
    let mut q = db.prepare("SELECT url FROM urls WHERE state = 3").unwrap();
    let dropped: Vec<String> = q
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(dropped.len() as i64, counted);
    let written: std::collections::HashSet<String> = pages(out.path())
        .iter()
        .map(|p| p["url"].as_str().unwrap().to_string())
        .collect();
    assert!(
        dropped.iter().all(|u| !written.contains(u)),
        "a dropped URL was fetched"
    );
    assert_eq!(web.stats().max_in_flight_per_host, 1);
}
