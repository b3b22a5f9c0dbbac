//! Firecrawl's v1 routes, for the integrations and SDK clients that still call them:
//! `/v1/scrape`, `/v1/crawl` (status, errors, cancel), `/v1/map` and `/v1/batch/scrape`.
//! A v1 request is rewritten as the v2 request it means and answered by the same code;
//! only the shapes that differ are turned back (v1's `extract` format, its map's plain
//! links, its crawl options).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Map, Value, json};

use super::api::{self, ApiError, MapRequest, ScrapeRequest};
use super::jobs::Kind;
use super::{Answer, App, Owner};

fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match api::parse::<Value>(body)? {
        Value::Object(o) => Ok(o),
        _ => Err(ApiError::bad_request(
            "Bad Request: the body must be a JSON object",
        )),
    }
}

/// v1 scrape options as v2's: `jsonOptions`, `extract` and `changeTrackingOptions` become
/// format objects, `content` is Markdown. Answers whether the `extract` format was asked
/// (its answer is named `extract`, not `json`).
pub fn scrape_options(v1: &Map<String, Value>) -> (Map<String, Value>, bool) {
    let mut out = Map::new();
    let mut extract = false;
    for key in [
        "onlyMainContent",
        "includeTags",
        "excludeTags",
        "timeout",
        "waitFor",
        "mobile",
        "actions",
        "maxAge",
        "storeInCache",
    ] {
        if let Some(v) = v1.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v.clone());
        }
    }
    let llm = |opts: Option<&Value>| {
        let o = opts.cloned().unwrap_or(Value::Null);
        let mut f = json!({"type": "json"});
        for k in ["schema", "prompt"] {
            if let Some(v) = o.get(k).filter(|v| !v.is_null()) {
                f[k] = v.clone();
            }
        }
        f
    };
    if let Some(formats) = v1.get("formats").and_then(Value::as_array) {
        let mut v2 = Vec::new();
        for f in formats {
            let name = f.as_str().unwrap_or_default();
            let spec = match name {
                "content" => json!("markdown"),
                "json" => llm(v1.get("jsonOptions")),
                "extract" => {
                    extract = true;
                    llm(v1.get("extract"))
                }
                "changeTracking" => {
                    let o = v1
                        .get("changeTrackingOptions")
                        .cloned()
                        .unwrap_or(json!({}));
                    let mut ct = json!({"type": "changeTracking"});
                    for k in ["modes", "tag"] {
                        if let Some(v) = o.get(k).filter(|v| !v.is_null()) {
                            ct[k] = v.clone();
                        }
                    }
                    ct
                }
                _ => f.clone(),
            };
            v2.push(spec);
        }
        out.insert("formats".into(), Value::Array(v2));
    }
    (out, extract)
}

/// A v1 crawl request as v2's.
pub fn crawl_request(v1: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for key in [
        "url",
        "includePaths",
        "excludePaths",
        "limit",
        "allowExternalLinks",
        "allowSubdomains",
        "ignoreQueryParameters",
        "regexOnFullURL",
        "delay",
        "maxConcurrency",
        "deduplicateSimilarURLs",
        "webhook",
        "crawlEntireDomain",
    ] {
        if let Some(v) = v1.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(d) = v1
        .get("maxDiscoveryDepth")
        .or_else(|| v1.get("maxDepth"))
        .filter(|v| !v.is_null())
    {
        out.insert("maxDiscoveryDepth".into(), d.clone());
    }
    if !out.contains_key("crawlEntireDomain")
        && let Some(b) = v1.get("allowBackwardLinks").filter(|v| !v.is_null())
    {
        out.insert("crawlEntireDomain".into(), b.clone());
    }
    if v1.get("ignoreSitemap").and_then(Value::as_bool) == Some(true) {
        out.insert("sitemap".into(), "skip".into());
    }
    if let Some(Value::Object(so)) = v1.get("scrapeOptions") {
        out.insert("scrapeOptions".into(), Value::Object(scrape_options(so).0));
    }
    out
}

/// A v1 map request as v2's.
pub fn map_request(v1: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["url", "search", "includeSubdomains", "limit", "timeout"] {
        if let Some(v) = v1.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v.clone());
        }
    }
    let sitemap = if v1.get("sitemapOnly").and_then(Value::as_bool) == Some(true) {
        "only"
    } else if v1.get("ignoreSitemap").and_then(Value::as_bool) == Some(true) {
        "skip"
    } else {
        "include"
    };
    out.insert("sitemap".into(), sitemap.into());
    out
}

