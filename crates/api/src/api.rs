//! Firecrawl's v2 wire format, as `firecrawl-py` 4.54 sends and reads it: the request
//! bodies (unknown fields ignored, as newer SDKs add some), the error body, and the
//! document every scrape, crawl and batch returns.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use trawl_core::render::{Action, PageScript, Shot};

/// A request answered with Firecrawl's error body: `{"success":false,"error",...}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: Option<&'static str>,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: Option<&'static str>, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, Some("BAD_REQUEST"), message)
    }

    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, None, "Job not found")
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, None, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"success": false, "error": self.message});
        if let Some(code) = self.code {
            body["code"] = code.into();
        }
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        Self::internal(format!("{e:#}"))
    }
}

/// Parses a JSON body; a body that is not JSON, or a field of the wrong type, is a 400
/// that names it.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("Bad Request: {e}")))
}

/// An output format: a name (`"markdown"`) or an object with a `type`
/// (`{"type":"changeTracking","modes":["git-diff"],"tag":"t"}`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FormatSpec {
    Name(String),
    Object {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        modes: Vec<String>,
        #[serde(default)]
        tag: Option<String>,
        /// `json`: the JSON Schema the answer must fit.
        #[serde(default)]
        schema: Option<Value>,
        /// `json`: what to extract, in words.
        #[serde(default)]
        prompt: Option<String>,
        /// `screenshot`: its options (`fullPage`, `quality`, `viewport`).
        #[serde(flatten)]
        shot: Shot,
    },
}

/// What a scrape returns of a page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Formats {
    pub markdown: bool,
    pub html: bool,
    pub raw_html: bool,
    pub links: bool,
    pub images: bool,
    /// `changeTracking`, with its `git-diff` mode and tag.
    pub change_tracking: Option<ChangeTracking>,
    /// `json`: the page read into a schema by the configured model.
    pub json: Option<JsonFormat>,
    /// `summary`: the page summed up by the configured model.
    pub summary: bool,
    /// `screenshot`: the page as the browser shows it.
    pub screenshot: Option<Shot>,
}

/// The `json` format's schema and prompt (at least one of them).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonFormat {
    pub schema: Option<Value>,
    pub prompt: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeTracking {
    pub git_diff: bool,
    pub tag: Option<String>,
}

impl Formats {
    /// The formats of a request; `None` is Firecrawl's default, Markdown alone.
    pub fn parse(specs: Option<&[FormatSpec]>) -> Result<Self, ApiError> {
        let mut f = Formats::default();
        let Some(specs) = specs.filter(|s| !s.is_empty()) else {
            f.markdown = true;
            return Ok(f);
        };
        for spec in specs {
            let none = Shot::default();
            let (kind, modes, tag, schema, prompt, shot) = match spec {
                FormatSpec::Name(n) => (n.as_str(), &[][..], None, None, None, &none),
                FormatSpec::Object {
                    kind,
                    modes,
                    tag,
                    schema,
                    prompt,
                    shot,
                } => (
                    kind.as_str(),
                    &modes[..],
                    tag.clone(),
                    schema.clone().filter(|s| !s.is_null()),
                    prompt.clone().filter(|p| !p.trim().is_empty()),
                    shot,
                ),
            };
            match kind {
                "json" => {
                    if schema.is_none() && prompt.is_none() {
                        return Err(ApiError::bad_request(
                            "Bad Request: the json format needs a schema or a prompt: \
                             {\"type\":\"json\",\"schema\":{...},\"prompt\":\"...\"}",
                        ));
                    }
                    if let Some(s) = &schema {
                        crate::llm::check_schema(s)?;
                    }
                    f.json = Some(JsonFormat { schema, prompt })
                }
                "summary" => f.summary = true,
                "screenshot" | "screenshot@fullPage" => {
                    let mut shot = shot.clone();
                    shot.full_page |= kind == "screenshot@fullPage";
                    super::actions::check_shot(&shot)?;
                    f.screenshot = Some(shot);
                }
                "markdown" => f.markdown = true,
                "html" => f.html = true,
                "rawHtml" => f.raw_html = true,
                "links" => f.links = true,
                "images" => f.images = true,
                "changeTracking" => {
                    f.change_tracking = Some(ChangeTracking {
                        git_diff: modes.iter().any(|m| m == "git-diff"),
                        tag,
                    })
                }
                other => {
                    return Err(ApiError::bad_request(format!(
                        "format {other:?} is not supported by trawl (markdown, html, rawHtml, \
                         links, images, summary, json, screenshot and changeTracking are)"
                    )));
                }
            }
        }
        if f.change_tracking.is_some() && !f.markdown {
            return Err(ApiError::bad_request(
                "the changeTracking format compares Markdown: add \"markdown\" to formats",
            ));
        }
        Ok(f)
    }

