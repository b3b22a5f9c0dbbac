//! `/v2/extract`: several pages read into one JSON object by the configured model, as an
//! async job (`processing`, then `completed` with its `data` or `failed` with its
//! `error`), kept in `serve.db` so that its answer outlives a restart and a job a stop
//! interrupted runs again at start-up.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use super::api::{self, ApiError, FormatSpec, JsonFormat, ScrapeOptions};
use super::{App, llm, map, scraping};

/// URLs one extract may name (a `/*` wildcard counts as one).
const MAX_URLS: usize = 100;

/// Pages a `/*` wildcard is read as, found by `/v2/map`'s means.
const WILDCARD_PAGES: usize = 20;

/// The longest an extract may run, its pages and its answer.
const EXTRACT_TIMEOUT: Duration = Duration::from_secs(900);

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtractRequest {
    pub urls: Vec<String>,
    pub prompt: Option<String>,
    pub schema: Option<Value>,
    pub system_prompt: Option<String>,
    pub show_sources: bool,
    pub scrape_options: Option<ScrapeOptions>,
    #[serde(rename = "ignoreInvalidURLs")]
    pub ignore_invalid_urls: bool,
    pub enable_web_search: bool,
}

/// The request checked: its valid URLs and those left out.
fn check(app: &App, r: &ExtractRequest) -> Result<(Vec<String>, Vec<String>), ApiError> {
    if app.llm.is_none() {
        return Err(llm::unconfigured());
    }
    if r.enable_web_search {
        return Err(ApiError::bad_request(
            "Bad Request: trawl serve has no web search: enableWebSearch must be false",
        ));
    }
    let prompt = r.prompt.as_deref().is_some_and(|p| !p.trim().is_empty());
    let schema = r.schema.as_ref().filter(|s| !s.is_null());
    if !prompt && schema.is_none() {
        return Err(ApiError::bad_request(
            "Bad Request: an extract needs a prompt or a schema",
        ));
    }
    if let Some(s) = schema {
        llm::check_schema(s)?;
    }
    if let Some(o) = &r.scrape_options
        && o.resolve()?.script.is_some()
        && app.browser.is_none()
    {
        return Err(super::browser::unavailable());
    }
    if r.urls.len() > MAX_URLS {
        return Err(ApiError::bad_request(format!(
            "Bad Request: at most {MAX_URLS} URLs, not {}",
            r.urls.len()
        )));
    }
    let (mut valid, mut invalid) = (Vec::new(), Vec::new());
    for u in &r.urls {
        let bare = u.trim().strip_suffix("/*").unwrap_or(u.trim());
        match api::http_url(bare) {
            Ok(_) => valid.push(u.trim().to_string()),
            Err(e) if !r.ignore_invalid_urls => return Err(e),
            Err(_) => invalid.push(u.clone()),
        }
    }
    if valid.is_empty() {
        return Err(ApiError::bad_request(
            "Bad Request: no valid URL to extract from",
        ));
    }
    Ok((valid, invalid))
}

/// Starts an extract: its id and the URLs left out.
pub fn start(app: &Arc<App>, owner: &str, body: &[u8], origin: &str) -> Result<Value, ApiError> {
    let r: ExtractRequest = api::parse(body)?;
    let (_, invalid) = check(app, &r)?;
    let id = uuid::Uuid::new_v4().to_string();
    app.db
        .insert_extract(&id, owner, &String::from_utf8_lossy(body))
        .map_err(ApiError::internal)?;
    spawn(app, id.clone(), owner.to_string(), r, origin.to_string());
    let mut out = json!({"success": true, "id": id});
    if !invalid.is_empty() {
        out["invalidURLs"] = invalid.into();
    }
    Ok(out)
}

/// Extracts a stop left `processing` run again.
pub fn resume(app: &Arc<App>) -> anyhow::Result<usize> {
    let rows = app.db.unfinished_extracts()?;
    let n = rows.len();
    for row in rows {
        match api::parse::<ExtractRequest>(row.request.as_bytes()) {
            Ok(r) => spawn(app, row.id, row.owner, r, "http://localhost".into()),
            Err(e) => app.db.finish_extract(&row.id, None, Some(&e.message))?,
        }
    }
    Ok(n)
}

