//! Documents a crawl reaches (PDF, DOCX, plain text, Markdown) are read into the same
//! record as a page, chunked and indexed: their words are found by search, their WARC
//! responses kept whole.

use support::documents::check_records;
use support::{options, pages};
use trawl::index::SearchArgs;
use trawl_index::Mode;
use trawl_testsite::docs::{DOCX_WORDS, MARKDOWN_WORD, PDF_WORDS, TEXT_WORD};
use trawl_testsite::{Robots, SiteConfig, TestSite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_read_recorded_and_found() {
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut o = options(&[site.url("/docs/")], &out);
    o.index.no_index = false;
    o.index.settings.embed = false;
    let (report, _) = trawl::crawl(o).await.unwrap();
    let written = pages(&out);
    check_records(&written);
    let ix = report.index.expect("indexed");
    // The index page and four documents with text (the scan and the broken file have none).
    assert_eq!(ix.pages, 5, "{ix:?}");
    let words = PDF_WORDS
        .iter()
        .chain(DOCX_WORDS.iter())
        .chain([TEXT_WORD, MARKDOWN_WORD].iter());
    for w in words {
        let args = SearchArgs {
            query: (*w).into(),
            index: out.join("index"),
            k: 3,
            mode: Mode::Text,
            json: true,
            model_dir: None,
        };
        let mut buf = Vec::new();
        trawl::index::search(&args, &mut buf).await.unwrap();
        let first = String::from_utf8_lossy(&buf);
        assert!(first.contains("/docs/"), "{w}: {first}");
    }
}
