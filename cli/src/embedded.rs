//! The embedded runtime: all four stages in one process over bounded in-memory queues and
//! in-memory state. The stages are the same library code the cluster services run, spawned
//! through the same functions (`trawl_<stage>::spawn`); this module only plans the crawl,
//! supervises it and writes the report.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinHandle;
use trawl_core::counters::Counters;
use trawl_core::pipeline::{Hops, ShutdownTrigger, Workers, shutdown};
use trawl_core::queue::{MemoryQueue, Queue};
use trawl_core::spec::CrawlSpec;
use trawl_core::state::{MemoryState, State, WorkTracker};
use trawl_core::{Discovered, Doc, FetchJob, Fetched};
use trawl_fetcher::warcout::{WarcConfig, WarcWriterTask};
use trawl_fetcher::{Fetcher, FetcherConfig};
use trawl_frontier::{Frontier, FrontierConfig};
use trawl_index::{IndexOptions, IndexStats};
use trawl_indexer::{IndexerError, JsonlSink};

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

/// Runs a whole crawl and writes `pages.jsonl`, `warc/` and `report.json` under `opts.out`.
pub async fn crawl(opts: CrawlOptions) -> anyhow::Result<(CrawlReport, CrawlOutputs)> {
    let started = Instant::now();
    let started_at = chrono::Utc::now();
    let plan = Plan::new(&opts, &started_at)?;
    let mut p = Pipeline::spawn(&opts, &plan).await?;
    let progress = Progress::new(&opts.progress);
    let stop = supervise(&mut p, &progress, started).await;
    let interrupted = matches!(stop, Stop::Interrupted);
    let mut failure = match stop {
        Stop::Failed(e) => Some(e),
        _ => None,
    };
    let (index, warc_files) = p.drain(interrupted, &mut failure, &progress, started).await;
    progress.finish();
    let counters = Counters::from_map(&p.state.counters().await?);
    let mut report = CrawlReport::build(
        &plan.spec.crawl,
        &plan.seeds,
        started_at,
        started.elapsed(),
        &counters,
        p.state.queued().await.unwrap_or(0),
        &warc_files,
        interrupted,
    );
    report.index = index;
    std::fs::write(&plan.report, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", plan.report.display()))?;
    if let Some(e) = failure {
        return Err(e.context("crawl aborted; partial outputs were written"));
    }
    let outputs = CrawlOutputs {
        dir: opts.out.clone(),
        pages: plan.pages,
        report: plan.report,
        warc_files,
        index: plan.index.map(|o| PathBuf::from(o.uri)),
    };
    Ok((report, outputs))
}

/// What a crawl will do, worked out (and checked) before anything is written.
struct Plan {
    spec: CrawlSpec,
    seeds: Vec<String>,
    pages: PathBuf,
    report: PathBuf,
    warc_dir: PathBuf,
    index: Option<IndexOptions>,
}

impl Plan {
    fn new(
        opts: &CrawlOptions,
        started_at: &chrono::DateTime<chrono::Utc>,
    ) -> anyhow::Result<Self> {
        opts.crawl.validate()?;
        if opts.concurrency == 0 {
            anyhow::bail!("--concurrency must be at least 1");
        }
        let (seeds, start) = opts.targets.resolve(&opts.crawl.normalizer())?;
        let spec = CrawlSpec {
            crawl: format!("crawl-{}", started_at.format("%Y%m%dT%H%M%S%.3fZ")),
            start: start.iter().map(|(u, k)| (u.to_string(), *k)).collect(),
            settings: opts.crawl.clone(),
            index: opts.index.settings.index.clone(),
        };
        Ok(Plan {
            spec,
            seeds,
            pages: opts.out.join("pages.jsonl"),
            report: opts.out.join("report.json"),
            warc_dir: opts.out.join("warc"),
            index: (!opts.index.no_index).then(|| opts.index.options(&opts.out)),
        })
    }
}

/// Where the crawl writes: the index task, the WARC writer and `pages.jsonl`.
struct Outputs {
    index_tx: Option<tokio::sync::mpsc::Sender<trawl_core::PageRecord>>,
    index_task: Option<JoinHandle<Result<IndexStats, IndexerError>>>,
    warc: Option<WarcWriterTask>,
    sink: Arc<Mutex<JsonlSink>>,
}

impl Outputs {
    /// The index is opened before any output is replaced: a missing model stops the crawl
    /// here, with the earlier crawl's files untouched.
    async fn open(opts: &CrawlOptions, plan: &Plan) -> anyhow::Result<Outputs> {
        std::fs::create_dir_all(&opts.out)
            .with_context(|| format!("creating output directory {}", opts.out.display()))?;
        let (index_tx, index_task) = match &plan.index {
            Some(o) => {
                let ix = trawl_index::Indexer::open(o.clone())
                    .await
                    .with_context(|| format!("opening the index at {}", o.uri))?;
                let (tx, rx) = tokio::sync::mpsc::channel(256);
                (
                    Some(tx),
                    Some(tokio::spawn(trawl_indexer::run_index(ix, rx))),
                )
            }
            None => (None, None),
        };
        if plan.warc_dir.exists() {
            // Old files would mix with this crawl's: the outputs describe one crawl.
            for f in trawl_fetcher::warcout::list_warc_files(&plan.warc_dir)? {
                std::fs::remove_file(&f)
                    .with_context(|| format!("removing old {}", f.display()))?;
            }
        }
        let warc =
            WarcConfig::for_crawl(&plan.spec.settings, plan.warc_dir.clone(), "trawl".into())
                .map(WarcWriterTask::start)
                .transpose()?;
        let sink = Arc::new(Mutex::new(JsonlSink::create(&plan.pages)?));
        Ok(Outputs {
            index_tx,
            index_task,
            warc,
            sink,
        })
    }
}

/// The in-memory hops, kept concrete for their lengths and for closing them.
struct MemoryHops {
    discovered: Arc<MemoryQueue<Discovered>>,
    fetch: Arc<MemoryQueue<FetchJob>>,
    fetched: Arc<MemoryQueue<Fetched>>,
    docs: Arc<MemoryQueue<Doc>>,
}

impl MemoryHops {
    fn new(concurrency: usize, tracker: &WorkTracker) -> Self {
        MemoryHops {
            discovered: Arc::new(MemoryQueue::new(4096, tracker.clone())),
            fetch: Arc::new(MemoryQueue::new(concurrency * 2, tracker.clone())),
            fetched: Arc::new(MemoryQueue::new(256, tracker.clone())),
            docs: Arc::new(MemoryQueue::new(1024, tracker.clone())),
        }
    }

    fn hops(&self) -> Hops {
        Hops {
            discovered: self.discovered.clone(),
            fetch: self.fetch.clone(),
            fetched: self.fetched.clone(),
            docs: self.docs.clone(),
        }
    }

    /// Pages fetched and not yet written.
    async fn pages_in_output(&self) -> usize {
        self.fetched.len().await.unwrap_or(0) + self.docs.len().await.unwrap_or(0)
    }

    fn close(&self) {
        self.discovered.close();
        self.fetch.close();
        self.fetched.close();
        self.docs.close();
    }
}

/// The running crawl. Two stops: intake (frontier, dispatch, fetchers) stops first on an
/// interrupt, so that what was already fetched is still extracted and written before the
/// output stages (extractors, writer) stop.
struct Pipeline {
    tracker: WorkTracker,
    state: Arc<dyn State>,
    queues: MemoryHops,
    fetcher: Arc<Fetcher>,
    intake_stop: ShutdownTrigger,
    output_stop: ShutdownTrigger,
    intake: Workers,
    output: Workers,
    sink: Arc<Mutex<JsonlSink>>,
    warc: Option<WarcWriterTask>,
    index_task: Option<JoinHandle<Result<IndexStats, IndexerError>>>,
}

impl Pipeline {
    async fn spawn(opts: &CrawlOptions, plan: &Plan) -> anyhow::Result<Pipeline> {
        let s = &plan.spec.settings;
        let Outputs {
            index_tx,
            index_task,
            warc,
            sink,
        } = Outputs::open(opts, plan).await?;
        let tracker = WorkTracker::default();
        let state: Arc<dyn State> = Arc::new(MemoryState::new(
            s.max_queued,
            s.concurrency_per_host,
            tracker.clone(),
        ));
        let queues = MemoryHops::new(opts.concurrency, &tracker);
        let hops = queues.hops();
        let crawl = &plan.spec.crawl;
        let frontier = Arc::new(Frontier::new(
            FrontierConfig::from_settings(crawl, s, plan.spec.scope()),
            state.clone(),
        ));
        let fetcher = Arc::new(Fetcher::new(
            FetcherConfig::from_settings(crawl, s),
            state.clone(),
            plan.spec.scope(),
            s.normalizer(),
            warc.as_ref().map(|w| w.handle()),
        )?);
        hops.discovered.publish(plan.spec.seeds_message()).await?;

        let (intake_stop, intake_rx) = shutdown();
        let (output_stop, output_rx) = shutdown();
        let mut intake = Workers::new();
        let mut output = Workers::new();
        trawl_frontier::spawn(&mut intake, &frontier, &hops, &intake_rx);
        trawl_fetcher::spawn(&mut intake, opts.concurrency, &fetcher, &hops, &intake_rx);
        let extractors = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .max(2);
        // One in-memory gate for all extractors; a page whose extraction keeps failing is
        // written after 3 tries.
        let gate = s
            .dedup_distance()
            .map(|d| Arc::new(trawl_dedup::MemoryGate::new(d)) as _);
        let cfg = trawl_extractor::ExtractorConfig::from_settings(s, gate, Some(3));
        trawl_extractor::spawn(&mut output, extractors, &cfg, &hops, &output_rx);
        trawl_indexer::spawn(&mut output, &sink, &state, index_tx, &hops, &output_rx);
        Ok(Pipeline {
            tracker,
            state,
            queues,
            fetcher,
            intake_stop,
            output_stop,
            intake,
            output,
            sink,
            warc,
            index_task,
        })
    }

    async fn show(&self, progress: &Progress, started: Instant) {
        if let Ok(counters) = self.state.counters().await {
            let counters = Counters::from_map(&counters);
            let queued =
                self.state.queued().await.unwrap_or(0) + self.queues.fetch.len().await.unwrap_or(0);
            // Pages anywhere between request and pages.jsonl.
            let in_flight = self.fetcher.in_flight() + self.queues.pages_in_output().await;
            progress.update(&counters, in_flight, queued, started.elapsed());
        }
    }

    /// Stops the stages in order and collects what they leave: the index's stats and the
    /// WARC files. The first failure is kept in `failure` (after an interrupt, errors of
    /// stages cut short are only logged).
    async fn drain(
        &mut self,
        interrupted: bool,
        failure: &mut Option<anyhow::Error>,
        progress: &Progress,
        started: Instant,
    ) -> (Option<IndexStats>, Vec<PathBuf>) {
        self.intake_stop.trigger();
        if interrupted {
            tracing::warn!(
                "interrupted: finishing the requests in flight and writing what was fetched; \
                 queued URLs are left (Ctrl-C again to stop now)"
            );
            let finish_fetched = async {
                while let Some(r) = self.intake.next().await {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "a fetcher stopped with an error while draining");
                    }
                }
                while self.queues.pages_in_output().await > 0 {
                    self.show(progress, started).await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            tokio::select! {
                _ = finish_fetched => {}
                _ = tokio::signal::ctrl_c() => tracing::warn!("stopping now"),
            }
        }
        self.output_stop.trigger();
        self.queues.close();
        for set in [&mut self.intake, &mut self.output] {
            while let Some(r) = set.next().await {
                if let Err(e) = r
                    && failure.is_none()
                    && !interrupted
                {
                    *failure = Some(anyhow::anyhow!(e));
                }
            }
        }
        if let Err(e) = self.sink.lock().unwrap_or_else(|e| e.into_inner()).flush() {
            failure.get_or_insert(e.into());
        }
        // The writer task has ended and dropped its sender: the index task drains and
        // builds the search indexes.
        let index = match self.index_task.take() {
            Some(t) => match t.await {
                Ok(Ok(stats)) => Some(stats),
                Ok(Err(e)) => {
                    keep_first(failure, anyhow::Error::new(e).context("indexing failed"));
                    None
                }
                Err(e) => {
                    keep_first(failure, anyhow::anyhow!("the index task panicked: {e}"));
                    None
                }
            },
            None => None,
        };
        let warc_files = match self.warc.take() {
            Some(w) => match tokio::task::spawn_blocking(move || w.finish()).await {
                Ok(Ok(files)) => files,
                Ok(Err(e)) => {
                    keep_first(failure, anyhow::Error::new(e).context("WARC output"));
                    Vec::new()
                }
                Err(e) => {
                    keep_first(failure, anyhow::anyhow!("the WARC writer panicked: {e}"));
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        (index, warc_files)
    }
}

fn keep_first(failure: &mut Option<anyhow::Error>, e: anyhow::Error) {
    if failure.is_none() {
        *failure = Some(e);
    } else {
        tracing::error!("{e:#}");
    }
}

/// Why the supervision ended.
enum Stop {
    /// Every unit of work is done.
    Done,
    /// Ctrl-C.
    Interrupted,
    /// A stage failed (or ended before the stop, which only a failure does).
    Failed(anyhow::Error),
}

/// Shows progress until the crawl has no work left, is interrupted or a stage fails.
async fn supervise(p: &mut Pipeline, progress: &Progress, started: Instant) -> Stop {
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut ctrl_c => break Stop::Interrupted,
            Some(r) = p.intake.next() => break Stop::Failed(early_exit(r)),
            Some(r) = p.output.next() => break Stop::Failed(early_exit(r)),
        }
        p.show(progress, started).await;
        if p.tracker.outstanding() <= 0 {
            break Stop::Done;
        }
    }
}

/// A stage task only returns before the stop on an internal failure.
fn early_exit(r: Result<(), String>) -> anyhow::Error {
    match r {
        Ok(()) => anyhow::anyhow!("a pipeline task stopped unexpectedly"),
        Err(e) => anyhow::anyhow!(e),
    }
}
