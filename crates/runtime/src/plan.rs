//! What a crawl is asked to do, as a plain value: [`CrawlPlan`]. The command line maps its
//! flags onto one, `trawl serve` builds one per job, and [`crate::crawl`] runs it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use trawl_core::UrlKind;
use trawl_core::settings::{CrawlSettings, IndexSettings, RefineSettings, Settings};
use trawl_core::urlnorm::Normalizer;
use trawl_index::{IndexOptions, Precision};
use url::Url;

use crate::progress::{NoProgress, ProgressSink};

/// Start URLs, normalized, with what each is.
pub type StartUrls = Vec<(Url, UrlKind)>;

/// What to crawl.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    /// Start URLs.
    pub seeds: Vec<String>,
    /// Sitemap URLs (XML, sitemap index, plain text, gzip) to read URLs from.
    pub sitemaps: Vec<String>,
    /// RSS or Atom feed URLs to read URLs from.
    pub feeds: Vec<String>,
    /// A file with more seed URLs, one per line (`#` starts a comment).
    pub urls: Option<PathBuf>,
}

impl Targets {
    pub fn seeds<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Self {
        Targets {
            seeds: seeds.into_iter().map(Into::into).collect(),
            ..Targets::default()
        }
    }

    /// The seeds given directly and in the URL file, as written.
    pub fn seed_list(&self) -> anyhow::Result<Vec<String>> {
        let mut seeds = self.seeds.clone();
        if let Some(f) = &self.urls {
            seeds.extend(read_url_file(f)?);
        }
        Ok(seeds)
    }

    /// The seeds as written (the URL file read once) and every start URL, normalized,
    /// with what it is. Fails on an URL that cannot be crawled and when there is nothing
    /// to crawl.
    pub fn resolve(&self, norm: &Normalizer) -> anyhow::Result<(Vec<String>, StartUrls)> {
        let parse = |raw: &String| {
            norm.parse(raw, None)
                .with_context(|| format!("start URL {raw:?} cannot be crawled"))
        };
        let seeds = self.seed_list()?;
        let mut start = Vec::new();
        for s in &seeds {
            start.push((parse(s)?, UrlKind::Page));
        }
        for s in &self.sitemaps {
            start.push((parse(s)?, UrlKind::Sitemap));
        }
        for s in &self.feeds {
            start.push((parse(s)?, UrlKind::Feed));
        }
        if start.is_empty() {
            anyhow::bail!(
                "nothing to crawl: give at least one SEED URL, --sitemap, --feed or --urls FILE"
            );
        }
        Ok((seeds, start))
    }
}

fn read_url_file(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading URL list {}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

/// What becomes of a crawl already in the output directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StartMode {
    /// A new crawl: a directory holding one is refused.
    #[default]
    Fresh,
    /// Continue the unfinished crawl there (stopped by Ctrl-C, a kill or a crash); in an
    /// empty directory, start one.
    Resume,
    /// Delete the crawl there (trawl's files only) and start over.
    Overwrite,
}

/// Whether and how a crawl indexes what it writes.
#[derive(Debug, Clone)]
pub struct IndexPlan {
    /// Build no search index.
    pub no_index: bool,
    /// Where the index goes (default: OUT/index; a re-crawl: the earlier crawl's).
    pub index_uri: Option<String>,
    pub settings: IndexChoice,
}

/// How pages are chunked, embedded and deduplicated: the index section of the settings,
/// and this process's model.
#[derive(Debug, Clone)]
pub struct IndexChoice {
    /// Embed chunks (false: the full-text index only, no model needed).
    pub embed: bool,
    /// The embedding model's directory; unset: `TRAWL_MODEL_DIR`, else the cache.
    pub model_dir: Option<PathBuf>,
    /// The embedder's number format.
    pub precision: Precision,
    pub index: IndexSettings,
}

impl IndexChoice {
    pub fn from_settings(s: &Settings) -> Self {
        IndexChoice {
            embed: s.process.embed,
            model_dir: s.process.model_dir.clone(),
            // Settings::validate checks the name; a name it let through is the default.
            precision: s.process.embed_precision.parse().unwrap_or_default(),
            index: s.index.clone(),
        }
    }

    /// The options of an index at `dir`.
    pub fn options(&self, dir: &Path) -> IndexOptions {
        IndexOptions {
            precision: self.precision,
            ..IndexOptions::for_process(
                dir.to_string_lossy().to_string(),
                &self.index,
                self.embed,
                self.model_dir.clone(),
            )
        }
    }
}

