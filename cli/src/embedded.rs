//! The embedded runtime: all four stages in one process over bounded in-memory queues and
//! in-memory state. The stages are the same library code the cluster services run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::sync::watch;
use tokio::task::JoinSet;
use trawl_core::queue::{MemoryQueue, Queue};
use trawl_core::scope::Scope;
use trawl_core::state::{MemoryState, State, WorkTracker};
use trawl_core::urlnorm::{DEFAULT_TRACKING_PARAMS, Normalizer};
use trawl_core::{Discovered, DiscoveredUrl, Doc, FetchJob, Fetched, MESSAGE_VERSION, UrlKind};
use trawl_fetcher::warcout::{WarcConfig, WarcWriterTask};
use trawl_fetcher::{Fetcher, FetcherConfig};
use trawl_frontier::{Frontier, FrontierConfig, TrapConfig};
use trawl_indexer::JsonlSink;
use url::Url;

use crate::options::CrawlOptions;
use crate::progress::Progress;
use crate::report::CrawlReport;

/// Where a crawl's outputs went.
#[derive(Debug, Clone)]
pub struct CrawlOutputs {
    pub dir: PathBuf,
    pub pages: PathBuf,
    pub report: PathBuf,
    pub warc_files: Vec<PathBuf>,
    /// The search index, when one was built.
    pub index: Option<PathBuf>,
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

fn parse_start(raw: &str, norm: &Normalizer) -> anyhow::Result<Url> {
    norm.parse(raw, None)
        .with_context(|| format!("start URL {raw:?} cannot be crawled"))
}

/// Runs a whole crawl and writes `pages.jsonl`, `warc/` and `report.json` under `opts.out`.
pub async fn crawl(opts: CrawlOptions) -> anyhow::Result<(CrawlReport, CrawlOutputs)> {
    let started = Instant::now();
    let started_at = chrono::Utc::now();
    let crawl_id = format!("crawl-{}", started_at.format("%Y%m%dT%H%M%S%.3fZ"));

    let normalizer = Normalizer::new(
        DEFAULT_TRACKING_PARAMS
            .iter()
            .copied()
            .chain(opts.strip_params.iter().map(String::as_str)),
    );
    let mut seeds = opts.seeds.clone();
    if let Some(f) = &opts.urls {
        seeds.extend(read_url_file(f)?);
    }
    if seeds.is_empty() && opts.sitemaps.is_empty() && opts.feeds.is_empty() {
        bail!("nothing to crawl: give at least one SEED URL, --sitemap, --feed or --urls FILE");
    }
    let mut start: Vec<(Url, UrlKind)> = Vec::new();
    for s in &seeds {
        start.push((parse_start(s, &normalizer)?, UrlKind::Page));
    }
    for s in &opts.sitemaps {
        start.push((parse_start(s, &normalizer)?, UrlKind::Sitemap));
    }
    for s in &opts.feeds {
        start.push((parse_start(s, &normalizer)?, UrlKind::Feed));
    }
    if opts.concurrency == 0 || opts.concurrency_per_host == 0 {
        bail!("--concurrency and --concurrency-per-host must be at least 1");
    }
    let scope_seeds: Vec<Url> = start.iter().map(|(u, _)| u.clone()).collect();
    let scope = Scope::new(opts.scope, &scope_seeds);

    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating output directory {}", opts.out.display()))?;
    let pages_path = opts.out.join("pages.jsonl");
    let report_path = opts.out.join("report.json");
    let warc_dir = opts.out.join("warc");
    if warc_dir.exists() {
        // Old files would mix with this crawl's: the outputs describe one crawl.
        for f in trawl_fetcher::warcout::list_warc_files(&warc_dir)? {
            std::fs::remove_file(&f).with_context(|| format!("removing old {}", f.display()))?;
        }
    }

    let tracker = WorkTracker::default();
    let state: Arc<dyn State> = Arc::new(MemoryState::new(
        opts.max_queued,
        opts.concurrency_per_host,
        tracker.clone(),
    ));
    let discovered_q = Arc::new(MemoryQueue::<Discovered>::new(4096, tracker.clone()));
    let fetch_q = Arc::new(MemoryQueue::<FetchJob>::new(
        opts.concurrency * 2,
        tracker.clone(),
    ));
    let fetched_q = Arc::new(MemoryQueue::<Fetched>::new(256, tracker.clone()));
    let docs_q = Arc::new(MemoryQueue::<Doc>::new(1024, tracker.clone()));

    let warc = if opts.no_warc {
        None
    } else {
        Some(WarcWriterTask::start(WarcConfig {
            dir: warc_dir.clone(),
            prefix: "trawl".into(),
            max_file_bytes: opts.warc_max_bytes,
        })?)
    };

    let frontier = Arc::new(Frontier::new(
        FrontierConfig {
            crawl: crawl_id.clone(),
            scope: scope.clone(),
            max_depth: opts.max_depth,
            max_pages: opts.max_pages,
            max_pages_per_host: opts.max_pages_per_host,
            traps: TrapConfig {
                max_url_len: opts.max_url_length,
                max_query_variants: opts.max_query_variants,
                ..TrapConfig::default()
            },
            normalizer: normalizer.clone(),
        },
        state.clone(),
    ));
    let mut fcfg = FetcherConfig::new(crawl_id.clone());
    if let Some(ua) = &opts.user_agent {
        fcfg.user_agent = ua.clone();
        fcfg.robots_agent = robots_token(ua);
    }
    fcfg.allow_private = opts.allow_private;
    fcfg.delay = Duration::from_millis(opts.delay_ms);
    fcfg.timeout = Duration::from_secs(opts.timeout.max(1));
    fcfg.connect_timeout = Duration::from_secs(opts.connect_timeout.max(1));
    fcfg.max_body_bytes = opts.max_body_bytes;
    fcfg.max_decoded_bytes = opts.max_decoded_bytes;
    let fetcher = Arc::new(Fetcher::new(
        fcfg,
        state.clone(),
        scope,
        normalizer,
        warc.as_ref().map(|w| w.handle()),
    )?);
    let sink = Arc::new(std::sync::Mutex::new(JsonlSink::create(&pages_path)?));
    // Opened before the first request: a missing model stops the crawl here, not after it.
    let index_opts = opts.index.options(&opts.out);
    let (index_tx, index_task) = if opts.index.no_index {
        (None, None)
    } else {
        let ix = trawl_index::Indexer::open(index_opts.clone())
            .await
            .with_context(|| format!("opening the index at {}", index_opts.uri))?;
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        (
            Some(tx),
            Some(tokio::spawn(trawl_indexer::run_index(ix, rx))),
        )
    };

    discovered_q
        .publish(Discovered {
            v: MESSAGE_VERSION,
            crawl: crawl_id.clone(),
            source: None,
            urls: start
                .iter()
                .map(|(u, kind)| DiscoveredUrl {
                    url: u.to_string(),
                    depth: 0,
                    kind: *kind,
                })
                .collect(),
        })
        .await?;

    // Two stop signals: intake (frontier, dispatch, fetchers) stops first on an interrupt,
    // so that what was already fetched is still extracted and written before output stops.
    let (intake_tx, intake_rx) = watch::channel(false);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut intake: JoinSet<anyhow::Result<()>> = JoinSet::new();
    let mut output: JoinSet<anyhow::Result<()>> = JoinSet::new();
    {
        let (f, q, s) = (frontier.clone(), discovered_q.clone(), intake_rx.clone());
        intake.spawn(async move { Ok(trawl_frontier::run_ingest(f, q, s).await?) });
        let (st, q, s) = (state.clone(), fetch_q.clone(), intake_rx.clone());
        intake.spawn(async move { Ok(trawl_frontier::dispatch(st, q, s).await?) });
    }
    for _ in 0..opts.concurrency {
        let (f, j, o, d, s) = (
            fetcher.clone(),
            fetch_q.clone() as Arc<dyn Queue<FetchJob>>,
            fetched_q.clone() as Arc<dyn Queue<Fetched>>,
            discovered_q.clone() as Arc<dyn Queue<Discovered>>,
            intake_rx.clone(),
        );
        intake.spawn(async move { Ok(trawl_fetcher::run_worker(f, j, o, d, s).await?) });
    }
    let dedup = trawl_extractor::DedupStage {
        gate: (!opts.no_dedup)
            .then(|| Arc::new(trawl_dedup::MemoryGate::new(opts.dedup_distance)) as _),
        boilerplate: (opts.boilerplate_min_pages > 0).then(|| {
            Arc::new(trawl_dedup::HostLines::new(
                trawl_dedup::BoilerplateConfig {
                    min_pages: opts.boilerplate_min_pages,
                    ..Default::default()
                },
            ))
        }),
    };
    let extractors = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    for _ in 0..extractors {
        let (i, o, d, g, s) = (
            fetched_q.clone() as Arc<dyn Queue<Fetched>>,
            docs_q.clone() as Arc<dyn Queue<Doc>>,
            discovered_q.clone() as Arc<dyn Queue<Discovered>>,
            dedup.clone(),
            stop_rx.clone(),
        );
        output.spawn(async move { Ok(trawl_extractor::run_worker(i, o, d, g, Some(3), s).await?) });
    }
    {
        let (q, k, st, s) = (docs_q.clone(), sink.clone(), state.clone(), stop_rx.clone());
        output.spawn(async move { Ok(trawl_indexer::run_worker(q, k, st, index_tx, s).await?) });
    }

    let progress = Progress::new(&opts.progress);
    let mut interrupted = false;
    let mut failure: Option<anyhow::Error> = None;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let update = || async {
        if let Ok(counters) = state.counters().await {
            progress.update(
                &counters,
                // Pages anywhere between request and pages.jsonl.
                fetcher.in_flight()
                    + fetched_q.len().await.unwrap_or(0)
                    + docs_q.len().await.unwrap_or(0),
                state.queued().await.unwrap_or(0) + fetch_q.len().await.unwrap_or(0),
                started.elapsed(),
            );
        }
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut ctrl_c => {
                interrupted = true;
                break;
            }
            Some(res) = intake.join_next() => { failure = Some(early_exit(res)); break; }
            Some(res) = output.join_next() => { failure = Some(early_exit(res)); break; }
        }
        update().await;
        if tracker.outstanding() <= 0 {
            break;
        }
    }
    let _ = intake_tx.send(true);
    if interrupted {
        tracing::warn!(
            "interrupted: finishing the requests in flight and writing what was fetched; \
             queued URLs are left (Ctrl-C again to stop now)"
        );
        let drain = async {
            while let Some(res) = intake.join_next().await {
                if let Ok(Err(e)) = res {
                    tracing::warn!(error = %e, "a fetcher stopped with an error while draining");
                }
            }
            while fetched_q.len().await.unwrap_or(0) > 0 || docs_q.len().await.unwrap_or(0) > 0 {
                update().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            _ = drain => {}
            _ = tokio::signal::ctrl_c() => tracing::warn!("stopping now"),
        }
    }
    let _ = stop_tx.send(true);
    for q in [
        &discovered_q as &dyn Closeable,
        &fetch_q,
        &fetched_q,
        &docs_q,
    ] {
        q.close_queue();
    }
    for set in [&mut intake, &mut output] {
        while let Some(res) = set.join_next().await {
            if let Ok(Err(e)) = res
                && failure.is_none()
                && !interrupted
            {
                failure = Some(e);
            }
        }
    }
    progress.finish();
    sink.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    // The writer task has ended and dropped its sender: the index task drains and builds
    // the search indexes.
    let index = match index_task {
        Some(t) => match t.await {
            Ok(Ok(stats)) => Some(stats),
            Ok(Err(e)) => {
                let e = anyhow::Error::new(e).context("indexing failed");
                if failure.is_none() {
                    failure = Some(e);
                } else {
                    tracing::error!("{e:#}");
                }
                None
            }
            Err(e) => {
                failure.get_or_insert_with(|| anyhow::anyhow!("the index task panicked: {e}"));
                None
            }
        },
        None => None,
    };
    let warc_files = match warc {
        Some(w) => tokio::task::spawn_blocking(move || w.finish()).await??,
        None => Vec::new(),
    };
    let counters = state.counters().await?;
    let mut report = CrawlReport::build(
        &crawl_id,
        &seeds,
        started_at,
        started.elapsed(),
        &counters,
        state.queued().await.unwrap_or(0),
        &warc_files,
        interrupted,
    );
    report.index = index;
    std::fs::write(&report_path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", report_path.display()))?;
    if let Some(e) = failure {
        return Err(e.context("crawl aborted; partial outputs were written"));
    }
    Ok((
        report,
        CrawlOutputs {
            dir: opts.out.clone(),
            pages: pages_path,
            report: report_path,
            warc_files,
            index: (!opts.index.no_index).then(|| PathBuf::from(&index_opts.uri)),
        },
    ))
}

/// A pipeline task only returns before the stop on an internal failure.
fn early_exit(res: Result<anyhow::Result<()>, tokio::task::JoinError>) -> anyhow::Error {
    match res {
        Ok(Ok(())) => anyhow::anyhow!("a pipeline task stopped unexpectedly"),
        Ok(Err(e)) => e,
        Err(e) => anyhow::anyhow!("a pipeline task panicked: {e}"),
    }
}

/// The robots.txt product token of a User-Agent: its first word, without version.
fn robots_token(ua: &str) -> String {
    ua.split_whitespace()
        .next()
        .unwrap_or("trawl")
        .split('/')
        .next()
        .unwrap_or("trawl")
        .to_string()
}

trait Closeable {
    fn close_queue(&self);
}

impl<M> Closeable for Arc<MemoryQueue<M>> {
    fn close_queue(&self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::robots_token;

    #[test]
    fn robots_token_is_the_product_name() {
        assert_eq!(robots_token("MyBot/2.1 (+http://x)"), "MyBot");
        assert_eq!(robots_token("plain"), "plain");
    }
}