    /// The page's markup is needed, not only the record's Markdown.
    pub fn needs_html(&self) -> bool {
        self.html || self.raw_html || self.images
    }

    /// A format that asks the configured model.
    pub fn needs_llm(&self) -> bool {
        self.json.is_some() || self.summary
    }
}

/// The scrape options, shared by `/v2/scrape`, a crawl's `scrapeOptions` and a batch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScrapeOptions {
    pub formats: Option<Vec<FormatSpec>>,
    pub only_main_content: Option<bool>,
    pub include_tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    /// Milliseconds the whole scrape may take.
    pub timeout: Option<u64>,
    /// Milliseconds to wait once the page settled in the browser.
    pub wait_for: Option<u64>,
    /// A phone's viewport and layout.
    pub mobile: Option<bool>,
    /// Firecrawl's browser actions, run in order once the page settled.
    pub actions: Option<Vec<Action>>,
    /// Milliseconds: a scrape of the URL with the same options younger than this answers
    /// (`/v2/scrape`; Firecrawl's default, two days, when absent; 0: always fetch).
    pub max_age: Option<u64>,
    /// Keep this scrape for later `maxAge` answers (default true).
    pub store_in_cache: Option<bool>,
}

/// The scrape options checked and resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PageOptions {
    pub formats: Formats,
    pub only_main_content: bool,
    pub include_tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    /// What the browser does with the page (`waitFor`, `mobile`, `actions`,
    /// `screenshot`); any of them means the page is rendered.
    pub script: Option<PageScript>,
}

/// Actions one scrape may ask for.
pub const MAX_ACTIONS: usize = 50;

/// The longest a scrape's waits may add up to (`waitFor` and its wait actions).
pub const MAX_WAIT_MS: u64 = 60_000;

impl ScrapeOptions {
    pub fn resolve(&self) -> Result<PageOptions, ApiError> {
        for sel in self.include_tags.iter().chain(&self.exclude_tags) {
            trawl_extract::check_selectors(std::slice::from_ref(sel))
                .map_err(|e| ApiError::bad_request(format!("Bad Request: {e}")))?;
        }
        let formats = Formats::parse(self.formats.as_deref())?;
        let actions = self.actions.clone().unwrap_or_default();
        if actions.len() > MAX_ACTIONS {
            return Err(ApiError::bad_request(format!(
                "Bad Request: at most {MAX_ACTIONS} actions, not {}",
                actions.len()
            )));
        }
        for (i, a) in actions.iter().enumerate() {
            super::actions::check_action(a).map_err(|e| {
                ApiError::bad_request(format!("Bad Request: action {} ({}): {e}", i + 1, a.name()))
            })?;
        }
        let script = PageScript {
            wait_ms: self.wait_for.unwrap_or(0),
            mobile: self.mobile.unwrap_or(false),
            actions,
            screenshot: formats.screenshot.clone(),
        };
        if script.waits_ms() > MAX_WAIT_MS {
            return Err(ApiError::bad_request(format!(
                "Bad Request: waitFor and the wait actions add up to {} ms; at most {MAX_WAIT_MS}",
                script.waits_ms()
            )));
        }
        Ok(PageOptions {
            formats,
            only_main_content: self.only_main_content.unwrap_or(true),
            include_tags: self.include_tags.clone(),
            exclude_tags: self.exclude_tags.clone(),
            script: (!script.is_empty()).then_some(script),
        })
    }
}

impl PageOptions {
    /// A crawl for these options keeps each page's markup (`keep_html`): to extract it
    /// again, or for its links (the record keeps none).
    pub fn needs_markup(&self) -> bool {
        self.reextracts() || self.formats.links
    }

