//! The embedded runtime: every stage of the crawl in one process over bounded in-memory
//! queues and in-memory state. The stages are the same library code the cluster services
//! run, spawned through the same functions (`trawl_<stage>::spawn`); this module only
//! plans the crawl, supervises it and writes the report.
//!
//! The crawl is durable: its state is journaled to `crawl.db` in the output directory
//! (`trawl-store`), and a crawl killed or interrupted there resumes with `--resume`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinHandle;
use trawl_core::counters::{Counter, Counters};
use trawl_core::pipeline::{ShutdownTrigger, Workers, shutdown};
use trawl_core::queue::Queue;
use trawl_core::spill::Spill;
use trawl_core::state::{MemoryState, State, WorkTracker};
use trawl_fetcher::warcout::WarcWriterTask;
use trawl_fetcher::{Fetcher, FetcherConfig};
use trawl_frontier::{Frontier, FrontierConfig};
use trawl_index::IndexStats;
use trawl_indexer::follow::IndexProgress;
use trawl_indexer::{IndexerError, JsonlSink, WriterOutputs};
use trawl_store::dir::SPILL_FILE;
use trawl_store::durable::DurableState;
use trawl_store::journal::JournalTask;

use crate::index_task::{IndexJoin, Preview};
use crate::plan::{CrawlControl, CrawlPlan, LiveCounts};
use crate::progress::ProgressSink;
use crate::report::{CrawlReport, Timing};

mod hops;
mod plan;
mod recrawl;
mod stages;

