//! The cluster from the command line: `trawl submit` starts a crawl (its spec in Redis, its
//! seeds on the `discovered` hop), `trawl status` shows each hop's lag and the crawl's
//! counts, `trawl dlq` lists and replays dead letters.

use anyhow::bail;
use trawl_cluster::dlq;
use trawl_cluster::status::Status;
use trawl_cluster::submit::{Submit, wait_drained};
use trawl_core::settings::{ClusterSettings, CrawlSettings, IndexSettings};
use trawl_core::spec::CrawlSpec;
use trawl_ingester::archive_list;
use trawl_runtime::Targets;

use crate::options::TargetArgs;

#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The crawl's id, which the services are started with (`TRAWL_CRAWL`).
    #[arg(long)]
    pub crawl: String,
    /// Block until the crawl has drained, then print its counts.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up (exit 1) after this many seconds (0: wait as long as it takes).
    #[arg(long, default_value_t = 0)]
    pub wait_timeout: u64,
    /// Replace the spec of a crawl with this id that is still running (its services
    /// restart their stages under it within a few seconds).
    #[arg(long)]
    pub replace: bool,
    /// A re-crawl: compare every page with the earlier crawl of this id (conditional
    /// requests, change events on `trawl.changed`; it must have drained).
    #[arg(long, value_name = "CRAWL")]
    pub since: Option<String>,
    /// With --since: fetch only the pages the adaptive revisit interval makes due.
    #[arg(long, requires = "since")]
    pub due_only: bool,
    /// Ingest web archives instead of crawling: a list of archives, one per line (Common
    /// Crawl's `warc.paths.gz` / `wet.paths.gz`; gzip or plain; a file or an http(s) URL),
    /// or an archive itself (`.warc[.gz]`, `.wet[.gz]`, `.arc[.gz]`). One job per archive
    /// for the `trawl-ingester` services; local paths must be readable by them.
    #[arg(long, value_name = "LIST", conflicts_with_all = ["since", "due_only"])]
    pub archives: Vec<String>,
    /// Where the lists' relative entries are: a URL prefix (Common Crawl's lists:
    /// `https://data.commoncrawl.org/`) or a directory [default: where the list is].
    #[arg(long, value_name = "URL|DIR", requires = "archives")]
    pub archive_base: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterSettings,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub settings: CrawlSettings,
    #[command(flatten)]
    pub index: IndexSettings,
    #[command(flatten)]
    pub refused: NotInCluster,
}

/// `trawl crawl` flags that mean nothing to a crawl on the cluster: each is a setting of
/// the services' processes. Given to `trawl submit`, they are refused with what to do.
#[derive(Debug, Default, clap::Args)]
pub struct NotInCluster {
    #[arg(long = "concurrency", id = "refused_concurrency", hide = true)]
    concurrency: Option<String>,
    #[arg(long = "out", id = "refused_out", hide = true)]
    out: Option<String>,
    #[arg(long = "progress", id = "refused_progress", hide = true)]
    progress: Option<String>,
    #[arg(long = "no-index", id = "refused_no_index", hide = true)]
    no_index: bool,
    #[arg(long = "index", id = "refused_index", hide = true)]
    index: Option<String>,
    #[arg(long = "no-embed", id = "refused_no_embed", hide = true)]
    no_embed: bool,
    #[arg(long = "model-dir", id = "refused_model_dir", hide = true)]
    model_dir: Option<String>,
}

