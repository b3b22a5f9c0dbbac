//! Hostile input for what the fetcher parses: robots.txt bodies (with their Content
//! Signals) and tdmrep.json. Every call returns.
//! (Compressed bodies and charset declarations: `crates/body/tests/hostile.rs`.)

use trawl_core::mutate::each_mutation;
use trawl_core::state::{RobotsAccess, RobotsEntry};
use trawl_fetcher::robots::HostRules;
use url::Url;

const ROBOTS: &[u8] = b"User-agent: *\nDisallow: /private/\nAllow: /private/ok$\nDisallow: /*.pdf$\n\nUser-agent: trawl\nUser-agent: other\nDisallow: /x*y\nCrawl-delay: 2.5\nSitemap: http://h/sitemap.xml\n# comment\nContent-Signal: search=yes, ai-train=no\n";

const TDMREP: &[u8] = br#"[{"location": "/open/*", "tdm-reservation": 0}, {"location": "/*.pdf$", "tdm-reservation": 1, "tdm-policy": "http://h/p.json"}]"#;

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
                tdmrep: Some(m.to_vec()),
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
fn tdmrep_parsing_never_panics() {
    let urls: Vec<Url> = ["http://h/", "http://h/open/a.pdf", "http://h/b.pdf"]
        .iter()
        .map(|u| Url::parse(u).unwrap())
        .collect();
    each_mutation(&[TDMREP], 5000, |m| {
        let rules = HostRules::from_entry(
            &RobotsEntry {
                access: RobotsAccess::Unavailable,
                fetched_at_ms: 0,
                tdmrep: Some(m.to_vec()),
            },
            "trawl",
        );
        for u in &urls {
            let _ = rules.usage(u);
        }
    });
}
