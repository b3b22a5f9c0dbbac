//! Hostile input: thousands of corrupted HTML pages, sitemaps and feeds; every call returns.

use trawl_core::mutate::each_mutation;
use trawl_extract::discovery::{parse_feed, parse_sitemap};
use trawl_extract::extract_html;
use url::Url;

const PAGE: &[u8] = br#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><base href="/docs/">
<title>Vec in std::vec - Rust &amp; more</title><link rel="canonical" href="https://x/vec">
<link rel="alternate" type="application/rss+xml" href="/feed.xml"><meta name="robots" content="index">
<script>if (a < b && c > d) { document.write("<p>x</p>"); }</script><style>p{}</style></head>
<body><nav class="sidebar"><ul><li><a href="a.html">A</a></li></ul></nav><main><article>
<h1>Struct <a href="struct.Vec.html">Vec</a></h1><pre class="rust"><code>pub struct Vec&lt;T&gt; { }</code></pre>
<p>A contiguous growable array type, written as <code>Vec&lt;T&gt;</code>.</p><table><tr><td>1<td>2</table>
<svg><title>icon</title></svg><noscript>enable JS</noscript><template><p>t</p></template>
<meta http-equiv="refresh" content="5; url=next.html"></article></main><footer>f</footer></body></html>"#;

const SITEMAP: &[u8] = br#"<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>http://h/a</loc><lastmod>2024-01-01</lastmod><priority>0.5</priority></url><url><loc>http://h/b?x=1&amp;y=2</loc></url></urlset>"#;
const INDEX: &[u8] = br#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>http://h/s.xml</loc></sitemap></sitemapindex>"#;
const RSS: &[u8] = br#"<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><link>http://h/</link>
<item><title>a</title><link>http://h/1</link><pubDate>Mon, 01 Jan 2024 00:00:00 GMT</pubDate></item></channel></rss>"#;
const ATOM: &[u8] = br#"<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>i</id><updated>2024-01-01T00:00:00Z</updated>
<entry><title>e</title><id>j</id><updated>2024-01-01T00:00:00Z</updated><link href="http://h/2"/></entry></feed>"#;

#[test]
fn html_extraction_never_panics() {
    let url = Url::parse("http://h/dir/page.html").unwrap();
    let mut with_text = 0;
    each_mutation(&[PAGE], 4000, |m| {
        let e = extract_html(&String::from_utf8_lossy(m), &url);
        with_text += usize::from(!e.text.is_empty());
    });
    // Most mutations leave readable text: the harness is exercising real parsing.
    assert!(with_text > 2000, "{with_text}");
}

#[test]
fn deep_nesting_and_huge_pages_return() {
    let url = Url::parse("http://h/").unwrap();
    // Deep but plausible nesting is extracted whole.
    let deep = format!(
        "<body>{}<p>deep text, with a comma.</p>{}</body>",
        "<div>".repeat(900),
        "</div>".repeat(900)
    );
    let e = extract_html(&deep, &url);
    assert!(e.text.contains("deep text"), "{}", e.text);
    // 100,000 nested boxes: the page is cut where browsers would stop nesting, instead of
    // feeding the tree builder's quadratic scope checks (and the renderer's recursion).
    let deeper = format!(
        "<body><p>Shallow text before the nesting.</p>{}<p>deep text</p>{}</body>",
        "<div>".repeat(100_000),
        "</div>".repeat(100_000)
    );
    let e = extract_html(&deeper, &url);
    assert!(e.text.contains("Shallow text"), "{}", e.text);
    assert!(!e.text.contains("deep text"));
    let nested_lists = format!(
        "<body>{}x{}</body>",
        "<ul><li>".repeat(20_000),
        "</li></ul>".repeat(20_000)
    );
    let _ = extract_html(&nested_lists, &url);
    let tables = format!("<body>{}</body>", "<table><tr><td>".repeat(20_000));
    let _ = extract_html(&tables, &url);
    // Past the size cap the page is cut, not refused.
    let para = "<p>A paragraph of running text, long enough to count as content here.</p>";
    let huge = format!(
        "<body><article>{}</article></body>",
        para.repeat(9 << 20 >> 6)
    );
    let e = extract_html(&huge, &url);
    assert!(e.text.starts_with("A paragraph"));
}

#[test]
fn sitemap_and_feed_parsers_never_panic() {
    each_mutation(&[SITEMAP, INDEX], 3000, |m| {
        let _ = parse_sitemap(m);
    });
    each_mutation(&[RSS, ATOM], 3000, |m| {
        let _ = parse_feed(m);
    });
}

#[test]
fn whole_pages_html_output_and_tag_filters_never_panic() {
    use trawl_extract::content::{Options, extract};
    let url = Url::parse("http://h/dir/page.html").unwrap();
    let selectors: &[&[u8]] = &[
        b"main > p, #lead, .post a[href^='/']",
        b"nav:not(.x) li:nth-child(2n+1)",
    ];
    let mut html_out = 0;
    each_mutation(&[PAGE], 1500, |m| {
        let page = String::from_utf8_lossy(m);
        let c = extract(
            &page,
            Some(&url),
            Options {
                main_content: m.len() % 2 == 0,
                html: true,
                ..Options::default()
            },
        );
        html_out += usize::from(c.html.as_deref().is_some_and(|h| !h.is_empty()));
    });
    assert!(html_out > 750, "{html_out}");
    // Mangled selectors are errors (or match nothing), never a panic.
    let page = String::from_utf8_lossy(PAGE);
    each_mutation(selectors, 1500, |m| {
        let sel = String::from_utf8_lossy(m).into_owned();
        let _ = trawl_extract::filter_tags(&page, std::slice::from_ref(&sel), &[]);
        let _ = trawl_extract::filter_tags(&page, &[], std::slice::from_ref(&sel));
    });
}

#[test]
fn a_pre_opened_mid_line_leaves_no_marks_in_the_text() {
    // Found by the fuzzer (fuzz_targets/extract.rs, kept as it found it): a <pre> opened
    // after text on its line.
    let data = include_bytes!("fuzz-cases/pre-mid-line.html");
    let html = String::from_utf8_lossy(data);
    let url = Url::parse("https://example.com/dir/page.html").unwrap();
    let e = extract_html(&html, &url);
    assert!(!e.text.is_empty());
    assert!(!e.text.contains(['\u{E000}', '\u{E001}']), "{:?}", e.text);
}
