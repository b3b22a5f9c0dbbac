//! One page's formats from its markup, with the request's options: the include and
//! exclude selectors first, then trawl's extractor (main content or the whole page), the
//! cleaned HTML, links and images, all from one parse.

use trawl_extract::content::{self, Options};
use url::Url;

use super::api::{ApiError, PageOptions, PageParts};

/// Fills `parts`' title, metadata and formats from the page's markup; why the page needs
/// a browser by the crawl's render rule, with `render_max_chars` (0: never asked).
pub fn render_html(
    html: &str,
    base: &Url,
    opts: &PageOptions,
    render_max_chars: usize,
    parts: &mut PageParts,
) -> Result<Option<&'static str>, ApiError> {
    let original = html;
    let filtered;
    let html = if opts.include_tags.is_empty() && opts.exclude_tags.is_empty() {
        html
    } else {
        filtered = trawl_extract::filter_tags(html, &opts.include_tags, &opts.exclude_tags)
            .map_err(|e| ApiError::bad_request(format!("Bad Request: {e}")))?;
        filtered.as_str()
    };
    let c = content::extract(
        html,
        Some(base),
        Options {
            markdown: true,
            markdown_links: false,
            links: true,
            main_content: opts.only_main_content,
            html: opts.formats.html,
        },
    );
    parts.title = c.title;
    parts.meta = c.meta;
    parts.markdown = c.markdown;
    parts.html = c.html;
    if let Some(l) = c.links {
        parts.links = dedup(l.links);
        parts.images = dedup(l.images);
    }
    if opts.formats.raw_html {
        parts.raw_html = Some(original.to_string());
    }
    Ok(trawl_extract::render_reason(
        &c.text,
        &c.shell,
        render_max_chars,
    ))
}

/// A document (PDF, DOCX, plain text, Markdown) read as a crawl reads it: its Markdown,
/// title and metadata; a text's own bytes as its raw form; why it has none, when so.
pub fn render_document(body: &[u8], kind: trawl_doc::DocKind, parts: &mut PageParts) {
    use trawl_doc::DocKind;
    match trawl_doc::extract(body.to_vec(), kind, trawl_doc::Limits::default()) {
        Ok(d) => {
            parts.title = d.title;
            parts.markdown = Some(d.markdown);
            parts.meta.author = d.author;
            parts.meta.published = d.created;
            parts.meta.modified = d.modified;
            parts.meta.language = d.language;
            if d.pages > 0 {
                parts.extra.insert("numPages".into(), d.pages.into());
            }
        }
        Err(e) => {
            parts
                .extra
                .insert("documentError".into(), e.to_string().into());
        }
    }
    if matches!(kind, DocKind::Text | DocKind::Markdown) {
        parts.raw_html = Some(String::from_utf8_lossy(body).into_owned());
    }
}

/// A body that is not HTML: text as its own Markdown, anything else empty.
pub fn render_other(body: &[u8], content_type: Option<&str>, parts: &mut PageParts) {
    let text = content_type.is_some_and(|t| {
        let t = t.to_ascii_lowercase();
        t.starts_with("text/") || t.contains("json") || t.contains("xml")
    });
    if text {
        let s = String::from_utf8_lossy(body).into_owned();
        parts.markdown = Some(s.clone());
        parts.raw_html = Some(s);
    }
}

/// In document order, each once.
fn dedup(urls: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    urls.into_iter()
        .filter(|u| seen.insert(u.clone()))
        .collect()
}
