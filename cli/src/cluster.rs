//! The cluster from the command line: `trawl submit` starts a crawl (its spec in Redis, its
//! seeds on the `discovered` hop), `trawl status` shows each hop's lag and the crawl's
//! counts, `trawl dlq` lists and replays dead letters.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use trawl_cluster::jetstream::{JetStreamQueue, QueueConfig, dead_letters};
use trawl_cluster::redis_archives::RedisLedger;
use trawl_cluster::service;
use trawl_cluster::status::Status;
use trawl_core::archives::{ArchiveLedger, ArchiveProgress, ArchiveStage, ArchivesSummary};
use trawl_core::pipeline::{Hop, Stage};
use trawl_core::queue::Queue;
use trawl_core::settings::{ClusterSettings, CrawlSettings, IndexSettings, redact_url};
use trawl_core::spec::CrawlSpec;
use trawl_core::{ArchiveJob, Discovered, MESSAGE_VERSION};

use crate::options::TargetArgs;
use trawl_runtime::Targets;

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
    if args.settings.boilerplate_min_pages > 0 {
        bail!(
            "--boilerplate-min-pages (boilerplate_min_pages: {} from the flag, file or \
             environment) has no meaning for a crawl on the cluster: it needs every page of a \
             host to pass one extractor, and the cluster's extractors each see part",
            args.settings.boilerplate_min_pages
        );
    }
    args.settings.validate()?;
    trawl_cluster::redis_shards::check_crawl_id(&args.crawl).map_err(anyhow::Error::msg)?;
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
    Ok(CrawlSpec {
        crawl: args.crawl.clone(),
        start: start.iter().map(|(u, k)| (u.to_string(), *k)).collect(),
        settings: args.settings.clone(),
        index: args.index.clone(),
        since: args.since.clone(),
        due_only: args.due_only,
        state_shards: args.cluster.state_nodes().len() as u32,
    })
}

