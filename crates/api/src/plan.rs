//! A job's request, checked and turned into the embedded crawl it runs: Firecrawl's
//! crawl options as trawl's crawl settings (limits capped by the server's, the start
//! URL's directory as a page prefix, the site's sitemap), a batch as its URLs at depth 0.

use std::path::Path;

use trawl_core::scope::ScopeKind;
use trawl_core::settings::Settings;

use super::api::{self, ApiError, BatchRequest, CrawlRequest, PageOptions};
use super::jobs::Kind;
use trawl_runtime::{CrawlPlan, Targets};

/// Firecrawl's default crawl limit.
const DEFAULT_LIMIT: u64 = 10_000;

/// A job's request, checked, as it will run.
pub struct Planned {
    pub opts: CrawlPlan,
    pub page: PageOptions,
    /// Near-duplicate pages are left out of the results (`deduplicateSimilarURLs`).
    pub hide_duplicates: bool,
    /// A batch's URLs, known up front.
    pub total: Option<u64>,
    pub invalid: Vec<String>,
}

/// A request, checked and turned into the crawl it runs in `out`, over the server's
/// settings `base`.
/// Whether the embedding model's files are where the index would load them from.
pub fn model_present(dir: &Option<std::path::PathBuf>) -> bool {
    trawl_index::model::resolve_dir(dir.as_deref())
        .join("model.safetensors")
        .is_file()
}

pub fn plan(
    base: &Settings,
    index: bool,
    concurrency: usize,
    out: &Path,
    kind: Kind,
    request: &str,
) -> Result<Planned, ApiError> {
    // The server's settings. The results are read from pages.jsonl; the index is for
    // /v2/search, with vectors where the model is here (else words only).
    let mut opts = CrawlPlan::new(base, Targets::default(), out);
    opts.index.no_index = !index;
    if index && !model_present(&opts.index.settings.model_dir) {
        opts.index.settings.embed = false;
    }
    opts.concurrency = concurrency;
    let planned = match kind {
        Kind::Crawl => plan_crawl(opts, api::parse(request.as_bytes())?)?,
        Kind::Batch => plan_batch(opts, api::parse(request.as_bytes())?)?,
    };
    let mut planned = planned;
    browse(&mut planned)?;
    planned
        .opts
        .crawl
        .validate()
        .map_err(|e| ApiError::bad_request(format!("Bad Request: {e}")))?;
    Ok(planned)
}

/// A job's pages asking for the browser (`waitFor`, `mobile`, `actions`, `screenshot`)
/// are all rendered, each running the script; the LLM formats are `/v2/scrape`'s and
/// `/v2/extract`'s.
fn browse(p: &mut Planned) -> Result<(), ApiError> {
    if p.page.formats.needs_llm() {
        return Err(ApiError::bad_request(
            "Bad Request: the json and summary formats are answered by /v2/scrape and \
             /v2/extract, not in crawl and batch jobs",
        ));
    }
    if let Some(script) = &p.page.script {
        let c = &mut p.opts.crawl;
        if c.render == trawl_core::render::RenderMode::Never {
            return Err(super::browser::unavailable());
        }
        c.render = trawl_core::render::RenderMode::Always;
        c.render_script = Some(script.clone());
    }
    Ok(())
}

