//! What a crawl of the test site's `/policy/` pages must record, whichever runtime ran it:
//! each page's robots directives and AI-usage signals with their sources, and which pages'
//! links were followed.

use serde_json::{Value, json};
use trawl_testsite::policy::PAGES;

/// The test site's config for these pages: Content Signals in robots.txt, tdmrep.json.
pub fn site_config() -> trawl_testsite::SiteConfig {
    trawl_testsite::SiteConfig {
        robots: trawl_testsite::Robots::Body(trawl_testsite::policy::ROBOTS.into()),
        tdmrep: Some(trawl_testsite::policy::TDMREP.into()),
        ..Default::default()
    }
}

/// The pages whose links must not be followed: `nofollow` (or `none`) addressed to us.
pub const NOFOLLOW: [&str; 3] = ["header-none", "meta-nofollow", "header-nofollow"];

/// The pages recorded `noindex`: never in the index nor an export.
pub const NOINDEX: [&str; 5] = [
    "meta-noindex",
    "meta-trawl-noindex",
    "header-noindex",
    "header-trawl-noindex",
    "header-none",
];

/// The pages whose site reserves AI training, with the source that said so.
pub const TRAIN_RESERVED: [(&str, &str); 4] = [
    ("tdm-header", "tdm-header"),
    ("tdm-meta", "tdm-meta"),
    ("noai", "meta-robots"),
    ("reserved-by-file", "tdmrep-json"),
];

/// The robots directives each page's record must carry (sources by directive).
fn directives(name: &str) -> Value {
    match name {
        "meta-noindex" | "meta-trawl-noindex" => json!({"noindex": "meta-robots"}),
        "header-noindex" | "header-trawl-noindex" => json!({"noindex": "x-robots-tag"}),
        "header-none" => json!({"noindex": "x-robots-tag", "nofollow": "x-robots-tag"}),
        "meta-nofollow" => json!({"nofollow": "meta-robots"}),
        "header-nofollow" => json!({"nofollow": "x-robots-tag"}),
        "noarchive" => json!({"noarchive": "meta-robots"}),
        "noai" => json!({"noai": "meta-robots", "noimageai": "meta-robots"}),
        _ => Value::Null,
    }
}

/// The `ai_train` signal each page's record must carry.
fn ai_train(name: &str, origin: &str) -> Value {
    match name {
        "tdm-header" => json!({"signal": "reserved", "source": "tdm-header",
            "policy": "https://example.org/tdm-header"}),
        "tdm-meta" => json!({"signal": "reserved", "source": "tdm-meta",
            "policy": "https://example.org/tdm"}),
        "noai" => json!({"signal": "reserved", "source": "meta-robots"}),
        "reserved-by-file" => json!({"signal": "reserved", "source": "tdmrep-json",
            "policy": format!("{origin}/tdm-policy.json")}),
        "open/by-file" => json!({"signal": "allowed", "source": "tdmrep-json"}),
        _ => json!({"signal": "unknown"}),
    }
}

/// Checks every `/policy/` record in `pages` (a crawl of `origin`'s `/policy/`).
pub fn check_records(pages: &[Value], origin: &str) {
    let allowed = json!({"signal": "allowed", "source": "content-signal"});
    for p in PAGES {
        let rec = crate::page(pages, &format!("/policy/{}", p.name));
        assert_eq!(rec["status"], 200, "{rec}");
        assert_eq!(rec["robots"], directives(p.name), "{}: {rec}", p.name);
        let usage = &rec["usage"];
        assert_eq!(usage["search"], allowed, "{}: {usage}", p.name);
        assert_eq!(usage["ai_input"], allowed, "{}: {usage}", p.name);
        assert_eq!(usage["ai_train"], ai_train(p.name, origin), "{}", p.name);
        assert!(
            rec["text"].as_str().unwrap().contains(p.word),
            "a noindex page is still extracted and recorded: {rec}"
        );
        let linked = pages.iter().any(|r| {
            r["url"]
                .as_str()
                .is_some_and(|u| u.ends_with(&format!("/policy/linked-from/{}", p.name)))
        });
        assert_eq!(
            linked,
            !NOFOLLOW.contains(&p.name),
            "{}: its link followed or not as its directives say",
            p.name
        );
        assert!(
            rec["duplicate_of"].is_null(),
            "no copies here: {}",
            rec["duplicate_of"]
        );
    }
}