pub async fn submit(args: &SubmitArgs) -> anyhow::Result<()> {
    let spec = spec_from(args)?;
    // The lists are read before anything is stored: a list that cannot be read stops here.
    let sources =
        crate::archive_list::archives(&args.archives, args.archive_base.as_deref()).await?;
    let c = &args.cluster;
    let client = service::nats(c).await.map_err(anyhow::Error::msg)?;
    if let Some(since) = &spec.since {
        check_baseline(c, &spec.crawl, since).await?;
    }
    // A crawl keeps its state's servers for life, --replace or not: its hosts would be
    // looked for on other shards than the ones they are queued on.
    // A spec this version cannot read is handled below (running: refused; drained or
    // --replace: replaced).
    let old = trawl_cluster::spec::get(&c.redis_url, &spec.crawl).await;
    if let Ok(Some(old)) = old.as_ref()
        && old.state_shards != spec.state_shards
    {
        bail!(
            "crawl {:?} keeps its per-host state on {} Redis server(s); this submit names {} \
             (TRAWL_REDIS_STATE_URLS): submit under another --crawl id",
            args.crawl,
            old.state_shards,
            spec.state_shards
        );
    }
    let put = |replace| trawl_cluster::spec::put(&c.redis_url, &spec, replace);
    if !put(args.replace).await.map_err(anyhow::Error::msg)? {
        // A crawl with this id exists. A running one keeps its spec unless --replace says
        // so; a drained one takes the new spec and seeds (its seen-set stays: only URLs it
        // has not crawled yet are fetched).
        let s = status(c, &args.crawl).await?;
        if !s.drained {
            bail!(
                "crawl {:?} is running ({} URLs queued for it, {} host slots held, {} messages \
                 pending on the hops of {:?}): wait for it, submit under another --crawl id, or \
                 give --replace",
                args.crawl,
                s.queued_urls,
                s.host_claims,
                s.pending.values().sum::<u64>(),
                c.queue_prefix
            );
        }
        put(true).await.map_err(anyhow::Error::msg)?;
    }
    // Running services restart under a replaced spec: the seeds wait until none of them
    // still runs another (they would be admitted under its scope and budgets).
    trawl_cluster::spec_watch::wait_taken(
        &c.redis_url,
        &spec.crawl,
        &spec,
        Duration::from_secs(180),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    if args.archives.is_empty() {
        let discovered: Arc<JetStreamQueue<Discovered>> =
            service::queue(&client, c, Hop::Discovered)
                .await
                .map_err(anyhow::Error::msg)?;
        discovered.publish(spec.seeds_message()).await?;
    } else {
        submit_archives(&client, c, &spec.crawl, &sources).await?;
    }
    println!("{}", spec.crawl);
    if args.wait {
        let s = wait_drained(c, &args.crawl, args.wait_timeout).await?;
        let failed = s
            .archives
            .as_ref()
            .and_then(|a| a.stages.get("failed").copied())
            .unwrap_or(0);
        if failed > 0 {
            bail!(
                "{failed} archives failed on every try (their reasons: `trawl status {}`, \
                 `trawl dlq list ingester`)",
                args.crawl
            );
        }
    }
    Ok(())
}

/// One job per archive not known to the crawl's ledger yet (or failed before: submitting
/// again retries it); the ledger entry is written before the job, so `trawl status`
/// counts it from the start.
async fn submit_archives(
    client: &async_nats::Client,
    c: &ClusterSettings,
    crawl: &str,
    sources: &[String],
) -> anyhow::Result<()> {
    let ledger = RedisLedger::connect(&c.redis_url, crawl).await?;
    let jobs: Arc<JetStreamQueue<ArchiveJob>> = service::queue(client, c, Hop::Archives)
        .await
        .map_err(anyhow::Error::msg)?;
    let (mut queued, mut known) = (0, 0);
    for source in sources {
        if !ledger.add(&ArchiveProgress::queued(source)).await? {
            match ledger.get(source).await? {
                // Tried again from where it stopped: the records through stay through.
                Some(mut p) if p.stage == ArchiveStage::Failed => {
                    p.stage = ArchiveStage::Queued;
                    p.failures = 0;
                    p.error = None;
                    ledger.put(&p).await?;
                }
                _ => {
                    known += 1;
                    continue;
                }
            }
        }
        jobs.publish(ArchiveJob {
            v: MESSAGE_VERSION,
            crawl: crawl.to_string(),
            source: source.clone(),
        })
        .await?;
        queued += 1;
    }
    eprintln!(
        "{queued} archives queued for the ingesters ({known} submitted before, left as they are)"
    );
    Ok(())
}

/// A re-crawl's earlier crawl must be another one, known to this Redis, and drained (a
/// crawl still running is no baseline: the pages it has not written yet would be "new").
async fn check_baseline(c: &ClusterSettings, crawl: &str, since: &str) -> anyhow::Result<()> {
    if since == crawl {
        bail!("--since {since:?} names this crawl: a re-crawl needs a new --crawl id");
    }
    if trawl_cluster::spec::get(&c.redis_url, since)
        .await
        .map_err(anyhow::Error::msg)?
        .is_none()
    {
        bail!(
            "--since {since:?}: no crawl of that id in {}",
            redact_url(&c.redis_url)
        );
    }
    let s = status(c, since).await?;
    if !s.drained {
        bail!(
            "--since {since:?} is still running ({} URLs queued, {} host slots held): wait \
             for it to drain",
            s.queued_urls,
            s.host_claims
        );
    }
    Ok(())
}

/// Polls the crawl's status until it has been drained four times in a row, then prints it.
async fn wait_drained(c: &ClusterSettings, crawl: &str, timeout_s: u64) -> anyhow::Result<Status> {
    let mut quiet = 0;
    let mut last = std::time::Instant::now();
    let started = std::time::Instant::now();
    // Where a crawl that never drains is stuck: the last status read, hop by hop.
    let mut seen: Option<Status> = None;
    loop {
        if timeout_s > 0 && started.elapsed() > Duration::from_secs(timeout_s) {
            let Some(s) = seen else {
                bail!("the crawl did not drain in {timeout_s} s (no status could be read)");
            };
            bail!(
                "the crawl did not drain in {timeout_s} s: {} URLs queued, {} host slots held, \
                 {} pages fetched, {} indexed, {} dead letters; messages pending by hop: {}",
                s.queued_urls,
                s.host_claims,
                s.pages_fetched,
                s.pages_indexed,
                s.dead_letters,
                pending_by_hop(&s)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let s = match status(c, crawl).await {
            Ok(s) => s,
            // NATS or Redis briefly away: keep waiting.
            Err(e) => {
                tracing::warn!("status: {e:#}");
                quiet = 0;
                continue;
            }
        };
        quiet = if s.drained { quiet + 1 } else { 0 };
        if quiet >= 4 {
            println!("{}", serde_json::to_string_pretty(&s)?);
            return Ok(s);
        }
        if last.elapsed() >= Duration::from_secs(2) {
            last = std::time::Instant::now();
            let archives = s.archives.as_ref().map_or(String::new(), |a| {
                format!(
                    ", archives {} of {} done",
                    a.stages.get("done").copied().unwrap_or(0),
                    a.total
                )
            });
            eprintln!(
                "{} pages indexed, {} URLs queued, {} messages pending{archives}",
                s.pages_indexed,
                s.queued_urls,
                s.pending.values().sum::<u64>()
            );
        }
        seen = Some(s);
    }
}

/// `hop n, ...` for the hops with messages pending, or `none`.
fn pending_by_hop(s: &Status) -> String {
    let hops: Vec<String> = s
        .pending
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(hop, n)| format!("{hop} {n}"))
        .collect();
    if hops.is_empty() {
        "none".into()
    } else {
        hops.join(", ")
    }
}

/// Whether the crawl needs no end-of-crawl check (not a re-crawl) or has run it.
/// The crawl as the cluster holds it now.
pub async fn status(c: &ClusterSettings, crawl: &str) -> anyhow::Result<Status> {
    Ok(trawl_cluster::status::status(c, crawl).await?)
}

pub async fn print_status(args: &StatusArgs) -> anyhow::Result<()> {
    let s = status(&args.cluster, &args.crawl).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "crawl {} ({})",
        s.crawl,
        if s.drained { "drained" } else { "running" }
    );
    for (hop, n) in &s.pending {
        println!("  {hop:<11} {n} pending");
    }
    println!(
        "  {} URLs queued, {} host slots held, {} pages fetched, {} indexed, {} duplicates, {} dead letters",
        s.queued_urls,
        s.host_claims,
        s.pages_fetched,
        s.pages_indexed,
        s.duplicates,
        s.dead_letters
    );
    if let Some(a) = &s.archives {
        print_archives(a);
    }
    Ok(())
}

fn print_archives(a: &ArchivesSummary) {
    let stages: Vec<String> = a.stages.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!(
        "  archives: {} ({}); {} records read, {} documents, {} duplicates, {} malformed",
        a.total,
        stages.join(", "),
        a.records,
        a.documents,
        a.duplicates,
        a.malformed
    );
    for p in &a.unfinished {
        let stage = p.stage.name();
        let why = p
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(": {e}"));
        println!(
            "    {stage:<8} {} (try {}, {} records, {} documents){why}",
            p.source,
            p.attempts,
            p.records_read(),
            p.documents
        );
    }
}