    /// The record's own Markdown will not do: the page is extracted again from its markup.
    pub fn reextracts(&self) -> bool {
        self.formats.needs_html()
            || !self.only_main_content
            || !self.include_tags.is_empty()
            || !self.exclude_tags.is_empty()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScrapeRequest {
    pub url: String,
    #[serde(flatten)]
    pub options: ScrapeOptions,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CrawlRequest {
    pub url: String,
    pub limit: Option<u64>,
    pub max_discovery_depth: Option<u32>,
    pub include_paths: Vec<String>,
    pub exclude_paths: Vec<String>,
    #[serde(rename = "regexOnFullURL")]
    pub regex_on_full_url: bool,
    pub crawl_entire_domain: bool,
    pub allow_subdomains: bool,
    pub allow_external_links: bool,
    pub ignore_robots_txt: bool,
    /// `include` (the default), `skip` or `only`.
    pub sitemap: Option<String>,
    /// Seconds between requests to the site.
    pub delay: Option<f64>,
    pub max_concurrency: Option<u32>,
    #[serde(rename = "deduplicateSimilarURLs")]
    pub deduplicate_similar_urls: Option<bool>,
    pub ignore_query_parameters: bool,
    pub scrape_options: Option<ScrapeOptions>,
    /// Where the crawl's events go (`webhooks::Hook`).
    pub webhook: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BatchRequest {
    pub urls: Vec<String>,
    #[serde(flatten)]
    pub options: ScrapeOptions,
    #[serde(rename = "ignoreInvalidURLs")]
    pub ignore_invalid_urls: bool,
    pub max_concurrency: Option<u32>,
    /// Where the batch's events go (`webhooks::Hook`).
    pub webhook: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MapRequest {
    pub url: String,
    pub search: Option<String>,
    pub include_subdomains: Option<bool>,
    pub ignore_query_parameters: Option<bool>,
    pub limit: Option<u64>,
    /// Milliseconds.
    pub timeout: Option<u64>,
    pub sitemap: Option<String>,
}

/// An absolute http(s) URL, or a 400 naming it.
pub fn http_url(raw: &str) -> Result<url::Url, ApiError> {
    match url::Url::parse(raw.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(u),
        _ => Err(ApiError::bad_request(format!(
            "Bad Request: {raw:?} is not an absolute http(s) URL"
        ))),
    }
}

/// The parts of one page a document is made of.
#[derive(Debug, Clone, Default)]
pub struct PageParts {
    pub source_url: String,
    pub url: String,
    pub status: u16,
    pub content_type: Option<String>,
    pub title: Option<String>,
    pub meta: trawl_core::PageMeta,
    pub markdown: Option<String>,
    pub html: Option<String>,
    pub raw_html: Option<String>,
    pub links: Vec<String>,
    pub images: Vec<String>,
    pub scrape_id: String,
    /// trawl's own facts, kept as extra metadata keys (the SDK keeps unknown keys).
    pub extra: Map<String, Value>,
    /// The `summary` format's text.
    pub summary: Option<String>,
    /// The `json` format's object.
    pub json: Option<Value>,
    /// The `screenshot` format's URL.
    pub screenshot: Option<String>,
    /// The actions' results: `{screenshots, scrapes, javascriptReturns, pdfs}`.
    pub actions: Option<Value>,
    /// What the caller should know (a page that needed a browser but got none).
    pub warning: Option<String>,
}

/// A Firecrawl document with just the formats asked for; counters are never null, and
/// `proxyUsed` / `cacheState` hold the only values the SDK accepts.
pub fn document(p: PageParts, f: &Formats, change: Option<Value>) -> Value {
    let mut meta = Map::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            meta.insert(k.into(), v.into());
        }
    };
    put("title", p.title);
    put("description", p.meta.description);
    put("language", p.meta.language);
    put("author", p.meta.author);
    put("publishedTime", p.meta.published);
    put("modifiedTime", p.meta.modified);
    put("ogSiteName", p.meta.site_name);
    put("canonical", p.meta.canonical);
    put("contentType", p.content_type);
    meta.insert("sourceURL".into(), p.source_url.into());
    meta.insert("url".into(), p.url.into());
    meta.insert("statusCode".into(), p.status.into());
    meta.insert("scrapeId".into(), p.scrape_id.into());
    meta.insert("proxyUsed".into(), "basic".into());
    meta.insert("cacheState".into(), "miss".into());
    meta.insert("creditsUsed".into(), 1.into());
    for (k, v) in p.extra {
        meta.entry(k).or_insert(v);
    }
    let mut doc = Map::new();
    if f.markdown {
        doc.insert("markdown".into(), p.markdown.unwrap_or_default().into());
    }
    if f.html {
        doc.insert("html".into(), p.html.unwrap_or_default().into());
    }
    if f.raw_html {
        doc.insert("rawHtml".into(), p.raw_html.unwrap_or_default().into());
    }
    if f.links {
        doc.insert("links".into(), p.links.into());
    }
    if f.images {
        doc.insert("images".into(), p.images.into());
    }
    if let Some(c) = change {
        doc.insert("changeTracking".into(), c);
    }
    if f.summary {
        doc.insert("summary".into(), p.summary.unwrap_or_default().into());
    }
    if f.json.is_some() {
        doc.insert("json".into(), p.json.unwrap_or(Value::Null));
    }
    if f.screenshot.is_some() {
        doc.insert(
            "screenshot".into(),
            p.screenshot.map_or(Value::Null, Value::from),
        );
    }
    if let Some(a) = p.actions {
        doc.insert("actions".into(), a);
    }
    if let Some(w) = p.warning {
        doc.insert("warning".into(), w.into());
    }
    doc.insert("metadata".into(), Value::Object(meta));
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_take_names_and_objects_and_refuse_the_unknown() {
        let specs: Vec<FormatSpec> = serde_json::from_str(
            r#"["markdown","links",{"type":"changeTracking","modes":["git-diff"],"tag":"t"}]"#,
        )
        .unwrap();
        let f = Formats::parse(Some(&specs)).unwrap();
        assert!(f.markdown && f.links && !f.html);
        assert_eq!(
            f.change_tracking,
            Some(ChangeTracking {
                git_diff: true,
                tag: Some("t".into())
            })
        );
        assert!(Formats::parse(None).unwrap().markdown);
        let bad: Vec<FormatSpec> = serde_json::from_str(r#"["pdfx"]"#).unwrap();
        assert_eq!(
            Formats::parse(Some(&bad)).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
        let no_md: Vec<FormatSpec> =
            serde_json::from_str(r#"[{"type":"changeTracking","modes":[]}]"#).unwrap();
        assert!(Formats::parse(Some(&no_md)).is_err());
    }

    #[test]
    fn requests_ignore_unknown_fields_and_name_bad_ones() {
        let r: CrawlRequest = parse(
            br#"{"url":"http://h/","limit":3,"origin":"python-sdk@4.54.0","regexOnFullURL":true,
                "deduplicateSimilarURLs":false,"brandNewField":{"x":1}}"#,
        )
        .unwrap();
        assert_eq!((r.limit, r.regex_on_full_url), (Some(3), true));
        assert_eq!(r.deduplicate_similar_urls, Some(false));
        let e = parse::<CrawlRequest>(br#"{"url":"http://h/","limit":"three"}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.message.contains("limit") || e.message.contains("invalid type"),
            "{}",
            e.message
        );
        assert!(parse::<ScrapeRequest>(b"not json").is_err());
        assert!(parse::<ScrapeRequest>(br#"{"formats":["markdown"]}"#).is_err());
        let b: BatchRequest =
            parse(br#"{"urls":["http://h/a"],"formats":["html"],"onlyMainContent":false}"#)
                .unwrap();
        assert_eq!(b.options.only_main_content, Some(false));
    }

    #[test]
    fn a_document_has_what_the_sdk_requires() {
        let parts = PageParts {
            source_url: "http://h/".into(),
            url: "http://h/".into(),
            status: 200,
            title: Some("Home".into()),
            markdown: Some("# Home".into()),
            links: vec!["http://h/a".into()],
            ..Default::default()
        };
        let f = Formats {
            markdown: true,
            links: true,
            ..Default::default()
        };
        let d = document(parts, &f, None);
        assert_eq!(d["markdown"], "# Home");
        assert_eq!(d["links"][0], "http://h/a");
        assert!(d.get("html").is_none());
        let m = &d["metadata"];
        assert_eq!(m["sourceURL"], "http://h/");
        assert_eq!(m["statusCode"], 200);
        assert_eq!(m["proxyUsed"], "basic");
        assert_eq!(m["cacheState"], "miss");
        assert_eq!(m["creditsUsed"], 1);
        assert!(m.get("description").is_none());
    }

    #[test]
    fn urls_must_be_absolute_http() {
        assert!(http_url("http://h/x").is_ok());
        for bad in ["notaurl", "ftp://h/", "/relative", "http://", ""] {
            assert!(http_url(bad).is_err(), "{bad}");
        }
    }
}
