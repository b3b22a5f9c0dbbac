//! The flags of `trawl crawl` (and, in part, `trawl submit`): the start URLs, and the
//! sections of [`trawl_core::settings::Settings`] as flags. The flags' defaults are not
//! written here: [`with_defaults`] fills them in from the loaded settings layers.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, FromArgMatches};
use trawl_core::UrlKind;
use trawl_core::settings::{CrawlSettings, Settings, redact_url};
use trawl_core::urlnorm::Normalizer;
use url::Url;

/// Start URLs, normalized, with what each is.
pub type StartUrls = Vec<(Url, UrlKind)>;

/// What to crawl.
#[derive(Debug, Clone, Default, Args)]
pub struct Targets {
    /// Start URLs.
    #[arg(value_name = "SEED")]
    pub seeds: Vec<String>,
    /// Sitemap URLs (XML, sitemap index, plain text, gzip) to read URLs from.
    #[arg(long = "sitemap", value_name = "URL")]
    pub sitemaps: Vec<String>,
    /// RSS or Atom feed URLs to read URLs from.
    #[arg(long = "feed", value_name = "URL")]
    pub feeds: Vec<String>,
    /// A file with more seed URLs, one per line (`#` starts a comment).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
}

impl Targets {
    /// The seeds given directly and in `--urls`, as written.
    pub fn seed_list(&self) -> anyhow::Result<Vec<String>> {
        let mut seeds = self.seeds.clone();
        if let Some(f) = &self.urls {
            seeds.extend(read_url_file(f)?);
        }
        Ok(seeds)
    }

    /// The seeds as written (the `--urls` file read once) and every start URL, normalized,
    /// with what it is. Fails on an URL that cannot be crawled and when there is nothing to
    /// crawl.
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

#[derive(Debug, Clone, Args)]
pub struct CrawlOptions {
    #[command(flatten)]
    pub targets: Targets,
    #[command(flatten)]
    pub crawl: CrawlSettings,
    /// With `--refine`: the engine that writes the edit programs.
    #[command(flatten)]
    pub refine: trawl_core::settings::RefineSettings,
    /// Requests in flight in total.
    #[arg(long)]
    pub concurrency: usize,
    /// The Chromium that renders pages (`--render`); unset: `CHROME`, else
    /// `chromium-headless-shell` or `chromium` on PATH.
    #[arg(long, value_name = "PATH")]
    pub chromium: Option<PathBuf>,
    /// Pages rendered at once, each in a browser tab of its own.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(usize))]
    pub render_concurrency: usize,
    /// Output directory. A crawl keeps its state there (`crawl.db`); a directory holding
    /// anything else is refused.
    #[arg(long)]
    pub out: PathBuf,
    /// Continue the unfinished crawl in --out (stopped by Ctrl-C, a kill or a crash); in an
    /// empty directory, start one.
    #[arg(long, conflicts_with = "overwrite")]
    pub resume: bool,
    /// Delete the crawl in --out (trawl's files only) and start over.
    #[arg(long)]
    pub overwrite: bool,
    /// Re-crawl: compare with the finished crawl in DIR. Requests are conditional on its
    /// validators, unchanged pages are carried forward (not indexed again), new, changed
    /// and removed ones are written to `changes.jsonl` (and the webhook); its index is
    /// updated in place unless --index is given.
    #[arg(long, value_name = "DIR")]
    pub since: Option<PathBuf>,
    /// With --since: request only the pages whose adaptive revisit time has come; the
    /// others are carried forward unrequested (what each round of `trawl watch` does).
    #[arg(long, requires = "since")]
    pub due_only: bool,
    /// Queued URLs the frontier keeps in memory (about 400 bytes each); the rest wait in
    /// OUT/frontier.spill, so memory stays flat however far discovery runs ahead.
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    pub queued_in_memory: usize,
    /// Pages the SimHash dedup gate keeps in memory (about 250 bytes each); past that it
    /// moves to OUT/gate.db, so memory stays flat however many pages the crawl keeps.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub gate_in_memory: usize,
    /// Progress display: auto (a bar on a terminal), bar, log or none.
    #[arg(long, default_value = "auto")]
    pub progress: String,
    #[command(flatten)]
    pub index: crate::index::CrawlIndexArgs,
    /// How a program running the crawl (`trawl serve`) stops it and follows it; the
    /// command line leaves it empty (Ctrl-C stops, the progress line follows).
    #[arg(skip)]
    pub control: CrawlControl,
}

/// A crawl run by another program: its stop (an interrupt, as Ctrl-C is: the crawl stays
/// resumable) and a live view of its counters, sent every 100 ms.
#[derive(Debug, Clone, Default)]
pub struct CrawlControl {
    pub stop: Option<trawl_core::pipeline::Shutdown>,
    pub live: Option<std::sync::Arc<tokio::sync::watch::Sender<LiveCounts>>>,
}

/// What a running crawl has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Lines written to `pages.jsonl`.
    pub pages: i64,
    /// URLs waiting or in flight.
    pub queued: usize,
}

impl CrawlOptions {
    /// Options for a crawl of `seeds` with every default setting (no file, no
    /// environment), as the command line would give them.
    pub fn with_seeds<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Self {
        let cmd = with_defaults(
            CrawlOptions::augment_args(clap::Command::new("trawl")),
            &Settings::default(),
        );
        let m = cmd.get_matches_from(["trawl"]);
        // Every flag has a default from the settings: parsing no arguments cannot fail.
        let mut o = CrawlOptions::from_arg_matches(&m).expect("defaults parse");
        o.targets.seeds = seeds.into_iter().map(Into::into).collect();
        o
    }
}

/// `cmd` (and its subcommands) with each flag whose id is a settings field defaulting to
/// that field's value in `settings`: the defaults `--help` shows are the ones in force.
/// Secrets are used but not shown.
pub fn with_defaults(mut cmd: clap::Command, settings: &Settings) -> clap::Command {
    let flat = settings.flat();
    let ids: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    for id in ids {
        if let Some(values) = flat.get(&id).filter(|v| !v.is_empty()) {
            let secret = matches!(
                id.as_str(),
                "nats_password" | "nats_token" | "refine_api_key"
            ) || values.iter().any(|v| redact_url(v) != *v);
            let values = values.clone();
            // The derive marks every flag without a default in its attributes required.
            cmd = cmd.mut_arg(id, move |a| {
                a.default_values(values)
                    .required(false)
                    .hide_default_value(secret)
            });
        }
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in subs {
        let settings = settings.clone();
        cmd = cmd.mut_subcommand(name, move |s| with_defaults(s, &settings));
    }
    cmd
}