/// The hop a stage consumes, by the stage's name or the hop's.
fn hop_of(stage: &str) -> anyhow::Result<Hop> {
    Stage::from_name(stage)
        .map(Stage::consumes)
        .or_else(|| Hop::from_name(stage))
        .with_context(|| {
            format!(
                "unknown stage {stage:?}: ingester, frontier, fetcher, extractor, renderer, \
                 indexer, refiner or notifier"
            )
        })
}

/// A dead letter as it goes back on its hop. A fetch job leaves its host claim behind
/// (released when it was dead-lettered): without one, the fetcher puts it in its host's
/// queue to be claimed anew.
fn replayable(hop: Hop, payload: &str) -> Vec<u8> {
    if hop == Hop::Fetch
        && let Ok(mut v) = serde_json::from_str::<serde_json::Value>(payload)
        && let Some(job) = v.as_object_mut()
    {
        job.remove("claim");
        return serde_json::to_vec(&v).unwrap_or_else(|_| payload.as_bytes().to_vec());
    }
    payload.as_bytes().to_vec()
}

pub async fn dlq(args: &DlqArgs) -> anyhow::Result<()> {
    let hop = hop_of(&args.stage)?;
    let client = service::nats(&args.cluster)
        .await
        .map_err(anyhow::Error::msg)?;
    let q = QueueConfig::from_settings(&args.cluster, hop);
    let letters = dead_letters(&client, &q, args.limit).await?;
    match args.action {
        DlqAction::List => {
            for d in &letters {
                println!("{}", serde_json::to_string(d)?);
            }
            eprintln!("{} dead letters on {hop}", letters.len());
        }
        DlqAction::Replay => {
            let js = async_nats::jetstream::new(client.clone());
            let dl = js
                .get_stream(&q.dead_letter_stream)
                .await
                .context("dead-letter stream")?;
            for d in &letters {
                let payload = replayable(hop, &d.payload);
                // Back on the hop first, then out of the dead letters: never lost in between.
                js.publish(q.subject.clone(), payload.into())
                    .await?
                    .await
                    .context("republishing")?;
                dl.delete_message(d.seq)
                    .await
                    .context("removing the dead letter")?;
            }
            eprintln!("{} dead letters replayed onto {}", letters.len(), q.subject);
        }
    }
    Ok(())
}
