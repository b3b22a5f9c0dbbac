//! The flags of `trawl crawl` (and, in part, `trawl submit` and `trawl watch`): the start
//! URLs and the sections of [`trawl_core::settings::Settings`] as flags, mapped onto a
//! [`CrawlPlan`]. The flags' defaults are not written here: [`with_defaults`] fills them in
//! from the loaded settings layers.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use trawl_core::settings::{CrawlSettings, Settings, redact_url};
use trawl_runtime::{CrawlPlan, IndexPlan, StartMode, Targets};

use crate::index::CrawlIndexArgs;
use crate::progress::Progress;

/// What to crawl.
#[derive(Debug, Clone, Default, Args)]
pub struct TargetArgs {
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

impl From<TargetArgs> for Targets {
    fn from(a: TargetArgs) -> Targets {
        Targets {
            seeds: a.seeds,
            sitemaps: a.sitemaps,
            feeds: a.feeds,
            urls: a.urls,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CrawlArgs {
    #[command(flatten)]
    pub targets: TargetArgs,
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
    #[arg(long, value_name = "N")]
    pub queued_in_memory: usize,
    /// Pages the SimHash dedup gate keeps in memory (about 250 bytes each; the MinHash
    /// gate, the default, a quarter as many at about 1.2 KB each); past that the gate
    /// moves to OUT/gate.db, so memory stays flat however many pages the crawl keeps.
    #[arg(long, value_name = "N")]
    pub gate_in_memory: usize,
    /// Progress display: auto (a bar on a terminal), bar, log or none.
    #[arg(long, default_value = "auto")]
    pub progress: String,
    #[command(flatten)]
    pub index: CrawlIndexArgs,
}

impl CrawlArgs {
    /// The crawl these flags ask for over `settings` (the layers under the flags, for the
    /// settings that have no flag), its progress shown as `--progress` says.
    pub fn into_plan(self, settings: &Settings) -> CrawlPlan {
        let start = match (self.resume, self.overwrite) {
            (true, _) => StartMode::Resume,
            (_, true) => StartMode::Overwrite,
            _ => StartMode::Fresh,
        };
        CrawlPlan {
            targets: self.targets.into(),
            crawl: self.crawl,
            refine: self.refine,
            concurrency: self.concurrency,
            chromium: self.chromium,
            render_concurrency: self.render_concurrency,
            chromium_no_sandbox: settings.process.chromium_no_sandbox,
            webhook_secret: settings.process.webhook_secret().map(str::to_string),
            queued_in_memory: self.queued_in_memory,
            gate_in_memory: self.gate_in_memory,
            out: self.out,
            start,
            since: self.since,
            due_only: self.due_only,
            index: IndexPlan {
                no_index: self.index.no_index,
                index_uri: self.index.index_uri,
                settings: self.index.settings.into(),
            },
            progress: Arc::new(Progress::new(&self.progress)),
            control: Default::default(),
        }
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
                "nats_password" | "nats_token" | "refine_api_key" | "llm_api_key"
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