/// Runs an extract; the server's stop leaves it `processing`, to run again at start-up.
fn spawn(app: &Arc<App>, id: String, owner: String, r: ExtractRequest, origin: String) {
    let app = app.clone();
    let running = Running::new(&app, &owner);
    let mut stop = app.stop.clone();
    tokio::spawn(async move {
        let _running = running;
        let work = tokio::time::timeout(EXTRACT_TIMEOUT, run(&app, &owner, &r, &origin));
        let Some(outcome) = stop.run_until(work).await else {
            return;
        };
        let (data, error) = match outcome {
            Ok(Ok(v)) => (Some(v.to_string()), None),
            Ok(Err(e)) => (None, Some(e.message)),
            Err(_) => (
                None,
                Some(format!(
                    "the extract took longer than {} s",
                    EXTRACT_TIMEOUT.as_secs()
                )),
            ),
        };
        let db = app.db.clone();
        let stored = tokio::task::spawn_blocking(move || {
            db.finish_extract(&id, data.as_deref(), error.as_deref())
                .map_err(|e| format!("{id}: {e:#}"))
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        if let Err(e) = stored {
            tracing::error!(error = %e, "an extract's answer was not stored");
        }
    });
}

/// An extract counted against its key's unfinished jobs while it runs.
struct Running {
    app: Arc<App>,
    owner: String,
}

impl Running {
    fn new(app: &Arc<App>, owner: &str) -> Self {
        let mut m = app.extracts.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(owner.to_string()).or_default() += 1;
        Running {
            app: app.clone(),
            owner: owner.to_string(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut m = self.app.extracts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.owner);
            }
        }
    }
}

/// Extracts `owner` has running.
pub fn running(app: &App, owner: &str) -> usize {
    let m = app.extracts.lock().unwrap_or_else(|e| e.into_inner());
    m.get(owner).copied().unwrap_or(0)
}

/// The pages read, then the model's answer with the sources it read.
async fn run(
    app: &Arc<App>,
    owner: &str,
    r: &ExtractRequest,
    origin: &str,
) -> Result<Value, ApiError> {
    let (urls, _) = check(app, r)?;
    let mut opts = r.scrape_options.clone().unwrap_or_default();
    opts.formats = Some(vec![FormatSpec::Name("markdown".into())]);
    let opts = opts.resolve()?;
    let mut pages = Vec::new();
    for u in &urls {
        pages.extend(expand(app, u).await?);
    }
    pages.dedup();
    let (mut text, mut read, mut failed) = (String::new(), Vec::new(), Vec::new());
    for u in &pages {
        let Ok(url) = Url::parse(u) else { continue };
        let ask = scraping::Ask {
            source_url: u,
            url: &url,
            opts: &opts,
            timeout: opts_timeout(r),
            owner,
            origin,
        };
        // What the model's context cannot take is not read: the pages past it are left.
        if text.len() > app.args.settings.llm.llm_context_tokens.saturating_mul(4) {
            failed.push(format!("{u}: not read, the model's context is full"));
            continue;
        }
        match scraping::scrape(app, ask).await {
            Ok(doc) => {
                let md = doc["markdown"].as_str().unwrap_or_default();
                text.push_str(&format!("\n\n## Page: {u}\n\n{md}"));
                read.push(u.clone());
            }
            Err(e) => failed.push(format!("{u}: {}", e.message)),
        }
    }
    if read.is_empty() {
        return Err(ApiError::bad_request(format!(
            "no page could be read: {}",
            failed.join("; ")
        )));
    }
    let mut prompt = r.prompt.clone().filter(|p| !p.trim().is_empty());
    if let Some(sys) = r.system_prompt.as_deref().filter(|s| !s.trim().is_empty()) {
        prompt = Some(format!("{sys}\n\n{}", prompt.unwrap_or_default()));
    }
    let f = JsonFormat {
        schema: r.schema.clone().filter(|s| !s.is_null()),
        prompt,
    };
    let llm = app.llm.clone().ok_or_else(llm::unconfigured)?;
    let sources = read.join(", ");
    let data = tokio::task::spawn_blocking(move || llm.json(&sources, &text, &f))
        .await
        .map_err(ApiError::internal)??;
    // One answer over every page read: each field's sources are all of them.
    let sources: serde_json::Map<String, Value> = data
        .as_object()
        .map(|o| o.keys().map(|k| (k.clone(), json!(read))).collect())
        .unwrap_or_default();
    Ok(json!({"data": data, "sources": sources, "failed": failed}))
}

fn opts_timeout(r: &ExtractRequest) -> Option<Duration> {
    r.scrape_options
        .as_ref()
        .and_then(|o| o.timeout)
        .map(Duration::from_millis)
}

/// A URL, or a `/*` wildcard's pages under its path (found as `/v2/map` finds them).
async fn expand(app: &App, u: &str) -> Result<Vec<String>, ApiError> {
    let Some(bare) = u.strip_suffix("/*") else {
        return Ok(vec![u.to_string()]);
    };
    let root = api::http_url(&format!("{bare}/"))?;
    let opts = map::MapOptions {
        limit: WILDCARD_PAGES * 10,
        search: None,
        include_subdomains: false,
        ignore_query: true,
        sitemap: map::SitemapUse::Include,
        pages: app.args.map_pages,
        timeout: Duration::from_secs(60),
    };
    let links = map::map(&app.scraper, &root, &opts).await?;
    let mut pages: Vec<String> = links
        .into_iter()
        .map(|l| l.url)
        .filter(|l| l.starts_with(root.as_str()))
        .take(WILDCARD_PAGES)
        .collect();
    if pages.is_empty() {
        pages.push(root.to_string());
    }
    Ok(pages)
}

/// An extract's status in Firecrawl's shape.
pub fn status(app: &App, id: &str, owner: &str) -> Result<Value, ApiError> {
    let row = app
        .db
        .extract(id)
        .map_err(ApiError::internal)?
        .filter(|r| r.owner == owner)
        .ok_or_else(ApiError::not_found)?;
    let expires = chrono::DateTime::parse_from_rfc3339(&row.created_at)
        .map(|t| Value::from((t + chrono::Duration::hours(24)).to_rfc3339()))
        .unwrap_or(Value::Null);
    let mut out = json!({"success": true, "status": row.status, "expiresAt": expires});
    if let Some(d) = row.data.as_deref() {
        let v: Value = serde_json::from_str(d).unwrap_or(Value::Null);
        out["data"] = v["data"].clone();
        let show = api::parse::<ExtractRequest>(row.request.as_bytes())
            .map(|r| r.show_sources)
            .unwrap_or(false);
        if show {
            out["sources"] = v["sources"].clone();
        }
        if v["failed"].as_array().is_some_and(|f| !f.is_empty()) {
            out["warning"] = format!("pages not read: {}", v["failed"]).into();
        }
    }
    if let Some(e) = row.error {
        out["error"] = e.into();
        out["data"] = Value::Null;
    }
    Ok(out)
}
