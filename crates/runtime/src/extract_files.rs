//! `trawl extract` on one file: the content extractor on saved HTML, without a crawl, into
//! the record the command prints.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use trawl_core::PageMeta;
use trawl_extract::content::{Options, PageType, extract};
use url::Url;

/// What was extracted from one file (or why nothing was): one JSON line of `trawl extract`.
#[derive(Debug, Serialize)]
pub struct ExtractedFile {
    /// The path read; `None` for standard input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub markdown: Option<String>,
    #[serde(flatten)]
    pub meta: PageMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_type: Option<PageType>,
    pub charset: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    /// Why the file could not be read (the other fields are then empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads `path`, or standard input for `-`.
fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .context("reading standard input")?;
        Ok(buf)
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    }
}

/// Extracts the page in `path` (`-`: standard input) as if fetched from `url`; a file that
/// cannot be read gives a record with `error` set rather than failing, so a batch goes on.
pub fn extract_file(path: &Path, url: Option<&Url>, markdown: bool, links: bool) -> ExtractedFile {
    let file = (path != Path::new("-")).then(|| path.display().to_string());
    let bytes = match read_input(path) {
        Ok(b) => b,
        Err(e) => {
            return ExtractedFile {
                file,
                url: url.map(Url::to_string),
                title: None,
                text: String::new(),
                markdown: None,
                meta: PageMeta::default(),
                page_type: None,
                charset: String::new(),
                links: Vec::new(),
                error: Some(format!("{e:#}")),
            };
        }
    };
    // Files carry no Content-Type header: the charset comes from a BOM, a <meta> or a guess.
    let (html, charset) = trawl_body::decode_html(&bytes, None);
    let c = extract(
        &html,
        url,
        Options {
            markdown,
            markdown_links: links,
            links: true,
            ..Options::default()
        },
    );
    ExtractedFile {
        file,
        url: url.map(Url::to_string),
        title: c.title,
        text: c.text,
        markdown: c.markdown,
        meta: c.meta,
        page_type: c.kind,
        charset: charset.to_string(),
        links: c.links.map(|l| l.links).unwrap_or_default(),
        error: None,
    }
}