use hops::MemoryHops;
use plan::{Outputs, Plan};
use recrawl::{Recheck, recrawl_parts};
use stages::{restore, start_refiner, start_renderer};

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
pub async fn crawl(opts: CrawlPlan) -> anyhow::Result<(CrawlReport, CrawlOutputs)> {
    let started = Instant::now();
    let started_at = chrono::Utc::now();
    let plan = Plan::new(&opts, &started_at)?;
    let mut p = Pipeline::spawn(&opts, &plan).await?;
    let started_at = p.started_at.unwrap_or(started_at);
    let progress = opts.progress.clone();
    let stop = supervise(&mut p, &*progress, started, &opts.control).await;
    let interrupted = matches!(stop, Stop::Interrupted);
    let mut failure = match stop {
        Stop::Failed(e) => Some(e),
        _ => None,
    };
    let (index, _) = p
        .drain(interrupted, &mut failure, &*progress, started)
        .await;
    let timing = Timing {
        elapsed: started.elapsed(),
        crawl: p.crawl_took.unwrap_or_else(|| started.elapsed()),
    };
    progress.finish();
    let complete = !interrupted && failure.is_none();
    if let Some(task) = p.journal_task.take()
        && let Err(e) = tokio::task::spawn_blocking(move || task.finish(complete))
            .await
            .map_err(|e| anyhow::anyhow!("the crawl store panicked: {e}"))
            .and_then(|r| r.map_err(anyhow::Error::new))
    {
        keep_first(&mut failure, e);
    }
    // Every run's files: a resumed crawl's WARC is the sum of them.
    let warc_files = trawl_fetcher::warcout::list_warc_files(&plan.warc_dir).unwrap_or_default();
    let counters = Counters::from_map(&p.state.counters().await?);
    let mut report = CrawlReport::build(
        &plan.spec.crawl,
        &plan.seeds,
        started_at,
        timing,
        &counters,
        p.state.queued().await.unwrap_or(0),
        &warc_files,
        interrupted,
    );
    report.index = index;
    report.webhook = p.deliveries.take();
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

/// The running crawl. Two stops: intake (frontier, dispatch, fetchers) stops first on an
/// interrupt, so that what was already fetched is still extracted and written before the
/// output stages (extractors, writer) stop.
struct Pipeline {
    tracker: WorkTracker,
    state: Arc<dyn State>,
    queues: MemoryHops,
    fetcher: Arc<Fetcher>,
    /// The browser, when the crawl renders pages.
    renderer: Option<Arc<trawl_renderer::Renderer>>,
    intake_stop: ShutdownTrigger,
    output_stop: ShutdownTrigger,
    intake: Workers,
    output: Workers,
    sink: Arc<Mutex<JsonlSink>>,
    warc: Option<WarcWriterTask>,
    /// The index task and how far it is.
    index: Option<(IndexJoin, Arc<IndexProgress>)>,
    /// The full-text preview while the index is computing vectors.
    preview: Option<Preview>,
    journal_task: Option<JournalTask>,
    /// When a resumed crawl first started.
    started_at: Option<chrono::DateTime<chrono::Utc>>,
    crawl: String,
    /// A re-crawl's end-of-crawl check of the earlier crawl's URLs, until it is done.
    recheck: Option<Recheck>,
    webhook: Option<JoinHandle<trawl_notifier::webhook::Deliveries>>,
    deliveries: Option<trawl_notifier::webhook::Deliveries>,
    /// From the start until the last page was written: the crawl's own time.
    crawl_took: Option<Duration>,
}

impl Pipeline {
    async fn spawn(opts: &CrawlPlan, plan: &Plan) -> anyhow::Result<Pipeline> {
        let s = &plan.spec.settings;
        let Outputs {
            journal_task,
            journal,
            resume,
            index,
            warc,
            sink,
            changes,
        } = Outputs::open(opts, plan).await?;
        // The writer holds the only feed: when it ends, the index task reads to the end.
        let (index_feed, index, preview) = match index {
            Some(t) => (Some(t.feed), Some((t.task, t.progress)), t.preview),
            None => (None, None, None),
        };
        let (recrawl, webhook, recheck) = recrawl_parts(opts, plan, changes)?;
        let tracker = WorkTracker::default();
        let spill = Spill::create(&opts.out.join(SPILL_FILE))?;
        let memory = Arc::new(
            MemoryState::new(s.max_queued, s.concurrency_per_host, tracker.clone())
                .with_spill(spill, opts.queued_in_memory)
                .recording_dropped(),
        );
        let first_id = resume
            .as_ref()
            .and_then(|r| r.pending.iter().map(|(id, _)| id + 1).max())
            .unwrap_or(1);
        let queues = MemoryHops::new(opts.concurrency, &tracker, &journal, first_id);
        let hops = queues.hops();
        let gate = s
            .page_gate()
            .map(|g| crate::page_gate::EmbeddedGate::new(g, &opts.out, opts.gate_in_memory));
        if let Some(r) = &resume {
            restore(r, s, &memory, gate.as_ref(), &opts.out).await?;
        }
        let state: Arc<dyn State> = Arc::new(DurableState::new(memory.clone(), journal.clone()));
        let crawl = &plan.spec.crawl;
        let frontier = Arc::new(Frontier::new(
            FrontierConfig::from_settings(crawl, s, plan.spec.scope()),
            state.clone(),
        ));
        let mut fetcher = Fetcher::new(
            FetcherConfig::from_settings(crawl, s),
            state.clone(),
            plan.spec.scope(),
            s.normalizer(),
            warc.as_ref().map(|w| w.handle()),
        )?;
        if let Some((_, h)) = &plan.since {
            fetcher = fetcher.with_history(h.clone()).due_only(opts.due_only);
        }
        let fetcher = Arc::new(fetcher);
        let (intake_stop, intake_rx) = shutdown();
        let (output_stop, output_rx) = shutdown();
        let mut intake = Workers::new();
        let mut output = Workers::new();
        trawl_frontier::spawn(&mut intake, &frontier, &hops, &intake_rx);
        trawl_fetcher::spawn(&mut intake, opts.concurrency, &fetcher, &hops, &intake_rx);
        let extractors = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .max(2);
        // One gate for all extractors; a page whose extraction keeps failing is written
        // after 3 tries.
        let gate = gate.map(crate::page_gate::EmbeddedGate::shared);
        let mut cfg = trawl_extractor::ExtractorConfig::from_settings(s, gate, Some(3));
        let renderer = start_renderer(opts, plan, &state, warc.as_ref(), &mut cfg)?;
        if let Some(r) = &renderer {
            trawl_renderer::spawn(&mut output, r, &cfg, &hops, &output_rx);
        }
        trawl_extractor::spawn(&mut output, extractors, &cfg, &hops, &output_rx);
        if s.refine {
            start_refiner(opts, &mut output, &hops, &state, &output_rx).await?;
        }
        let writer = WriterOutputs {
            index: index_feed,
            journal: Some(Arc::new(journal.clone())),
            recrawl,
            archive: None,
            once: trawl_indexer::Once::Off,
        };
        trawl_indexer::spawn(&mut output, &sink, &state, writer, &hops, &output_rx);
        // With the stages running: the frontier takes batches as they come.
        match &resume {
            // A crawl stopped before its seeds were admitted starts from them again.
            Some(r) if !r.seen.is_empty() || !r.pending.is_empty() => {
                for (id, batch) in &r.pending {
                    queues.discovered.republish(*id, batch.clone()).await?;
                }
            }
            _ => hops.discovered.publish(plan.spec.seeds_message()).await?,
        }
        let started_at = resume
            .as_ref()
            .and_then(|r| r.started_at.as_deref())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc));
        Ok(Pipeline {
            tracker,
            state,
            queues,
            fetcher,
            renderer,
            intake_stop,
            output_stop,
            intake,
            output,
            sink,
            warc,
            index,
            preview,
            journal_task: Some(journal_task),
            started_at,
            crawl: plan.spec.crawl.clone(),
            recheck,
            webhook,
            deliveries: None,
            crawl_took: None,
        })
    }

    /// Offers the earlier crawl's URLs this crawl has not seen to the frontier; returns
    /// how many.
    async fn recheck(&self, r: Recheck) -> anyhow::Result<usize> {
        Ok(trawl_frontier::recheck::offer_unreached(
            &self.crawl,
            &*r.history,
            &*r.unlinked,
            &*self.state,
            &*self.queues.discovered,
        )
        .await?)
    }

    async fn show(&self, progress: &dyn ProgressSink, started: Instant, control: &CrawlControl) {
        if let Ok(counters) = self.state.counters().await {
            let counters = Counters::from_map(&counters);
            let queued =
                self.state.queued().await.unwrap_or(0) + self.queues.fetch.len().await.unwrap_or(0);
            // Pages anywhere between request and pages.jsonl.
            let in_flight = self.fetcher.in_flight() + self.queues.pages_in_output().await;
            let index = self.index.as_ref().map(|(_, p)| p.line(started.elapsed()));
            progress.update(&counters, in_flight, queued, started.elapsed(), index);
            if let Some(live) = &control.live {
                live.send_replace(LiveCounts {
                    pages: counters.get(&Counter::Pages),
                    queued: queued + in_flight,
                });
            }
        }
    }

    /// Waits for the index task to read `pages.jsonl` through, showing how far it is.
    async fn wait_index(
        &self,
        mut task: IndexJoin,
        p: &IndexProgress,
        progress: &dyn ProgressSink,
        started: Instant,
    ) -> Result<Result<IndexStats, IndexerError>, tokio::task::JoinError> {
        let crawled = started.elapsed();
        let pages = match self.state.counters().await {
            Ok(c) => Counters::from_map(&c).get(&Counter::Pages),
            Err(_) => 0,
        };
        loop {
            progress.crawl_done(pages, crawled, Some(p.line(started.elapsed())));
            tokio::select! {
                r = &mut task => return r,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }

    /// Stops the stages in order and collects what they leave: the index's stats and the
    /// WARC files. The first failure is kept in `failure` (after an interrupt, errors of
    /// stages cut short are only logged).
    async fn drain(
        &mut self,
        interrupted: bool,
        failure: &mut Option<anyhow::Error>,
        progress: &dyn ProgressSink,
        started: Instant,
    ) -> (Option<IndexStats>, Vec<PathBuf>) {
        self.intake_stop.trigger();
        if interrupted {
            tracing::warn!(
                "interrupted: finishing the requests in flight and writing what was fetched; \
                 queued URLs stay in the crawl store for --resume (Ctrl-C again to stop now)"
            );
            let finish_fetched = async {
                while let Some(r) = self.intake.next().await {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "a fetcher stopped with an error while draining");
                    }
                }
                while self.queues.pages_in_output().await > 0 {
                    self.show(progress, started, &CrawlControl::default()).await;
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
        if let Some(r) = self.renderer.take() {
            r.close().await;
        }
        if let Err(e) = self.sink.lock().unwrap_or_else(|e| e.into_inner()).flush() {
            failure.get_or_insert(e.into());
        }
        self.crawl_took = Some(started.elapsed());
        // The writer task has ended and dropped its sender: the index task drains and
        // builds the search indexes.
        let index = match self.index.take() {
            Some((t, p)) => match self.wait_index(t, &p, progress, started).await {
                Ok(Ok(stats)) => {
                    if let Some(p) = self.preview.take() {
                        p.close(true).await;
                    }
                    Some(stats)
                }
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
        if let Some(p) = self.preview.take() {
            p.close(false).await;
        }
        // The writer has ended and dropped the notifier's sender: it delivers what is left.
        if let Some(w) = self.webhook.take() {
            match w.await {
                Ok(d) => self.deliveries = Some(d),
                Err(e) => keep_first(
                    failure,
                    anyhow::anyhow!("the webhook notifier panicked: {e}"),
                ),
            }
        }
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
async fn supervise(
    p: &mut Pipeline,
    progress: &dyn ProgressSink,
    started: Instant,
    control: &CrawlControl,
) -> Stop {
    // A crawl another program runs stops when that program says, not on its Ctrl-C.
    let interrupt = async {
        match control.stop.clone() {
            Some(mut stop) => stop.recv().await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    tokio::pin!(interrupt);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut interrupt => break Stop::Interrupted,
            Some(r) = p.intake.next() => break Stop::Failed(early_exit(r)),
            Some(r) = p.output.next() => break Stop::Failed(early_exit(r)),
        }
        p.show(progress, started, control).await;
        if p.tracker.outstanding() <= 0 {
            let Some(r) = p.recheck.take() else {
                break Stop::Done;
            };
            match p.recheck(r).await {
                Ok(0) => break Stop::Done,
                Ok(_) => {}
                Err(e) => break Stop::Failed(e),
            }
        }
    }
}

/// A stage task only returns before the stop on an internal failure.
fn early_exit(r: trawl_core::pipeline::StageResult) -> anyhow::Error {
    match r {
        Ok(()) => anyhow::anyhow!("a pipeline task stopped unexpectedly"),
        Err(e) => anyhow::anyhow!(e),
    }
}
