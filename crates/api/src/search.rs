//! `/v2/search`: search over what this server crawled. The hits come from the indexes it
//! holds (the `--search-index` directories, for every key, and the index of each crawl and
//! batch job of the asking key), by the same hybrid search as `trawl search`, one result
//! per page; where a SearXNG-compatible endpoint is configured (`--search-backend`), its
//! web results are fused in by rank. `scrapeOptions` with formats scrapes each hit, as
//! Firecrawl does.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;

use super::api::{self, ApiError, ScrapeOptions};
use super::scraping;
use super::{Answer, App, Owner};

/// Chunks asked of each index per result wanted: several chunks of one page count once.
/// `trawl search -k` with `limit` times this gives the same pages in the same order.
pub const CHUNKS_PER_RESULT: usize = 4;

/// The jobs of a key whose indexes a search reads, the newest.
const JOB_INDEXES: usize = 64;

/// Rank fusion's constant (reciprocal rank fusion, as the index's hybrid search).
const RRF_K: f64 = 60.0;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SearchRequest {
    pub query: String,
    pub limit: Option<i64>,
    pub sources: Option<Vec<Value>>,
    pub include_domains: Vec<String>,
    pub exclude_domains: Vec<String>,
    /// Milliseconds.
    pub timeout: Option<u64>,
    pub scrape_options: Option<ScrapeOptions>,
}

/// One page found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub url: String,
    pub title: String,
    pub description: String,
    /// `index` (this server's) or `web` (the search backend).
    pub source: &'static str,
}

/// The indexes `owner` may search: the configured ones, then its jobs', newest first.
pub fn indexes_of(app: &App, owner: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = app.args.search_indexes.clone();
    for job in app.db.jobs_of(owner, JOB_INDEXES)? {
        let dir = app.args.data.join("jobs").join(&job.id).join("index");
        if dir.is_dir() {
            out.push(dir);
        }
    }
    out.extend(super::monitor::indexes_of(app, owner)?);
    Ok(out)
}

/// The pages of one index for `query`, best first, one per URL, at most `limit`.
pub async fn pages_of_index(
    app: &App,
    index: PathBuf,
    query: &str,
    limit: usize,
) -> anyhow::Result<Vec<Found>> {
    let q = trawl_runtime::search::SearchQuery {
        index,
        query: query.to_string(),
        k: limit * CHUNKS_PER_RESULT,
        mode: trawl_index::Mode::Hybrid,
        model_dir: app.args.settings.process.model_dir.clone(),
    };
    let found = app.searcher.search(&q).await?;
    let mut out: Vec<Found> = Vec::new();
    for h in found.hits {
        if out.len() >= limit {
            break;
        }
        if out.iter().any(|f| f.url == h.url) {
            continue;
        }
        out.push(Found {
            url: h.url,
            title: h.title,
            description: snippet(&h.text),
            source: "index",
        });
    }
    Ok(out)
}

/// A hit's text as a description: its first few lines, without Markdown's marks.
fn snippet(text: &str) -> String {
    let mut s = String::new();
    for line in text.lines() {
        let l = line
            .trim()
            .trim_start_matches(['#', '>', '-', '*', ' '])
            .trim();
        if l.is_empty() || l.starts_with("```") {
            continue;
        }
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(l);
        if s.chars().count() >= 300 {
            break;
        }
    }
    if s.chars().count() > 300 {
        let cut: String = s.chars().take(297).collect();
        return format!("{}...", cut.trim_end());
    }
    s
}

