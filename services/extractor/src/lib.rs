//! The extractor stage: turns a fetched response into a corpus record and the URLs it links
//! to. HTML goes through [`trawl_extract::extract_html`]; sitemaps and feeds through
//! [`trawl_extract::parse_sitemap`] and [`trawl_extract::parse_feed`].

mod fit;
/// Records sized to the hop's message limit (the ingesters publish pages too).
pub use fit::fit_doc;
mod worker;

use trawl_core::render::RenderMode;
use trawl_core::{Discovered, DiscoveredUrl, Doc, Fetched, MESSAGE_VERSION, PageRecord, UrlKind};
use trawl_extract::extract_html;
use url::Url;

pub use worker::{
    Availability, DedupStage, ExtractorConfig, Handled, Outputs, RenderRoute, extract_and_publish,
    failed_record, publish_outputs, run_worker, serve, settle, spawn,
};

/// What one fetched response becomes.
#[derive(Debug, Clone)]
pub struct Processed {
    pub doc: Doc,
    pub discovered: Option<Discovered>,
    /// The render rule's reason when it wants the page rendered (see [`process_with`]).
    pub render_reason: Option<&'static str>,
    /// The page for the refiner, when the crawl refines and the page is HTML.
    pub refine: Option<trawl_core::RefineJob>,
}

/// URLs found on a page (or listing), as discovered URLs `depth` deep.
fn links_at(urls: Vec<String>, depth: u32, kind: UrlKind) -> impl Iterator<Item = DiscoveredUrl> {
    urls.into_iter().map(move |url| DiscoveredUrl {
        url,
        depth,
        kind,
        lastmod: None,
    })
}

/// An HTML page's text, Markdown, metadata and robots metas into its record, its links
/// (unless it says `nofollow`) into `urls`; the render rule's reason when it wants the
/// page rendered.
fn read_html(
    f: &Fetched,
    rule: Option<(RenderMode, usize)>,
    agent: &str,
    page: &mut PageRecord,
    policy: &mut trawl_core::policy::PagePolicy,
    urls: &mut Vec<DiscoveredUrl>,
) -> Option<&'static str> {
    let html = String::from_utf8_lossy(&f.body);
    let base = Url::parse(&f.final_url).ok()?;
    let e = extract_html(&html, &base);
    let mut render_reason = None;
    if f.render.is_none() && trawl_body::is_html(f.content_type.as_deref(), &f.body) {
        render_reason = match rule {
            Some((RenderMode::Always, _)) => Some("always"),
            Some((RenderMode::Auto, max)) => trawl_extract::render_reason(&e.text, &e.shell, max),
            _ => None,
        };
    }
    page.title = e.title;
    page.text = e.text;
    page.markdown = e.markdown.filter(|m| !m.is_empty());
    page.meta = e.meta;
    policy.read_metas(&e.policy_metas, agent);
    if policy.robots.nofollow.is_none() {
        urls.extend(links_at(e.links, f.job.depth + 1, UrlKind::Page));
        urls.extend(links_at(e.feeds, f.job.depth + 1, UrlKind::Feed));
    }
    render_reason
}

/// A sitemap's or feed's pages (with their `lastmod`) and nested sitemaps into `urls`.
fn read_listing(f: &Fetched, page: &mut PageRecord, urls: &mut Vec<DiscoveredUrl>) {
    let sitemap = f.job.kind == UrlKind::Sitemap;
    let listing = if sitemap {
        trawl_extract::parse_sitemap(&f.body)
    } else {
        trawl_extract::parse_feed(&f.body)
    };
    if let Some(err) = listing.error {
        page.error = Some(trawl_core::FetchFailure {
            kind: if sitemap {
                "sitemap_parse"
            } else {
                "feed_parse"
            }
            .into(),
            message: err,
        });
    }
    let lastmod = listing.lastmod;
    urls.extend(
        links_at(listing.pages, f.job.depth + 1, UrlKind::Page).map(|mut u| {
            u.lastmod = lastmod.get(&u.url).cloned();
            u
        }),
    );
    // Nested sitemaps are the same level of discovery as their index.
    urls.extend(links_at(listing.sitemaps, f.job.depth, UrlKind::Sitemap));
}

/// The document a page's body is, when it is one read by `trawl-doc` (not HTML).
fn document_kind(f: &Fetched) -> Option<trawl_doc::DocKind> {
    if trawl_body::is_html(f.content_type.as_deref(), &f.body) {
        return None;
    }
    trawl_doc::kind_of(f.content_type.as_deref(), &f.final_url, &f.body)
}

