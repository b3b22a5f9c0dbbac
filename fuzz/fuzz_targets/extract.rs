//! Any bytes, as a fetched page: the extractor must return (content, Markdown, metadata and
//! links) without panicking, and what it returns must hold together.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_extract::content::{Options, extract};

fuzz_target!(|data: &[u8]| {
    let html = String::from_utf8_lossy(data);
    let url = url::Url::parse("https://example.com/dir/page.html").expect("static URL");
    let opts = Options {
        markdown: true,
        markdown_links: true,
        links: true,
        main_content: data.first().is_none_or(|b| b % 2 == 0),
        html: true,
    };
    let c = extract(&html, Some(&url), opts);
    // Every collected link is absolute.
    for l in c.links.iter().flat_map(|l| l.links.iter()) {
        assert!(url::Url::parse(l).is_ok(), "{l}");
    }
    // Plain text never carries the renderer's private markers.
    assert!(!c.text.contains(['\u{E000}', '\u{E001}']));
});
