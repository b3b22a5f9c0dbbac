//! What pages say about themselves, end to end in the embedded runtime: robots directives
//! (meta and `X-Robots-Tag`, generic and for trawl by name, another crawler's ignored) and
//! AI-usage signals (Content Signals in robots.txt, tdmrep.json, the TDM header and meta,
//! `noai`) recorded on each page; `noindex` pages kept out of the index and the export,
//! `nofollow` pages' links not followed, `noarchive` pages' markup not kept; pages whose
//! site reserves AI training left out of a training export unless the user says otherwise.

use support::policy::{NOINDEX, TRAIN_RESERVED, check_records, site_config};
use support::{options, pages};
use trawl::index::SearchArgs;
use trawl_corpus::export::{ExportOptions, Format};
use trawl_index::Mode;
use trawl_testsite::TestSite;
use trawl_testsite::policy::PAGES;

/// The URLs a full-text search for `word` finds, also-at aliases included.
async fn found(index: &std::path::Path, word: &str) -> Vec<String> {
    let args = SearchArgs {
        query: word.into(),
        index: index.to_path_buf(),
        k: 20,
        mode: Mode::Text,
        json: true,
        model_dir: None,
    };
    let mut buf = Vec::new();
    trawl::index::search(&args, &mut buf).await.unwrap();
    let mut urls = Vec::new();
    for line in String::from_utf8_lossy(&buf).lines() {
        let hit: serde_json::Value = serde_json::from_str(line).unwrap();
        urls.push(hit["url"].as_str().unwrap().to_string());
        for a in hit["also_at"].as_array().into_iter().flatten() {
            urls.push(a.as_str().unwrap().to_string());
        }
    }
    urls
}

fn export(
    from: &std::path::Path,
    out: &std::path::Path,
    include_reserved: bool,
) -> serde_json::Value {
    let opts = ExportOptions {
        from: from.to_path_buf(),
        out: out.to_path_buf(),
        format: Format::Jsonl,
        languages: Vec::new(),
        min_language_score: 0.0,
        filters: Default::default(),
        minhash_threshold: None,
        keep_duplicates: false,
        paragraph_dedup: false,
        include_reserved,
    };
    let report = trawl_corpus::export::export(&opts).unwrap();
    serde_json::to_value(report).unwrap()
}

fn exported_urls(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["url"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_recorded_indexed_and_exported_as_they_say() {
    let site = TestSite::start(site_config()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut o = options(&[site.url("/policy/")], &out);
    o.index.no_index = false;
    o.index.settings.embed = false;
    o.crawl.keep_html = true;
    let (report, _) = trawl::crawl(o).await.unwrap();
    let written = pages(&out);
    check_records(&written, site.origin());

    // noarchive: the page's markup is not kept; the others' is.
    for p in PAGES {
        let rec = support::page(&written, &format!("/policy/{}", p.name));
        assert_eq!(
            rec["raw_html"].is_string(),
            p.name != "noarchive",
            "{}",
            p.name
        );
    }
    // tdmrep.json is read once, with robots.txt, for the host.
    assert_eq!(site.hits("/.well-known/tdmrep.json").len(), 1);
    // The report counts what pages said.
    let policy = &support::report(&out)["policy"];
    assert_eq!(policy["noindex"], NOINDEX.len(), "{policy}");
    assert_eq!(policy["nofollow"], 3, "{policy}");
    assert_eq!(policy["noarchive"], 1, "{policy}");
    assert_eq!(
        policy["ai_train_reserved"],
        TRAIN_RESERVED.len(),
        "{policy}"
    );

    // The index: a noindex page is not in it (nor an alias of it); every other page is.
    let ix = report.index.expect("indexed");
    assert_eq!(ix.pages_excluded as usize, NOINDEX.len(), "{ix:?}");
    let index = out.join("index");
    for p in PAGES {
        let urls = found(&index, p.word).await;
        let here = urls
            .iter()
            .any(|u| u.ends_with(&format!("/policy/{}", p.name)));
        assert_eq!(here, !NOINDEX.contains(&p.name), "{}: {urls:?}", p.name);
    }

    // A training export leaves out noindex pages and those reserving training, and says so.
    let corpus = dir.path().join("corpus.jsonl");
    let r = export(&out, &corpus, false);
    let urls = exported_urls(&corpus);
    for p in PAGES {
        let reserved = TRAIN_RESERVED.iter().any(|(n, _)| *n == p.name);
        let kept = urls
            .iter()
            .any(|u| u.ends_with(&format!("/policy/{}", p.name)));
        assert_eq!(
            kept,
            !reserved && !NOINDEX.contains(&p.name),
            "{}: {urls:?}",
            p.name
        );
    }
    for (_, source) in TRAIN_RESERVED {
        assert!(
            r["dropped"][format!("usage:ai-train-reserved:{source}")].as_u64() >= Some(1),
            "{}",
            r["dropped"]
        );
    }
    assert_eq!(
        r["dropped"]["robots:noindex"],
        NOINDEX.len(),
        "{}",
        r["dropped"]
    );
    // The user's override keeps them, and the report records it.
    let r = export(&out, &dir.path().join("all.jsonl"), true);
    let included: u64 = r["reserved_included"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(included as usize, TRAIN_RESERVED.len(), "{r}");
    assert_eq!(
        r["dropped"]["robots:noindex"],
        NOINDEX.len(),
        "noindex stays out"
    );
}

/// A re-crawl where a page has become `noindex`: its rows leave the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_turned_noindex_leaves_the_index_on_a_recrawl() {
    let site = support::changing::versioned_site().await;
    let page = |extra: &str| {
        format!(
            "<!doctype html><html><head><title>Quetzal</title>{extra}</head><body><main>\
             <p>The quetzal is a bird of the cloud forest, green and red, with a long tail.</p>\
             </main></body></html>"
        )
    };
    site.set_page("bird", Some(&page("")), true);
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let mut o = options(&[site.url("/changing/bird")], &first);
    o.index.no_index = false;
    o.index.settings.embed = false;
    trawl::crawl(o).await.unwrap();
    assert!(!found(&first.join("index"), "quetzal").await.is_empty());

    site.set_page(
        "bird",
        Some(&page(r#"<meta name="robots" content="noindex">"#)),
        true,
    );
    let second = dir.path().join("second");
    let mut o = options(&[site.url("/changing/bird")], &second);
    o.index.no_index = false;
    o.index.settings.embed = false;
    o.since = Some(first.clone());
    let (report, _) = trawl::crawl(o).await.unwrap();
    let rec = &pages(&second)[0];
    assert_eq!(rec["robots"]["noindex"], "meta-robots", "{rec}");
    assert_eq!(
        rec["change"]["status"], "same",
        "the text did not change: {rec}"
    );
    let ix = report.index.expect("indexed");
    assert_eq!(ix.pages_removed, 1, "{ix:?}");
    assert!(
        found(&first.join("index"), "quetzal").await.is_empty(),
        "the noindex page's rows are gone"
    );
}
