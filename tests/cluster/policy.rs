//! What pages say about themselves, and documents, over the cluster: the service binaries
//! record the same robots directives and AI-usage signals as the embedded crawl
//! (`tests/embedded/page_policy.rs`), follow no link of a `nofollow` page, and read the
//! same documents (`tests/embedded/documents.rs`).

use support::policy::{check_records, site_config};
use support::services::{Stack, service_bins};
use trawl_testsite::TestSite;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_record_what_pages_say_of_themselves() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(site_config()).await.unwrap();
    let stack = Stack::start(&paths, &[]);
    let seed = site.url("/policy/");
    let report = stack
        .submit(&[&seed, "--allow-private", "--delay", "0"])
        .await
        .unwrap();
    assert_eq!(report["drained"], true, "{report}");
    let lines = support::all_pages(stack.out.path());
    check_records(&lines, site.origin());
    assert!(
        !site.hits("/.well-known/tdmrep.json").is_empty(),
        "tdmrep.json read with robots.txt"
    );
    stack.stop().await;
}

/// Documents over the cluster: the extractor service reads PDF, DOCX, text and Markdown
/// into the records the embedded crawl writes (`tests/embedded/documents.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_read_documents() {
    let Some(paths) = service_bins() else {
        return;
    };
    let site = TestSite::start(trawl_testsite::SiteConfig {
        robots: trawl_testsite::Robots::Status(404),
        ..Default::default()
    })
    .await
    .unwrap();
    let stack = Stack::start(&paths, &[]);
    let seed = site.url("/docs/");
    let report = stack
        .submit(&[&seed, "--allow-private", "--delay", "0"])
        .await
        .unwrap();
    assert_eq!(report["drained"], true, "{report}");
    support::documents::check_records(&support::all_pages(stack.out.path()));
    stack.stop().await;
}
