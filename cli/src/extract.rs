//! `trawl extract`: the content extractor on local files, without a crawl. One page goes to
//! stdout as text, Markdown or JSON; several go out as JSON Lines, one object per file, in
//! the order given.

use std::io::Write;
use std::path::{Path, PathBuf};

use trawl_runtime::extract_files::{ExtractedFile, extract_file};
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

/// The file's record, extracted as `opts` asks.
fn record(path: &Path, opts: &ExtractOptions) -> ExtractedFile {
    extract_file(
        path,
        opts.url.as_ref(),
        opts.format != Format::Text,
        opts.links,
    )
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
        let r = record(&inputs[0], opts);
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
        let r = record(path, opts);
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