fn bytes(v: Map<String, Value>) -> Vec<u8> {
    serde_json::to_vec(&Value::Object(v)).unwrap_or_default()
}

pub(crate) async fn scrape(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let v1 = object(&body)?;
    let (mut v2, extract) = scrape_options(&v1);
    v2.insert("url".into(), v1.get("url").cloned().unwrap_or(Value::Null));
    let req: ScrapeRequest = api::parse(&bytes(v2))?;
    let mut doc = super::scrape_doc(&app, &owner, &headers, &req).await?;
    if extract
        && let Some(d) = doc.as_object_mut()
        && let Some(j) = d.remove("json")
    {
        d.insert("extract".into(), j);
    }
    Ok(axum::Json(json!({"success": true, "data": doc})))
}

pub(crate) async fn crawl(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let v2 = crawl_request(&object(&body)?);
    super::start_job(&app, Kind::Crawl, &owner, &headers, &bytes(v2), "/v1/crawl").await
}

pub(crate) async fn batch(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let v1 = object(&body)?;
    let (mut v2, _) = scrape_options(&v1);
    for key in ["urls", "webhook", "ignoreInvalidURLs", "maxConcurrency"] {
        if let Some(v) = v1.get(key).filter(|v| !v.is_null()) {
            v2.insert(key.into(), v.clone());
        }
    }
    super::start_job(
        &app,
        Kind::Batch,
        &owner,
        &headers,
        &bytes(v2),
        "/v1/batch/scrape",
    )
    .await
}

pub(crate) async fn map(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    body: Bytes,
) -> Answer {
    let v2 = map_request(&object(&body)?);
    let req: MapRequest = api::parse(&bytes(v2))?;
    let links = super::map_links(&app, &owner, req).await?;
    let links: Vec<Value> = links
        .into_iter()
        .filter_map(|l| match l {
            Value::String(s) => Some(Value::String(s)),
            Value::Object(o) => o.get("url").cloned(),
            _ => None,
        })
        .collect();
    Ok(axum::Json(json!({"success": true, "links": links})))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn v1_formats_become_v2_format_objects() {
        let (o, extract) = scrape_options(&obj(json!({
            "formats": ["markdown", "content", "json", "changeTracking", "screenshot@fullPage"],
            "jsonOptions": {"prompt": "p", "schema": {"type": "object"}},
            "changeTrackingOptions": {"modes": ["git-diff"], "tag": "t"},
            "timeout": 30000, "onlyMainContent": false, "headers": {"X": "1"}
        })));
        assert!(!extract);
        let f = &o["formats"];
        assert_eq!(f[1], "markdown");
        assert_eq!(
            f[2],
            json!({"type": "json", "prompt": "p", "schema": {"type": "object"}})
        );
        assert_eq!(
            f[3],
            json!({"type": "changeTracking", "modes": ["git-diff"], "tag": "t"})
        );
        assert_eq!(f[4], "screenshot@fullPage");
        assert_eq!(
            (o["timeout"].clone(), o["onlyMainContent"].clone()),
            (json!(30000), json!(false))
        );
        assert!(!o.contains_key("headers"));
        let (o, extract) = scrape_options(&obj(
            json!({"formats": ["extract"], "extract": {"prompt": "q"}}),
        ));
        assert!(extract);
        assert_eq!(o["formats"][0], json!({"type": "json", "prompt": "q"}));
    }

    #[test]
    fn v1_crawl_and_map_options_are_renamed() {
        let c = crawl_request(&obj(json!({
            "url": "http://h/", "maxDepth": 2, "allowBackwardLinks": true, "ignoreSitemap": true,
            "limit": 5, "scrapeOptions": {"formats": ["content"]}, "webhook": "http://h/w"
        })));
        assert_eq!(c["maxDiscoveryDepth"], 2);
        assert_eq!(c["crawlEntireDomain"], true);
        assert_eq!(c["sitemap"], "skip");
        assert_eq!(c["scrapeOptions"]["formats"][0], "markdown");
        assert_eq!(c["webhook"], "http://h/w");
        let m = map_request(&obj(
            json!({"url": "http://h/", "sitemapOnly": true, "limit": 3}),
        ));
        assert_eq!(
            (m["sitemap"].clone(), m["limit"].clone()),
            (json!("only"), json!(3))
        );
        let m = map_request(&obj(json!({"url": "http://h/", "ignoreSitemap": true})));
        assert_eq!(m["sitemap"], "skip");
    }
}
