//! A crawl's directory: whether a crawl may start in it, and bringing its files back to
//! what the store has committed before a resumed crawl writes to them.

use std::path::Path;

use anyhow::{Context, bail};
use trawl_core::UrlKind;
use trawl_store::dir::{CrawlSummary, DirState};

/// How a crawl starts in its directory.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// An empty (or new) directory.
    Fresh,
    /// trawl's earlier outputs are removed first (`--overwrite`).
    Overwrite,
    /// The unfinished crawl there goes on (`--resume`).
    Resume(Box<CrawlSummary>),
}

/// Decides from what `out` holds; refuses rather than write over anything not asked for.
pub fn decide(
    out: &Path,
    start: &[(String, UrlKind)],
    resume: bool,
    overwrite: bool,
) -> anyhow::Result<Start> {
    let shown = out.display();
    match trawl_store::dir::inspect(out).with_context(|| format!("reading {shown}"))? {
        DirState::Empty => Ok(Start::Fresh),
        DirState::Foreign(names) => bail!(
            "{shown} is not empty and holds files trawl did not write ({}); \
             give an empty or new --out",
            names.join(", ")
        ),
        DirState::Outputs if overwrite => Ok(Start::Overwrite),
        DirState::Outputs => bail!(
            "{shown} holds the outputs of an earlier crawl that cannot be resumed; \
             --overwrite replaces them, or give another --out"
        ),
        DirState::Crawl(s) if overwrite || (resume && !s.started) => Ok(Start::Overwrite),
        DirState::Crawl(s) if s.finished => bail!(
            "{shown} holds a finished crawl ({}; {} pages, started {}); \
             --overwrite crawls again from scratch, or give another --out",
            s.crawl,
            s.written,
            s.started_at
        ),
        DirState::Crawl(s) if resume => {
            same_start(&s, start, out)?;
            Ok(Start::Resume(Box::new(s)))
        }
        DirState::Crawl(s) => bail!(
            "{shown} holds an unfinished crawl ({}: {} pages written, {} queued, {} run(s)); \
             --resume continues it, --overwrite starts over",
            s.crawl,
            s.written,
            s.queued,
            s.runs
        ),
    }
}

fn same_start(s: &CrawlSummary, start: &[(String, UrlKind)], out: &Path) -> anyhow::Result<()> {
    let mut given: Vec<&str> = start.iter().map(|(u, _)| u.as_str()).collect();
    let mut stored: Vec<&str> = s.start.iter().map(String::as_str).collect();
    given.sort_unstable();
    stored.sort_unstable();
    if given != stored {
        bail!(
            "the crawl in {} started from {}, not {}: give the same start URLs to resume it, \
             or --overwrite to start a new crawl there",
            out.display(),
            stored.join(" "),
            given.join(" ")
        );
    }
    Ok(())
}

/// Cuts `pages.jsonl` (or `changes.jsonl`) back to the committed `offset`: later lines are
/// of pages the store does not know as written, which the resumed crawl fetches again.
pub fn cut_back(path: &Path, offset: u64) -> anyhow::Result<()> {
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && offset == 0 => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if len < offset {
        bail!(
            "{} is shorter ({len} bytes) than the crawl store records ({offset}): the file was \
             changed after the crawl wrote it; --overwrite starts over",
            path.display()
        );
    }
    if len > offset {
        tracing::info!(
            bytes = len - offset,
            "pages.jsonl: cutting off the lines written after the last commit"
        );
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(offset)?;
    }
    Ok(())
}

/// Cuts the newest WARC file back to its last whole record (only the file being written
/// at a kill can be torn; earlier ones were closed).
pub fn repair_warc(dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if let Some(last) = trawl_fetcher::warcout::list_warc_files(dir)?.last() {
        let cut = trawl_fetcher::warcout::repair(last)
            .with_context(|| format!("repairing {}", last.display()))?;
        if cut > 0 {
            tracing::warn!(file = %last.display(), bytes = cut, "cut a torn WARC record");
        }
    }
    Ok(())
}
