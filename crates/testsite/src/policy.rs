//! `/policy/`: pages that say what may be done with them, one way each: robots directives
//! in a meta tag or the `X-Robots-Tag` header (generic, for trawl by name, for another
//! crawler), TDM reservations in a header or a meta tag, `noai`; and `/.well-known/tdmrep.json`
//! when [`crate::SiteConfig::tdmrep`] is set. [`PAGES`] says what each page carries.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::Shared;

/// One page of `/policy/`: its name (path `/policy/NAME`), the `X-Robots-Tag` and TDM
/// headers it is served with, and the metas in its head.
pub struct PolicyPage {
    pub name: &'static str,
    pub x_robots_tag: Option<&'static str>,
    pub tdm_reservation: Option<&'static str>,
    /// `(name, content)` metas.
    pub metas: &'static [(&'static str, &'static str)],
    /// A word found on this page only, to look for in an index.
    pub word: &'static str,
}

pub const PAGES: &[PolicyPage] = &[
    PolicyPage {
        name: "plain",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[],
        word: "quokka",
    },
    PolicyPage {
        name: "meta-noindex",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[("robots", "noindex")],
        word: "axolotl",
    },
    PolicyPage {
        name: "meta-trawl-noindex",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[("trawl", "noindex, follow")],
        word: "pangolin",
    },
    PolicyPage {
        name: "meta-other-crawler",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[("googlebot", "noindex, nofollow")],
        word: "narwhal",
    },
    PolicyPage {
        name: "header-noindex",
        x_robots_tag: Some("noindex"),
        tdm_reservation: None,
        metas: &[],
        word: "capybara",
    },
    PolicyPage {
        name: "header-trawl-noindex",
        x_robots_tag: Some("otherbot: nofollow, trawl: noindex"),
        tdm_reservation: None,
        metas: &[],
        word: "okapi",
    },
    PolicyPage {
        name: "header-none",
        x_robots_tag: Some("none"),
        tdm_reservation: None,
        metas: &[],
        word: "tapir",
    },
    PolicyPage {
        name: "meta-nofollow",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[("robots", "nofollow")],
        word: "wombat",
    },
    PolicyPage {
        name: "header-nofollow",
        x_robots_tag: Some("nofollow"),
        tdm_reservation: None,
        metas: &[],
        word: "dugong",
    },
    PolicyPage {
        name: "noarchive",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[("robots", "noarchive")],
        word: "gharial",
    },
    PolicyPage {
        name: "tdm-header",
        x_robots_tag: None,
        tdm_reservation: Some("1"),
        metas: &[],
        word: "saola",
    },
    PolicyPage {
        name: "tdm-meta",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[
            ("tdm-reservation", "1"),
            ("tdm-policy", "https://example.org/tdm"),
        ],
        word: "kakapo",
    },
    PolicyPage {
        name: "noai",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[("robots", "noai, noimageai")],
        word: "aye-aye",
    },
    PolicyPage {
        name: "reserved-by-file",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[],
        word: "markhor",
    },
    PolicyPage {
        name: "open/by-file",
        x_robots_tag: None,
        tdm_reservation: None,
        metas: &[],
        word: "takin",
    },
];

/// A tdmrep.json for these pages: `/policy/open/` not reserved, `/policy/reserved*` reserved
/// with a policy (`{origin}` is the site's).
pub const TDMREP: &str = r#"[
  {"location": "/policy/open/*", "tdm-reservation": 0},
  {"location": "/policy/reserved*", "tdm-reservation": 1, "tdm-policy": "{origin}/tdm-policy.json"}
]"#;

/// The robots.txt of a site serving these pages: search and AI input allowed, as
/// Content Signals say it.
pub const ROBOTS: &str = "User-agent: *\nContent-Signal: search=yes, ai-input=yes\nAllow: /\n";

pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/policy/", get(index))
        .route("/policy/{*name}", get(policy_page))
        .route("/.well-known/tdmrep.json", get(tdmrep))
}

async fn index() -> Response {
    let links: String = PAGES
        .iter()
        .map(|p| format!("<li><a href=\"/policy/{0}\">{0}</a></li>", p.name))
        .collect();
    html(format!(
        "<!doctype html><html><head><title>Policies</title></head><body><main>\
         <h1>Pages with policies</h1><p>Each page below says what may be done with it.</p>\
         <ul>{links}</ul></main></body></html>"
    ))
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

async fn policy_page(Path(name): Path<String>) -> Response {
    let Some(p) = PAGES.iter().find(|p| p.name == name) else {
        // The target of each page's only link: reached only if the page's links are followed.
        if let Some(from) = name.strip_prefix("linked-from/") {
            return html(format!(
                "<!doctype html><html><head><title>Linked from {from}</title></head><body>\
                 <main><p>Reached through the link of {from}.</p></main></body></html>"
            ));
        }
        return StatusCode::NOT_FOUND.into_response();
    };
    let metas: String = p
        .metas
        .iter()
        .map(|(n, c)| format!("<meta name=\"{n}\" content=\"{c}\">"))
        .collect();
    let body = format!(
        "<!doctype html><html><head><title>Policy {name}</title>{metas}</head><body><main>\
         <h1>Policy {name}</h1><p>This page is about the {word}, an animal few have seen, \
         and it says what may be done with it in its own way: {name}. The {word} lives far \
         from people and its habits are known from a handful of reports.</p>\
         <p><a href=\"/policy/linked-from/{name}\">More about the {word}</a></p></main></body></html>",
        name = p.name,
        word = p.word,
    );
    let mut resp = html(body);
    let h = resp.headers_mut();
    if let Some(v) = p.x_robots_tag.and_then(|v| v.parse().ok()) {
        h.insert("x-robots-tag", v);
    }
    if let Some(v) = p.tdm_reservation.and_then(|v| v.parse().ok()) {
        h.insert("tdm-reservation", v);
        if let Ok(v) = "https://example.org/tdm-header".parse() {
            h.insert("tdm-policy", v);
        }
    }
    resp
}

async fn tdmrep(State(s): State<Shared>) -> Response {
    match &s.cfg.tdmrep {
        Some(body) => (
            [(header::CONTENT_TYPE, "application/json")],
            body.replace("{origin}", &s.origin),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
