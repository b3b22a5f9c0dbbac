//! The cluster from the command line: `trawl submit` starts a crawl (its spec in Redis, its
//! seeds on the `discovered` hop), `trawl status` shows each hop's lag and the crawl's
//! counts, `trawl dlq` lists and replays dead letters.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
use trawl_cluster::jetstream::{JetStreamQueue, QueueConfig, dead_letters};
use trawl_cluster::redis_state::RedisState;
use trawl_cluster::service::{HOPS, ServiceConfig};
use trawl_cluster::spec::CrawlSpec;
use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_core::{Discovered, DiscoveredUrl, MESSAGE_VERSION, UrlKind};

use crate::options::CrawlOptions;

#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[arg(long, env = "TRAWL_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    #[arg(
        long,
        env = "TRAWL_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    #[arg(long, env = "TRAWL_QUEUE_PREFIX", default_value = "trawl")]
    pub queue_prefix: String,
}

impl ClusterArgs {
    fn service_config(&self, crawl: &str) -> ServiceConfig {
        ServiceConfig {
            nats_url: self.nats_url.clone(),
            redis_url: self.redis_url.clone(),
            queue_prefix: self.queue_prefix.clone(),
            crawl: crawl.to_string(),
            ..ServiceConfig::default()
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The crawl's id, which the services are started with (`TRAWL_CRAWL`).
    #[arg(long, env = "TRAWL_CRAWL", default_value = "default")]
    pub crawl: String,
    /// Block until the crawl has drained, then print its counts.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up (exit 1) after this many seconds (0: wait as long as it takes).
    #[arg(long, default_value_t = 0)]
    pub wait_timeout: u64,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub opts: CrawlOptions,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[arg(env = "TRAWL_CRAWL", default_value = "default")]
    pub crawl: String,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
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
    pub cluster: ClusterArgs,
}

#[derive(Debug, Serialize)]
pub struct Status {
    pub crawl: String,
    /// Messages waiting or unacknowledged, per hop.
    pub pending: BTreeMap<String, u64>,
    pub queued_urls: usize,
    pub host_claims: usize,
    pub pages_fetched: i64,
    pub pages_indexed: i64,
    pub duplicates: i64,
    pub dead_letters: u64,
    pub drained: bool,
    pub counters: BTreeMap<String, i64>,
}

fn spec_from(args: &SubmitArgs) -> anyhow::Result<CrawlSpec> {
    let o = &args.opts;
    let mut spec = CrawlSpec {
        crawl: args.crawl.clone(),
        start: Vec::new(),
        scope: o.scope,
        max_depth: o.max_depth,
        max_pages: o.max_pages,
        max_pages_per_host: o.max_pages_per_host,
        max_queued: o.max_queued,
        max_query_variants: o.max_query_variants,
        max_url_length: o.max_url_length,
        strip_params: o.strip_params.clone(),
        per_host: o.concurrency_per_host.max(1),
        delay_ms: o.delay_ms,
        user_agent: o.user_agent.clone(),
        allow_private: o.allow_private,
        timeout_s: o.timeout,
        connect_timeout_s: o.connect_timeout,
        max_body_bytes: o.max_body_bytes,
        max_decoded_bytes: o.max_decoded_bytes,
        dedup_distance: (!o.no_dedup).then_some(o.dedup_distance),
    };
    let norm = spec.normalizer();
    let mut add = |raw: &String, kind| -> anyhow::Result<()> {
        let u = norm
            .parse(raw, None)
            .with_context(|| format!("start URL {raw:?} cannot be crawled"))?;
        spec.start.push((u.to_string(), kind));
        Ok(())
    };
    let mut seeds = o.seeds.clone();
    if let Some(f) = &o.urls {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("reading URL list {}", f.display()))?;
        seeds.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    for s in &seeds {
        add(s, UrlKind::Page)?;
    }
    for s in &o.sitemaps {
        add(s, UrlKind::Sitemap)?;
    }
    for s in &o.feeds {
        add(s, UrlKind::Feed)?;
    }
    if spec.start.is_empty() {
        bail!("nothing to crawl: give at least one SEED URL, --sitemap, --feed or --urls FILE");
    }
    Ok(spec)
}

pub async fn submit(args: &SubmitArgs) -> anyhow::Result<()> {
    let spec = spec_from(args)?;
    let cfg = args.cluster.service_config(&args.crawl);
    let client = cfg.nats().await.map_err(anyhow::Error::msg)?;
    trawl_cluster::spec::put(&cfg.redis_url, &spec)
        .await
        .map_err(anyhow::Error::msg)
        .context("storing the crawl spec in Redis")?;
    let discovered: std::sync::Arc<JetStreamQueue<Discovered>> = cfg
        .queue(&client, "discovered")
        .await
        .map_err(anyhow::Error::msg)?;
    discovered
        .publish(Discovered {
            v: MESSAGE_VERSION,
            crawl: spec.crawl.clone(),
            source: None,
            urls: spec
                .start
                .iter()
                .map(|(url, kind)| DiscoveredUrl {
                    url: url.clone(),
                    depth: 0,
                    kind: *kind,
                })
                .collect(),
        })
        .await?;
    println!("{}", spec.crawl);
    if args.wait {
        let mut quiet = 0;
        let mut last = std::time::Instant::now();
        let started = std::time::Instant::now();
        loop {
            if args.wait_timeout > 0 && started.elapsed() > Duration::from_secs(args.wait_timeout) {
                bail!("the crawl did not drain in {} s", args.wait_timeout);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            let s = match status(&args.cluster, &args.crawl).await {
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
                return Ok(());
            }
            if last.elapsed() >= Duration::from_secs(2) {
                last = std::time::Instant::now();
                eprintln!(
                    "{} pages indexed, {} URLs queued, {} messages pending",
                    s.pages_indexed,
                    s.queued_urls,
                    s.pending.values().sum::<u64>()
                );
            }
        }
    }
    Ok(())
}

pub async fn status(args: &ClusterArgs, crawl: &str) -> anyhow::Result<Status> {
    let cfg = args.service_config(crawl);
    let client = cfg.nats().await.map_err(anyhow::Error::msg)?;
    let js = async_nats::jetstream::new(client.clone());
    let mut pending = BTreeMap::new();
    let mut dead = 0;
    for (hop, stage) in HOPS {
        let q = cfg.queue_config(hop, stage);
        let n = match js.get_stream(&q.stream).await {
            Ok(mut s) => s.info().await.map(|i| i.state.messages).unwrap_or(0),
            Err(_) => 0,
        };
        pending.insert(hop.to_string(), n);
        if let Ok(mut s) = js.get_stream(&q.dead_letter_stream).await {
            dead += s.info().await.map(|i| i.state.messages).unwrap_or(0);
        }
    }
    let state = RedisState::connect(&cfg.redis_url, crawl, 1, 1, 1)
        .await
        .context("connecting to Redis")?;
    let counters = state.counters().await?;
    let c = |k: &str| counters.get(k).copied().unwrap_or(0);
    let queued_urls = state.queued().await?;
    let host_claims = state.claims().await?;
    Ok(Status {
        crawl: crawl.to_string(),
        drained: pending.values().all(|n| *n == 0) && queued_urls == 0 && host_claims == 0,
        pending,
        queued_urls,
        host_claims,
        pages_fetched: c("fetcher.requests"),
        pages_indexed: c("pages.total"),
        duplicates: c("pages.duplicate.exact") + c("pages.duplicate.near"),
        dead_letters: dead,
        counters,
    })
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
    Ok(())
}

fn hop_of(stage: &str) -> anyhow::Result<(&'static str, &'static str)> {
    HOPS.iter()
        .copied()
        .find(|(h, s)| *s == stage || *h == stage)
        .with_context(|| {
            format!("unknown stage {stage:?}: frontier, fetcher, extractor or indexer")
        })
}

pub async fn dlq(args: &DlqArgs) -> anyhow::Result<()> {
    let (hop, stage) = hop_of(&args.stage)?;
    let cfg = args.cluster.service_config("default");
    let client = cfg.nats().await.map_err(anyhow::Error::msg)?;
    let q: QueueConfig = cfg.queue_config(hop, stage);
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
                // Back on the hop first, then out of the dead letters: never lost in between.
                js.publish(q.subject.clone(), d.payload.clone().into())
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
