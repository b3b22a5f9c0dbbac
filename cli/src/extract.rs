//! `trawl extract`: the content extractor on local files, without a crawl. One page goes to
//! stdout as text, Markdown or JSON; several go out as JSON Lines, one object per file, in
//! the order given.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use trawl_core::PageMeta;
use trawl_extract::content::{Options, PageType, extract};
use url::Url;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ExtractOptions {
    /// HTML files to read; `-` (or none) reads standard input.
    pub inputs: Vec<PathBuf>,
    /// What to print for one page; several pages are always printed as JSON Lines.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// The page's address: resolves relative links and helps recognise the kind of page.
    #[arg(long)]
    pub url: Option<Url>,
    /// Keep hyperlinks in the Markdown.
    #[arg(long)]
    pub links: bool,
}

#[derive(Serialize)]
struct Record {
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    markdown: Option<String>,
    #[serde(flatten)]
    meta: PageMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_type: Option<PageType>,
    charset: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    links: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

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

fn record(path: &Path, opts: &ExtractOptions, markdown: bool) -> Record {
    let file = (path != Path::new("-")).then(|| path.display().to_string());
    let bytes = match read_input(path) {
        Ok(b) => b,
        Err(e) => {
            return Record {
                file,
                url: opts.url.as_ref().map(Url::to_string),
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
        opts.url.as_ref(),
        Options {
            markdown,
            markdown_links: opts.links,
            links: true,
            ..Options::default()
        },
    );
    Record {
        file,
        url: opts.url.as_ref().map(Url::to_string),
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

/// Runs the command; returns whether every input was read.
pub fn run(opts: &ExtractOptions, out: &mut impl Write) -> anyhow::Result<bool> {
    let inputs: Vec<PathBuf> = if opts.inputs.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        opts.inputs.clone()
    };
    if inputs.iter().filter(|p| *p == Path::new("-")).count() > 1 {
        anyhow::bail!("standard input (`-`) can be read only once");
    }
    if inputs.len() == 1 {
        let r = record(&inputs[0], opts, opts.format != Format::Text);
        if let Some(e) = r.error {
            anyhow::bail!(e);
        }
        match opts.format {
            Format::Text => writeln!(out, "{}", r.text)?,
            Format::Markdown => writeln!(out, "{}", r.markdown.unwrap_or_default())?,
            Format::Json => writeln!(out, "{}", serde_json::to_string(&r)?)?,
        }
        return Ok(true);
    }
    let mut all_ok = true;
    for (n, path) in inputs.iter().enumerate() {
        let r = record(path, opts, opts.format != Format::Text);
        if let Some(e) = &r.error {
            all_ok = false;
            tracing::warn!("{e}");
        }
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
        if (n + 1) % 1000 == 0 {
            tracing::info!("{} of {} files extracted", n + 1, inputs.len());
        }
    }
    out.flush()?;
    Ok(all_ok)
}
