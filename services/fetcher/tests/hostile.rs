//! Hostile input for what the fetcher parses: robots.txt bodies, compressed bodies, charset
//! declarations. Every call returns.

use std::io::Write;

use trawl_core::mutate::each_mutation;
use trawl_core::state::{RobotsAccess, RobotsEntry};
use trawl_fetcher::body::{decode_content, decode_html};
use trawl_fetcher::robots::HostRules;
use url::Url;

const ROBOTS: &[u8] = b"User-agent: *\nDisallow: /private/\nAllow: /private/ok$\nDisallow: /*.pdf$\n\nUser-agent: trawl\nUser-agent: other\nDisallow: /x*y\nCrawl-delay: 2.5\nSitemap: http://h/sitemap.xml\n# comment\n";

#[test]
fn robots_parsing_never_panics() {
    let urls: Vec<Url> = [
        "http://h/",
        "http://h/private/ok",
        "http://h/a.pdf?x",
        "http://h/x%2Fy",
    ]
    .iter()
    .map(|u| Url::parse(u).unwrap())
    .collect();
    each_mutation(&[ROBOTS], 5000, |m| {
        let rules = HostRules::from_entry(
            &RobotsEntry {
                access: RobotsAccess::Body(m.to_vec()),
                fetched_at_ms: 0,
            },
            "trawl",
        );
        for u in &urls {
            let _ = rules.allows(u);
        }
        let _ = rules.robots.crawl_delay();
        let _ = rules.robots.sitemaps();
    });
}

#[test]
fn content_decoding_and_charsets_never_panic() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"<html><body>hello</body></html>").unwrap();
    let gz = gz.finish().unwrap();
    let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zl.write_all(b"<p>deflate</p>").unwrap();
    let zl = zl.finish().unwrap();
    each_mutation(&[&gz, &zl], 3000, |m| {
        let _ = decode_content(m, Some("gzip"), 1 << 20);
        let _ = decode_content(m, Some("deflate"), 1 << 20);
    });
    let html: &[u8] = b"\xef\xbb\xbf<meta http-equiv=\"content-type\" content=\"text/html; charset=iso-8859-1\"><meta charset=sjis>caf\xe9";
    each_mutation(&[html], 3000, |m| {
        let _ = decode_html(m, Some("text/html; charset=\"bogus\""));
        let _ = decode_html(m, None);
    });
}