/// A document's text, Markdown and metadata into its record, or why it has none.
fn read_document(f: &Fetched, kind: trawl_doc::DocKind, page: &mut PageRecord) {
    // The defaults: 8 MiB of text (what a page's extraction reads), 5,000 pages, 30 s.
    let limits = trawl_doc::Limits::default();
    let mut info = trawl_core::DocumentInfo {
        kind: kind.as_str().to_string(),
        ..Default::default()
    };
    match trawl_doc::extract(f.body.clone(), kind, limits) {
        Ok(d) => {
            page.title = d.title;
            page.text = d.text;
            page.markdown = Some(d.markdown).filter(|m| !m.is_empty());
            page.meta.author = d.author;
            page.meta.published = d.created;
            page.meta.modified = d.modified;
            page.meta.language = d.language;
            info.pages = d.pages;
            info.scanned_pages = d.scanned_pages;
            info.cut = d.cut;
        }
        Err(e) => {
            // A body cut at the cap is why a document does not read: that stays the error.
            if page.error.is_none() {
                page.error = Some(trawl_core::FetchFailure {
                    kind: e.kind().into(),
                    message: e.to_string(),
                });
            }
        }
    }
    page.document = Some(info);
}

/// Links followed from one page or listing, at most: the sitemap protocol's limit per file.
pub const MAX_LINKS_PER_PAGE: usize = 50_000;

/// Extracts text and links; never fails: problems are recorded in the page's `error`.
pub fn process(f: &Fetched) -> Processed {
    process_with(f, None, "trawl")
}

/// [`process`], and with `rule` (the render mode and rule (A)'s threshold), whether the
/// page should be rendered: never a page already sent to the browser (`Fetched.render`),
/// only a 2xx HTML page. The page's robots metas count when generic or named for `agent`
/// (the crawler's robots.txt name): `nofollow` leaves its links out, and the record
/// carries the directives and usage signals of its headers, host and metas.
pub fn process_with(
    f: &Fetched,
    rule: Option<(trawl_core::render::RenderMode, usize)>,
    agent: &str,
) -> Processed {
    let mut page = PageRecord {
        url: f.job.url.clone(),
        final_url: f.final_url.clone(),
        status: f.status,
        redirects: f.redirects.clone(),
        depth: f.job.depth,
        kind: f.job.kind,
        content_type: f.content_type.clone(),
        fetched_at: f.fetched_at.clone(),
        charset: f.charset.clone(),
        error: f.error.clone(),
        wire_bytes: f.wire_bytes,
        facts: f.facts.clone(),
        ..PageRecord::default()
    };
    page.render = f.render.clone();
    let mut policy = f.policy.clone();
    let mut render_reason = None;
    let mut urls: Vec<DiscoveredUrl> = Vec::new();
    let usable = (200..300).contains(&f.status)
        && f.error.as_ref().is_none_or(|e| e.kind == "body_too_large");
    if usable {
        match (f.job.kind, document_kind(f)) {
            (UrlKind::Page, Some(kind)) => read_document(f, kind, &mut page),
            (UrlKind::Page, None) => {
                render_reason = read_html(f, rule, agent, &mut page, &mut policy, &mut urls);
            }
            (UrlKind::Sitemap | UrlKind::Feed, _) => read_listing(f, &mut page, &mut urls),
        }
    }
    page.robots = policy.robots;
    page.usage = policy.usage;
    page.links_found = urls.len();
    if urls.len() > MAX_LINKS_PER_PAGE {
        // A link farm's page, or a sitemap past the protocol's 50,000: the first ones are
        // followed, the rest counted on the record (`links_dropped`).
        page.links_dropped = (urls.len() - MAX_LINKS_PER_PAGE).min(u32::MAX as usize) as u32;
        urls.truncate(MAX_LINKS_PER_PAGE);
    }
    let discovered = (!urls.is_empty()).then(|| Discovered {
        v: MESSAGE_VERSION,
        crawl: f.crawl.clone(),
        source: Some(f.final_url.clone()),
        urls,
    });
    Processed {
        doc: Doc {
            v: MESSAGE_VERSION,
            crawl: f.crawl.clone(),
            page,
        },
        discovered,
        render_reason,
        refine: None,
    }
}
