//! Near-duplicate pages are kept once; the copies are recorded as aliases in pages.jsonl.

use support::{options, page, pages, report};
use trawl_testsite::{Robots, SiteConfig, TestSite};

fn seeds(site: &TestSite) -> Vec<String> {
    ["original", "copy", "near", "other"]
        .iter()
        .map(|n| site.url(&format!("/dup/{n}")))
        .collect()
}

/// The four versions of an article, crawled in seed order: one fetch at a time and spaced,
/// so each page is through the gate before the next arrives and "first" is the seed order.
fn in_seed_order(site: &TestSite, out: &std::path::Path) -> trawl_runtime::CrawlPlan {
    let mut o = options(&seeds(site), out);
    o.crawl.max_depth = 0;
    o.concurrency = 1;
    o.crawl.delay_ms = 150;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_point_at_the_first_page_kept() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = in_seed_order(&site, out.path());
    // The SimHash gate (no longer the default). One word changed in 400 moves this text's
    // SimHash by 3 bits; the default distance (< 3) is for the corpus evaluation to
    // settle, this test is about the plumbing.
    o.crawl.dedup_method = trawl_core::settings::DedupMethod::Simhash;
    o.crawl.dedup_distance = 3;
    let (rep, _) = trawl::crawl(o).await.unwrap();
    let pages = pages(out.path());
    let original = page(&pages, "/dup/original");
    assert!(original["duplicate_of"].is_null(), "{original}");
    assert_eq!(original["simhash"].as_str().unwrap().len(), 16);
    let copy = page(&pages, "/dup/copy");
    assert!(
        copy["duplicate_of"]
            .as_str()
            .unwrap()
            .ends_with("/dup/original"),
        "{copy}"
    );
    assert_eq!(copy["distance"], 0);
    let near = page(&pages, "/dup/near");
    assert!(
        near["duplicate_of"]
            .as_str()
            .unwrap()
            .ends_with("/dup/original"),
        "{near}"
    );
    let d = near["distance"].as_u64().unwrap();
    assert!(
        (1..=3).contains(&d),
        "one word in 400 changed: distance {d}"
    );
    assert!(page(&pages, "/dup/other")["duplicate_of"].is_null());
    // Nothing lost: the copies keep their own record and text.
    assert!(!near["text"].as_str().unwrap().is_empty());
    assert_eq!(rep.duplicates.exact, 1);
    assert_eq!(rep.duplicates.near, 1);
    assert_eq!(report(out.path())["duplicates"]["near"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_minhash_gate_names_copies_with_their_similarity() {
    assert_eq!(
        trawl_core::settings::CrawlSettings::default().dedup_method,
        trawl_core::settings::DedupMethod::Minhash
    );
    // In memory, and in its file (gate.db) from the first page on: the same verdicts.
    for gate_in_memory in [200_000, 0] {
        minhash_crawl(gate_in_memory).await;
    }
}

async fn minhash_crawl(gate_in_memory: usize) {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = in_seed_order(&site, out.path());
    o.gate_in_memory = gate_in_memory;
    let (rep, _) = trawl::crawl(o).await.unwrap();
    let pages = pages(out.path());
    let original = page(&pages, "/dup/original");
    assert!(original["duplicate_of"].is_null(), "{original}");
    // The copy's text is the original's (the aside is chrome): every group of the sketch is
    // equal. One word of 400 changed breaks 5 of ~396 5-grams: Jaccard about 0.975.
    let copy = page(&pages, "/dup/copy");
    assert!(
        copy["duplicate_of"]
            .as_str()
            .unwrap()
            .ends_with("/dup/original"),
        "{copy}"
    );
    assert_eq!(copy["similarity"].as_f64().unwrap(), 1.0, "{copy}");
    assert!(copy["distance"].is_null(), "{copy}");
    // The record's SimHash is there whichever gate ran.
    assert_eq!(copy["simhash"].as_str().unwrap().len(), 16);
    let near = page(&pages, "/dup/near");
    let of = near["duplicate_of"].as_str().unwrap();
    assert!(
        of.ends_with("/dup/original") || of.ends_with("/dup/copy"),
        "{near}"
    );
    let s = near["similarity"].as_f64().unwrap();
    assert!(
        (0.93..1.0).contains(&s),
        "one word in 400 changed: estimate {s}"
    );
    assert!(page(&pages, "/dup/other")["duplicate_of"].is_null());
    assert_eq!(rep.duplicates.near, 2);
    assert_eq!(report(out.path())["duplicates"]["near"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_dedup_keeps_everything() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&seeds(&site), out.path());
    o.crawl.max_depth = 0;
    o.crawl.dedup = false;
    trawl::crawl(o).await.unwrap();
    assert!(
        pages(out.path())
            .iter()
            .all(|p| p["duplicate_of"].is_null())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_repeated_lines_are_dropped_once_known() {
    // The posts share two paragraphs around one of their own, and are crawled in order,
    // one leading to the next.
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        pages: 8,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/blog/1")], out.path());
    o.crawl.boilerplate_min_pages = 3;
    trawl::crawl(o).await.unwrap();
    let all = pages(out.path());
    let post = |n: u32| {
        all.iter()
            .find(|p| p["url"].as_str().unwrap().ends_with(&format!("/blog/{n}")))
            .unwrap()
    };
    for n in 1..=3 {
        let p = post(n);
        assert!(
            p["text"]
                .as_str()
                .unwrap()
                .contains("Subscribe to our newsletter"),
            "{p}"
        );
        assert!(p["boilerplate_lines"].is_null());
    }
    for n in 4..=8 {
        let p = post(n);
        let text = p["text"].as_str().unwrap();
        assert!(!text.contains("Subscribe to our newsletter"), "{text}");
        assert!(!text.contains("written by volunteers"), "{text}");
        assert!(
            text.contains(&format!("Post {n} is about topic number {n}")),
            "{text}"
        );
        // The "Read on" line is the same on every post but the last, which has none.
        assert!(!text.contains("Read on"), "{text}");
        assert_eq!(p["boilerplate_lines"], if n < 8 { 3 } else { 2 }, "{p}");
    }
}
