//! One page scraped for `/v2/scrape` and `/v2/extract`: fetched politely, rendered when the
//! render rule picks it or the request asks for the browser, extracted into the formats
//! asked, with the change tracking and the LLM formats last.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use trawl_core::Fetched;
use url::Url;

use super::api::{self, ApiError, PageOptions, PageParts};
use super::{App, browser, changes, page};

/// What a scrape is asked: the URL as given, the options, and where its files are served.
pub struct Ask<'a> {
    pub source_url: &'a str,
    pub url: &'a Url,
    pub opts: &'a PageOptions,
    pub timeout: Option<Duration>,
    pub owner: &'a str,
    /// `http://host` of the request, for the URLs of screenshots and PDFs.
    pub origin: &'a str,
}

/// The page's document in Firecrawl's shape.
pub async fn scrape(app: &Arc<App>, ask: Ask<'_>) -> Result<Value, ApiError> {
    let opts = ask.opts;
    if opts.formats.needs_llm() && app.llm.is_none() {
        return Err(super::llm::unconfigured());
    }
    if opts.script.is_some() && app.browser.is_none() {
        return Err(browser::unavailable());
    }
    let f = app.scraper.fetch(ask.url, ask.timeout).await?;
    let mut parts = PageParts {
        source_url: ask.source_url.to_string(),
        scrape_id: uuid::Uuid::new_v4().to_string(),
        ..Default::default()
    };
    let max_chars = app.args.settings.crawl.render_max_chars;
    let (f, reason) = extract(f, opts, max_chars, &mut parts).await?;
    let html = f.charset.is_some() && trawl_body::is_html(f.content_type.as_deref(), &f.body);
    if opts.script.is_some() && !html {
        return Err(ApiError::bad_request(format!(
            "Bad Request: waitFor, mobile, actions and screenshots are for HTML pages; {} is {}",
            ask.url,
            f.content_type.as_deref().unwrap_or("not HTML")
        )));
    }
    let wanted = match (&opts.script, reason) {
        (Some(_), r) => Some(r.unwrap_or("asked")),
        (None, Some(r)) if app.browser.as_ref().is_some_and(|b| b.auto) => Some(r),
        (None, Some(r)) => {
            parts.warning = Some(format!(
                "the page looks rendered by JavaScript ({r}) and this server has no browser: \
                 its content may be missing"
            ));
            None
        }
        (None, None) => None,
    };
    if let (Some(reason), Some(b)) = (wanted, &app.browser) {
        let rendered = b.render(f, reason, opts.script.as_ref()).await?;
        let info = rendered.render.clone().unwrap_or_default();
        if info.rendered {
            let keep = std::mem::take(&mut parts);
            parts = PageParts {
                source_url: keep.source_url,
                scrape_id: keep.scrape_id,
                ..Default::default()
            };
            extract(rendered, opts, 0, &mut parts).await?;
        } else if let Some(e) = &info.error {
            parts.warning = Some(format!("the page could not be rendered: {e}"));
        }
        if let Some(a) = info.artifacts {
            let (shot, actions) = browser::results(a, &format!("{}/artifacts", ask.origin))?;
            parts.screenshot = shot;
            if !opts.script.as_ref().is_some_and(|s| s.actions.is_empty()) {
                parts.actions = Some(actions);
            }
        }
        parts.extra.insert("rendered".into(), info.rendered.into());
    }
    finish(app, parts, opts, ask.owner).await
}

/// The page's parts from its body; for HTML also why it needs a browser, by the crawl's
/// rule. Extraction is CPU work: off the request threads.
async fn extract(
    f: Fetched,
    opts: &PageOptions,
    max_chars: usize,
    parts: &mut PageParts,
) -> Result<(Fetched, Option<&'static str>), ApiError> {
    let opts = opts.clone();
    let mut p = std::mem::take(parts);
    let (f, p, reason) = tokio::task::spawn_blocking(move || {
        p.url = f.final_url.clone();
        p.status = f.status;
        p.content_type = f.content_type.clone();
        let is_html = trawl_body::is_html(f.content_type.as_deref(), &f.body);
        let document = (!is_html)
            .then(|| trawl_doc::kind_of(f.content_type.as_deref(), &f.final_url, &f.body))
            .flatten();
        let reason = match (document, Url::parse(&f.final_url)) {
            (Some(kind), _) => {
                page::render_document(&f.body, kind, &mut p);
                None
            }
            (None, Ok(base)) if f.charset.is_some() => {
                // The fetcher decoded the page to UTF-8 already.
                let html = String::from_utf8_lossy(&f.body);
                page::render_html(&html, &base, &opts, max_chars, &mut p)?
            }
            _ => {
                page::render_other(&f.body, f.content_type.as_deref(), &mut p);
                None
            }
        };
        Ok::<_, ApiError>((f, p, reason))
    })
    .await
    .map_err(ApiError::internal)??;
    *parts = p;
    Ok((f, reason))
}

/// Change tracking and the LLM formats (both blocking: the database, the model's server),
/// then the document.
async fn finish(
    app: &Arc<App>,
    mut parts: PageParts,
    opts: &PageOptions,
    owner: &str,
) -> Result<Value, ApiError> {
    let app = app.clone();
    let opts = opts.clone();
    let owner = owner.to_string();
    tokio::task::spawn_blocking(move || {
        let markdown = parts.markdown.clone().unwrap_or_default();
        let change = match &opts.formats.change_tracking {
            Some(ct) => Some(changes::track(
                &app.db,
                &owner,
                &parts.source_url,
                ct.tag.as_deref(),
                &markdown,
                parts.status,
                ct.git_diff,
            )?),
            None => None,
        };
        if let Some(llm) = &app.llm {
            if opts.formats.summary {
                parts.summary = Some(llm.summary(&parts.url, &markdown)?);
            }
            if let Some(j) = &opts.formats.json {
                parts.json = Some(llm.json(&parts.url, &markdown, j)?);
            }
        }
        Ok(api::document(parts, &opts.formats, change))
    })
    .await
    .map_err(ApiError::internal)?
}
