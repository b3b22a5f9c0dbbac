//! What a crawl of the test site's `/docs/` must record, whichever runtime ran it: each
//! document's text, title and metadata, its kind and pages, and why a broken one has none.

use serde_json::Value;
use trawl_testsite::docs::{DOCX_WORDS, MARKDOWN_WORD, PDF_WORDS, TEXT_WORD};

pub fn check_records(pages: &[Value]) {
    let guide = crate::page(pages, "/docs/guide.pdf");
    assert_eq!(guide["document"]["kind"], "pdf", "{guide}");
    assert_eq!(guide["document"]["pages"], 2, "{guide}");
    assert_eq!(guide["title"], "A guide to burrowing animals");
    assert_eq!(guide["meta"]["author"], "Ada Lovelace");
    assert_eq!(guide["meta"]["published"], "2024-03-15T09:30:00+01:00");
    for w in PDF_WORDS {
        assert!(guide["text"].as_str().unwrap().contains(w), "{guide}");
    }
    assert!(guide["error"].is_null(), "{guide}");

    let scan = crate::page(pages, "/docs/scan.pdf");
    assert_eq!(scan["document"]["kind"], "pdf", "{scan}");
    assert_eq!(scan["document"]["scanned_pages"], 1, "{scan}");

    let broken = crate::page(pages, "/docs/broken.pdf");
    assert_eq!(broken["error"]["kind"], "document_unreadable", "{broken}");
    assert_eq!(broken["document"]["kind"], "pdf", "{broken}");

    let report = crate::page(pages, "/docs/report.docx");
    assert_eq!(report["document"]["kind"], "docx", "{report}");
    assert_eq!(report["title"], "Small cats");
    assert_eq!(report["meta"]["author"], "Jane Goodall");
    let md = report["markdown"].as_str().unwrap();
    assert!(md.contains("# The ocelot"), "{md}");
    for w in DOCX_WORDS {
        assert!(report["text"].as_str().unwrap().contains(w), "{report}");
    }

    let notes = crate::page(pages, "/docs/notes.txt");
    assert_eq!(notes["document"]["kind"], "text", "{notes}");
    assert_eq!(notes["title"], "Field notes");
    assert!(notes["text"].as_str().unwrap().contains(TEXT_WORD));

    let readme = crate::page(pages, "/docs/README.md");
    assert_eq!(readme["document"]["kind"], "markdown", "{readme}");
    assert_eq!(readme["title"], "Marsupials");
    let text = readme["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("The {MARKDOWN_WORD} is a carnivorous marsupial")),
        "{text}"
    );
    for p in [guide, report, notes, readme] {
        assert!(
            p["simhash"].is_string(),
            "documents go through the dedup gate: {p}"
        );
    }
}