fn plan_crawl(mut opts: CrawlPlan, r: CrawlRequest) -> Result<Planned, ApiError> {
    let url = api::http_url(&r.url)?;
    super::webhooks::Hook::parse(r.webhook.as_ref(), opts.crawl.allow_private)?;
    if r.ignore_robots_txt {
        return Err(ApiError::bad_request(
            "trawl always follows robots.txt: ignoreRobotsTxt cannot be true",
        ));
    }
    let page = r.scrape_options.clone().unwrap_or_default().resolve()?;
    if page.formats.change_tracking.is_some() {
        return Err(ApiError::bad_request(
            "changeTracking is answered by /v2/scrape; a crawl's changes come from a \
                 re-crawl (trawl crawl --since)",
        ));
    }
    let c = &mut opts.crawl;
    // The server's own limits are ceilings a request can lower, never raise.
    let limit = r.limit.unwrap_or(DEFAULT_LIMIT).max(1);
    c.max_pages = match c.max_pages {
        0 => limit,
        server => server.min(limit),
    };
    if let Some(d) = r.max_discovery_depth {
        c.max_depth = c.max_depth.min(d);
    }
    c.scope = if r.allow_external_links {
        ScopeKind::Any
    } else if r.allow_subdomains {
        ScopeKind::Domain
    } else {
        ScopeKind::Host
    };
    if !(r.crawl_entire_domain || r.allow_subdomains || r.allow_external_links) {
        // Firecrawl's default: the pages under the start URL's directory. A prefix for
        // pages only, so the site's sitemaps (at its root) are read all the same.
        let path = url.path();
        c.path_prefix = Some(path[..path.rfind('/').map_or(0, |i| i + 1)].to_string());
    }
    c.include_paths = r.include_paths.clone();
    c.exclude_paths = r.exclude_paths.clone();
    c.paths_match_url = r.regex_on_full_url;
    if let Some(s) = r.delay.filter(|s| s.is_finite() && *s > 0.0) {
        // The server's delay is a floor a request cannot lower.
        c.delay_ms = c.delay_ms.max((s * 1000.0).min(3.6e6) as u64);
    }
    if r.ignore_query_parameters {
        c.strip_params.push("*".into());
    }
    c.keep_html = page.needs_markup();
    if let Some(m) = r.max_concurrency.filter(|m| *m > 0) {
        opts.concurrency = opts.concurrency.min(m as usize);
    }
    let origin = url.join("/sitemap.xml").ok().map(|u| u.to_string());
    match r.sitemap.as_deref().unwrap_or("include") {
        "include" => {
            opts.targets.seeds = vec![url.to_string()];
            opts.targets.sitemaps = origin.into_iter().collect();
        }
        "skip" => opts.targets.seeds = vec![url.to_string()],
        "only" => {
            // The sitemap's pages, not what they link to.
            opts.targets.sitemaps = origin.into_iter().collect();
            opts.crawl.max_depth = opts.crawl.max_depth.min(1);
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "Bad Request: sitemap must be include, skip or only, not {other:?}"
            )));
        }
    }
    Ok(Planned {
        opts,
        page,
        hide_duplicates: r.deduplicate_similar_urls.unwrap_or(true),
        total: None,
        invalid: Vec::new(),
    })
}

fn plan_batch(mut opts: CrawlPlan, r: BatchRequest) -> Result<Planned, ApiError> {
    super::webhooks::Hook::parse(r.webhook.as_ref(), opts.crawl.allow_private)?;
    let page = r.options.resolve()?;
    if page.formats.change_tracking.is_some() {
        return Err(ApiError::bad_request(
            "changeTracking is answered by /v2/scrape, one page at a time",
        ));
    }
    let mut valid = Vec::new();
    let mut invalid = Vec::new();
    for u in &r.urls {
        match api::http_url(u) {
            Ok(url) => valid.push(url.to_string()),
            Err(e) if !r.ignore_invalid_urls => return Err(e),
            Err(_) => invalid.push(u.clone()),
        }
    }
    if valid.is_empty() {
        return Err(ApiError::bad_request("Bad Request: no valid URL to scrape"));
    }
    valid.sort();
    valid.dedup();
    let c = &mut opts.crawl;
    // Exactly the URLs given: no links followed, any host.
    c.max_depth = 0;
    c.scope = ScopeKind::Any;
    c.max_pages = 0;
    c.keep_html = page.needs_markup();
    if let Some(m) = r.max_concurrency.filter(|m| *m > 0) {
        opts.concurrency = opts.concurrency.min(m as usize);
    }
    let total = valid.len() as u64;
    opts.targets.seeds = valid;
    Ok(Planned {
        opts,
        page,
        hide_duplicates: false,
        total: Some(total),
        invalid,
    })
}