impl IndexPlan {
    pub fn from_settings(s: &Settings) -> Self {
        IndexPlan {
            no_index: false,
            index_uri: s.process.index_uri.clone(),
            settings: IndexChoice::from_settings(s),
        }
    }

    /// The options of the index of a crawl writing to `out`.
    pub fn options(&self, out: &Path) -> IndexOptions {
        let dir = self
            .index_uri
            .clone()
            .map_or_else(|| out.join("index"), PathBuf::from);
        self.settings.options(&dir)
    }
}

/// A crawl run by another program: its stop (an interrupt, as Ctrl-C is: the crawl stays
/// resumable) and a live view of its counters, sent every 100 ms.
#[derive(Debug, Clone, Default)]
pub struct CrawlControl {
    pub stop: Option<trawl_core::pipeline::Shutdown>,
    pub live: Option<Arc<tokio::sync::watch::Sender<LiveCounts>>>,
}

/// What a running crawl has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Lines written to `pages.jsonl`.
    pub pages: i64,
    /// URLs waiting or in flight.
    pub queued: usize,
}

/// One crawl, everything it needs to run: what to crawl, its settings, where it writes and
/// what it does with a crawl already there, whether it re-crawls an earlier one, how it
/// indexes, where its progress goes and how another program stops it.
#[derive(Clone)]
pub struct CrawlPlan {
    pub targets: Targets,
    pub crawl: CrawlSettings,
    /// With `crawl.refine`: the engine that writes the edit programs.
    pub refine: RefineSettings,
    /// Requests in flight in total.
    pub concurrency: usize,
    /// The Chromium that renders pages; unset: `CHROME`, else one on `PATH`.
    pub chromium: Option<PathBuf>,
    /// Pages rendered at once, each in a browser tab of its own.
    pub render_concurrency: usize,
    /// Chromium without its sandbox (a container is the sandbox).
    pub chromium_no_sandbox: bool,
    /// The key a re-crawl's webhook deliveries are signed with; none: unsigned.
    pub webhook_secret: Option<String>,
    /// Queued URLs kept in memory; the rest wait in OUT/frontier.spill.
    pub queued_in_memory: usize,
    /// Pages the SimHash gate keeps in memory; past that it moves to OUT/gate.db.
    pub gate_in_memory: usize,
    /// The output directory; the crawl keeps its state there (`crawl.db`).
    pub out: PathBuf,
    pub start: StartMode,
    /// Re-crawl: compare with the finished crawl in this directory.
    pub since: Option<PathBuf>,
    /// With `since`: request only the pages whose revisit time has come.
    pub due_only: bool,
    pub index: IndexPlan,
    pub progress: Arc<dyn ProgressSink>,
    pub control: CrawlControl,
}

impl std::fmt::Debug for CrawlPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrawlPlan")
            .field("targets", &self.targets)
            .field("out", &self.out)
            .field("start", &self.start)
            .field("since", &self.since)
            .finish_non_exhaustive()
    }
}

impl CrawlPlan {
    /// A fresh crawl of `targets` into `out` with `settings`, indexed as they say, with no
    /// progress display.
    pub fn new(settings: &Settings, targets: Targets, out: impl Into<PathBuf>) -> Self {
        let p = &settings.process;
        CrawlPlan {
            targets,
            crawl: settings.crawl.clone(),
            refine: settings.refine.clone(),
            concurrency: p.concurrency,
            chromium: p.chromium.clone(),
            render_concurrency: p.render_concurrency,
            chromium_no_sandbox: p.chromium_no_sandbox,
            webhook_secret: p.webhook_secret().map(str::to_string),
            queued_in_memory: p.queued_in_memory,
            gate_in_memory: p.gate_in_memory,
            out: out.into(),
            start: StartMode::Fresh,
            since: None,
            due_only: false,
            index: IndexPlan::from_settings(settings),
            progress: Arc::new(NoProgress),
            control: CrawlControl::default(),
        }
    }

    /// A crawl of `seeds` with every default setting (no file, no environment).
    pub fn with_seeds<S: Into<String>>(seeds: impl IntoIterator<Item = S>, out: &Path) -> Self {
        CrawlPlan::new(&Settings::default(), Targets::seeds(seeds), out)
    }
}