/// Lists fused by rank: an item's score is the sum of 1/(60 + rank) over the lists it is
/// in (by URL), ties kept in list order.
pub fn fuse(lists: Vec<Vec<Found>>, limit: usize) -> Vec<Found> {
    let mut scored: Vec<(f64, usize, Found)> = Vec::new();
    let mut order = 0usize;
    for list in lists {
        for (rank, f) in list.into_iter().enumerate() {
            let s = 1.0 / (RRF_K + rank as f64 + 1.0);
            if let Some(e) = scored.iter_mut().find(|e| e.2.url == f.url) {
                e.0 += s;
            } else {
                scored.push((s, order, f));
                order += 1;
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(limit).map(|e| e.2).collect()
}

fn host_matches(url: &str, domains: &[String]) -> bool {
    let Some(host) = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    else {
        return false;
    };
    domains.iter().any(|d| {
        let d = d.trim().trim_start_matches("*.").to_ascii_lowercase();
        host == d || host.ends_with(&format!(".{d}"))
    })
}

/// The web search backend's results (a SearXNG JSON endpoint: `?q=...&format=json` gives
/// `{"results": [{url, title, content}]}`).
async fn web(
    app: &App,
    query: &str,
    limit: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<Found>> {
    let Some(endpoint) = &app.args.search_backend else {
        return Ok(Vec::new());
    };
    let client = reqwest::Client::builder().timeout(timeout).build()?;
    let mut url = url::Url::parse(endpoint)?;
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("format", "json");
    let r = client.get(url).send().await?;
    anyhow::ensure!(
        r.status().is_success(),
        "the search backend answered {}",
        r.status()
    );
    let body: Value = serde_json::from_slice(&r.bytes().await?)?;
    let mut out = Vec::new();
    for item in body["results"].as_array().into_iter().flatten() {
        let Some(url) = item["url"].as_str() else {
            continue;
        };
        if api::http_url(url).is_err() || out.iter().any(|f: &Found| f.url == url) {
            continue;
        }
        out.push(Found {
            url: url.to_string(),
            title: item["title"].as_str().unwrap_or_default().to_string(),
            description: item["content"].as_str().unwrap_or_default().to_string(),
            source: "web",
        });
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

/// What a search request asks, checked: the query, the results wanted, whether web
/// results are wanted at all.
fn check(req: &SearchRequest) -> Result<(usize, bool), ApiError> {
    if req.query.trim().is_empty() {
        return Err(ApiError::bad_request(
            "Bad Request: query must not be empty",
        ));
    }
    let limit = match req.limit {
        None => 5,
        Some(n) if (1..=100).contains(&n) => n as usize,
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "Bad Request: limit must be 1 to 100, not {n}"
            )));
        }
    };
    if !req.include_domains.is_empty() && !req.exclude_domains.is_empty() {
        return Err(ApiError::bad_request(
            "Bad Request: includeDomains and excludeDomains cannot both be given",
        ));
    }
    let names: Vec<String> = req
        .sources
        .iter()
        .flatten()
        .filter_map(|s| match s {
            Value::String(n) => Some(n.clone()),
            Value::Object(o) => o.get("type").and_then(Value::as_str).map(String::from),
            _ => None,
        })
        .collect();
    let web = names.is_empty() || names.iter().any(|n| n == "web");
    Ok((limit, web))
}

/// The query's pages, fused over every index of the key and the web backend.
pub async fn find(
    app: &Arc<App>,
    owner: &str,
    query: &str,
    limit: usize,
    timeout: Duration,
) -> Result<(Vec<Found>, Vec<String>), ApiError> {
    let mut warnings = Vec::new();
    let indexes = {
        let app = app.clone();
        let owner = owner.to_string();
        tokio::task::spawn_blocking(move || indexes_of(&app, &owner))
            .await
            .map_err(ApiError::internal)??
    };
    let mut lists = Vec::new();
    for ix in indexes {
        match pages_of_index(app, ix.clone(), query, limit).await {
            Ok(l) => lists.push(l),
            Err(e) => {
                tracing::warn!(index = %ix.display(), error = %format!("{e:#}"), "an index could not be searched");
                warnings.push(format!(
                    "the index {} could not be searched: {e:#}",
                    ix.display()
                ));
            }
        }
    }
    match web(app, query, limit, timeout).await {
        Ok(l) if !l.is_empty() => lists.push(l),
        Ok(_) => {}
        Err(e) => warnings.push(format!("the web search backend failed: {e:#}")),
    }
    Ok((fuse(lists, limit), warnings))
}

/// `/v2/search`'s answer.
pub async fn search(
    app: &Arc<App>,
    owner: &str,
    body: &[u8],
    origin: &str,
) -> Result<Value, ApiError> {
    let req: SearchRequest = api::parse(body)?;
    let (limit, wants_web) = check(&req)?;
    let opts = req
        .scrape_options
        .as_ref()
        .filter(|o| o.formats.as_ref().is_some_and(|f| !f.is_empty()))
        .map(ScrapeOptions::resolve)
        .transpose()?;
    let timeout = Duration::from_millis(req.timeout.unwrap_or(60_000).clamp(1_000, 300_000));
    let mut data = json!({"web": []});
    if !wants_web {
        let mut out = json!({"success": true, "data": data, "creditsUsed": 0});
        out["warning"] =
            "trawl searches web pages only (its indexes and the web backend): no news or images"
                .into();
        return Ok(out);
    }
    // More are asked than wanted, so the domain filters still leave `limit`.
    let filtered = !req.include_domains.is_empty() || !req.exclude_domains.is_empty();
    let ask = if filtered {
        (limit * 4).min(400)
    } else {
        limit
    };
    let (mut found, mut warnings) = find(app, owner, &req.query, ask, timeout).await?;
    if !req.include_domains.is_empty() {
        found.retain(|f| host_matches(&f.url, &req.include_domains));
    }
    if !req.exclude_domains.is_empty() {
        found.retain(|f| !host_matches(&f.url, &req.exclude_domains));
    }
    found.truncate(limit);
    let mut web = Vec::new();
    for (i, f) in found.iter().enumerate() {
        let mut item = Map::new();
        item.insert("url".into(), f.url.clone().into());
        item.insert("title".into(), f.title.clone().into());
        item.insert("description".into(), f.description.clone().into());
        item.insert("position".into(), (i + 1).into());
        item.insert("source".into(), f.source.into());
        web.push(item);
    }
    if let Some(opts) = &opts {
        scrape_hits(app, owner, origin, opts, timeout, &mut web, &mut warnings).await;
    }
    let credits = web.len();
    data["web"] = Value::Array(web.into_iter().map(Value::Object).collect());
    app.usage.spend(owner, credits as u64);
    let mut out = json!({"success": true, "data": data, "creditsUsed": credits});
    if !warnings.is_empty() {
        out["warning"] = warnings.join("; ").into();
    }
    Ok(out)
}

/// Each hit scraped with the request's options (four at a time), its document merged into
/// the result; a hit that fails keeps its plain result and adds a warning.
async fn scrape_hits(
    app: &Arc<App>,
    owner: &str,
    origin: &str,
    opts: &api::PageOptions,
    timeout: Duration,
    web: &mut [Map<String, Value>],
    warnings: &mut Vec<String>,
) {
    use futures_util::StreamExt;
    let urls: Vec<String> = web
        .iter()
        .map(|w| w["url"].as_str().unwrap_or_default().to_string())
        .collect();
    let docs: Vec<Result<Value, ApiError>> = futures_util::stream::iter(urls)
        .map(|u: String| async move {
            let url = api::http_url(&u)?;
            let ask = scraping::Ask {
                source_url: &u,
                url: &url,
                opts,
                timeout: Some(timeout),
                owner,
                origin,
            };
            scraping::scrape(app, ask).await
        })
        .buffered(4)
        .collect()
        .await;
    for (item, doc) in web.iter_mut().zip(docs) {
        match doc {
            Ok(Value::Object(d)) => {
                for (k, v) in d {
                    item.entry(k).or_insert(v);
                }
            }
            Ok(_) => {}
            Err(e) => warnings.push(format!(
                "{} could not be scraped: {}",
                item["url"], e.message
            )),
        }
    }
}

/// `POST /v2/search`.
pub(crate) async fn route(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    app.usage.allow(&owner).await?;
    let _slot = app.slot(&owner)?;
    let origin = super::job_url(&headers, "");
    Ok(axum::Json(search(&app, &owner, &body, &origin).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(url: &str) -> Found {
        Found {
            url: url.into(),
            title: String::new(),
            description: String::new(),
            source: "index",
        }
    }

    #[test]
    fn fusion_keeps_one_list_in_order_and_rewards_agreement() {
        let one = fuse(vec![vec![f("a"), f("b"), f("c")]], 2);
        assert_eq!(
            one.iter().map(|x| x.url.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let two = fuse(vec![vec![f("a"), f("b")], vec![f("b"), f("c")]], 10);
        assert_eq!(
            two.iter().map(|x| x.url.as_str()).collect::<Vec<_>>(),
            ["b", "a", "c"]
        );
    }

    #[test]
    fn requests_are_checked() {
        let r = |v: Value| check(&serde_json::from_value(v).unwrap());
        assert_eq!(r(json!({"query": "x"})).unwrap(), (5, true));
        assert_eq!(
            r(json!({"query": "x", "limit": 100, "sources": ["web"]})).unwrap(),
            (100, true)
        );
        assert_eq!(
            r(json!({"query": "x", "sources": [{"type": "news"}]})).unwrap(),
            (5, false)
        );
        for bad in [
            json!({"query": " "}),
            json!({"query": "x", "limit": 0}),
            json!({"query": "x", "limit": 101}),
            json!({"query": "x", "includeDomains": ["a"], "excludeDomains": ["b"]}),
        ] {
            assert!(r(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn domains_match_hosts_and_subdomains() {
        let d = vec!["example.org".to_string()];
        assert!(host_matches("https://example.org/a", &d));
        assert!(host_matches("https://docs.example.org/a", &d));
        assert!(!host_matches("https://badexample.org/a", &d));
        assert!(!host_matches("not a url", &d));
    }

    #[test]
    fn snippets_are_short_plain_text() {
        let s = snippet("# Title\n\n```rust\ncode\n```\n- item one\n> quote");
        assert_eq!(s, "Title code item one quote");
        let long = "word ".repeat(200);
        assert!(snippet(&long).chars().count() <= 300);
    }
}