impl NotInCluster {
    /// Why the first flag given cannot be submitted, if one was.
    pub fn check(&self) -> anyhow::Result<()> {
        let why = if self.concurrency.is_some() {
            Some((
                "--concurrency",
                "each service's workers are set by TRAWL_CONCURRENCY",
            ))
        } else if self.out.is_some() {
            Some(("--out", "each service writes under its own TRAWL_OUT"))
        } else if self.progress.is_some() {
            Some(("--progress", "use --wait for progress, or `trawl status`"))
        } else if self.no_index || self.index.is_some() {
            Some((
                "--index/--no-index",
                "the indexer service builds an index where TRAWL_INDEX_URI says, none without it",
            ))
        } else if self.no_embed {
            Some(("--no-embed", "set TRAWL_EMBED=false on the indexer service"))
        } else if self.model_dir.is_some() {
            Some(("--model-dir", "set TRAWL_MODEL_DIR on the indexer service"))
        } else {
            None
        };
        match why {
            Some((flag, what)) => bail!("{flag} has no meaning for a crawl on the cluster: {what}"),
            None => Ok(()),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The crawl's id (default: `TRAWL_CRAWL`, else `default`).
    #[arg(id = "crawl")]
    pub crawl: String,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterSettings,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum DlqAction {
    List,
    Replay,
}

#[derive(Debug, clap::Args)]
pub struct DlqArgs {
    #[arg(value_enum)]
    pub action: DlqAction,
    /// The stage whose input hop to look at: frontier, fetcher, extractor or indexer.
    pub stage: String,
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    #[command(flatten)]
    pub cluster: ClusterSettings,
}

fn spec_from(args: &SubmitArgs) -> anyhow::Result<CrawlSpec> {
    args.refused.check()?;
    let targets = Targets::from(args.targets.clone());
    let start = if args.archives.is_empty() {
        targets.resolve(&args.settings.normalizer())?.1
    } else {
        if !targets.seed_list()?.is_empty()
            || !targets.sitemaps.is_empty()
            || !targets.feeds.is_empty()
        {
            bail!("--archives ingests archives: give start URLs to another crawl id");
        }
        Vec::new()
    };
    let spec = CrawlSpec {
        crawl: args.crawl.clone(),
        start: start.iter().map(|(u, k)| (u.to_string(), *k)).collect(),
        settings: args.settings.clone(),
        index: args.index.clone(),
        since: args.since.clone(),
        due_only: args.due_only,
        state_shards: args.cluster.state_nodes().len() as u32,
    };
    trawl_cluster::submit::check(&spec)?;
    Ok(spec)
}

pub async fn submit(args: &SubmitArgs) -> anyhow::Result<()> {
    let spec = spec_from(args)?;
    // The lists are read before anything is stored: a list that cannot be read stops here.
    let archives = archive_list::archives(&args.archives, args.archive_base.as_deref()).await?;
    let how = Submit {
        replace: args.replace,
        archives,
    };
    let c = &args.cluster;
    let done = trawl_cluster::submit::submit(c, &spec, &how).await?;
    if !how.archives.is_empty() {
        eprintln!(
            "{} archives queued for the ingesters ({} submitted before, left as they are)",
            done.archives_queued, done.archives_known
        );
    }
    println!("{}", spec.crawl);
    if !args.wait {
        return Ok(());
    }
    let s = wait_drained(c, &args.crawl, args.wait_timeout, &mut |s| {
        eprintln!("{}", s.progress_line())
    })
    .await?;
    println!("{}", serde_json::to_string_pretty(&s)?);
    let failed = s.archives_failed();
    if failed > 0 {
        bail!(
            "{failed} archives failed on every try (their reasons: `trawl status {}`, \
             `trawl dlq list ingester`)",
            args.crawl
        );
    }
    Ok(())
}

/// The crawl as the cluster holds it now.
pub async fn status(c: &ClusterSettings, crawl: &str) -> anyhow::Result<Status> {
    Ok(trawl_cluster::status::status(c, crawl).await?)
}

pub async fn print_status(args: &StatusArgs) -> anyhow::Result<()> {
    let s = status(&args.cluster, &args.crawl).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{s}");
    }
    Ok(())
}

pub async fn dlq(args: &DlqArgs) -> anyhow::Result<()> {
    let hop = dlq::hop_of(&args.stage)?;
    match args.action {
        DlqAction::List => {
            let letters = dlq::list(&args.cluster, hop, args.limit).await?;
            for d in &letters {
                println!("{}", serde_json::to_string(d)?);
            }
            eprintln!("{} dead letters on {hop}", letters.len());
        }
        DlqAction::Replay => {
            let (n, subject) = dlq::replay(&args.cluster, hop, args.limit).await?;
            eprintln!("{n} dead letters replayed onto {subject}");
        }
    }
    Ok(())
}
