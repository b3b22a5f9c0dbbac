//! The embedded runtime: all four stages in one process over bounded in-memory queues and
//! in-memory state. The stages are the same library code the cluster services run, spawned
//! through the same functions (`trawl_<stage>::spawn`); this module only plans the crawl,
//! supervises it and writes the report.
//!
//! The crawl is durable: its state is journaled to `crawl.db` in the output directory
//! (`trawl-store`), and a crawl killed or interrupted there resumes with `--resume`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinHandle;
use trawl_core::counters::{Counter, Counters};
use trawl_core::history::{MemoryUnlinked, Unlinked};
use trawl_core::pipeline::{Hops, ShutdownTrigger, Workers, shutdown};
use trawl_core::queue::{MemoryQueue, Queue};
use trawl_core::spec::CrawlSpec;
use trawl_core::spill::Spill;
use trawl_core::state::{MemoryState, State, WorkTracker};
use trawl_core::{Doc, FetchJob, Fetched, RefineJob};
use trawl_fetcher::warcout::{WarcConfig, WarcWriterTask};
use trawl_fetcher::{Fetcher, FetcherConfig};
use trawl_frontier::{Frontier, FrontierConfig};
use trawl_index::{IndexOptions, IndexStats};
use trawl_indexer::changes::{Recrawl, Schedule};
use trawl_indexer::follow::IndexProgress;
use trawl_indexer::{IndexerError, JsonlSink, RecrawlOutputs, WriterOutputs};
use trawl_store::dir::SPILL_FILE;
use trawl_store::durable::{DurableState, JournaledQueue};
use trawl_store::history::StoreHistory;
use trawl_store::journal::{Journal, JournalTask};
use trawl_store::resume::Resume;

use crate::crawl_dir::{self, Start};
use crate::index_task::{IndexJoin, IndexTask, Preview, start_index};
use crate::options::{CrawlControl, CrawlOptions, LiveCounts};
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
    let started_at = p.started_at.unwrap_or(started_at);
    let progress = Progress::new(&opts.progress);
    let stop = supervise(&mut p, &progress, started, &opts.control).await;
    let interrupted = matches!(stop, Stop::Interrupted);
    let mut failure = match stop {
        Stop::Failed(e) => Some(e),
        _ => None,
    };
    let (index, _) = p.drain(interrupted, &mut failure, &progress, started).await;
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
        started.elapsed(),
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

/// What a crawl will do, worked out (and checked) before anything is written.
struct Plan {
    spec: CrawlSpec,
    seeds: Vec<String>,
    start: Start,
    pages: PathBuf,
    report: PathBuf,
    warc_dir: PathBuf,
    index: Option<IndexOptions>,
    /// A re-crawl's earlier crawl: where it is and what it knew.
    since: Option<(PathBuf, Arc<StoreHistory>)>,
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
        let mut spec = CrawlSpec {
            crawl: format!("crawl-{}", started_at.format("%Y%m%dT%H%M%S%.3fZ")),
            start: start.iter().map(|(u, k)| (u.to_string(), *k)).collect(),
            settings: opts.crawl.clone(),
            index: opts.index.settings.index.clone(),
            since: None,
            due_only: false,
            state_shards: 1,
        };
        let start_kind = crawl_dir::decide(&opts.out, &spec.start, opts.resume, opts.overwrite)?;
        let since = match (&opts.since, &start_kind) {
            (Some(d), _) => Some(d.clone()),
            (None, Start::Resume(s)) => s.since.clone(),
            _ => None,
        };
        let since = match since {
            Some(d) => {
                let h = StoreHistory::open(&d).with_context(|| {
                    format!("--since {}: the crawl to compare with", d.display())
                })?;
                Some((d, Arc::new(h)))
            }
            None => None,
        };
        let index = (!opts.index.no_index).then(|| match (&since, &opts.index.index_uri) {
            // A re-crawl updates the earlier crawl's index: only changed pages are written.
            (Some((_, h)), None) => opts.index.settings.options(&h.index),
            _ => opts.index.options(&opts.out),
        });
        if let Some(o) = index.as_ref().filter(|o| o.embed) {
            // A mistyped model directory stops the crawl before any output is touched.
            trawl_index::model::check_dir(&trawl_index::model::resolve_dir(
                o.model_dir.as_deref(),
            ))?;
        }
        if let Start::Resume(s) = &start_kind {
            // The crawl keeps its id; the settings are this command's.
            spec.crawl = s.crawl.clone();
        }
        Ok(Plan {
            spec,
            seeds,
            start: start_kind,
            pages: opts.out.join("pages.jsonl"),
            report: opts.out.join("report.json"),
            warc_dir: opts.out.join("warc"),
            index,
            since,
        })
    }
}

/// Where the crawl writes: the crawl store, the index task, the WARC writer and
/// `pages.jsonl`.
struct Outputs {
    journal_task: JournalTask,
    journal: Journal,
    /// What the store held, for a resumed crawl.
    resume: Option<Resume>,
    index: Option<IndexTask>,
    warc: Option<WarcWriterTask>,
    sink: Arc<Mutex<JsonlSink>>,
    /// A re-crawl's `changes.jsonl`.
    changes: Option<JsonlSink>,
}

impl Outputs {
    /// Everything was checked by [`Plan::new`]; this is where the directory is written. A
    /// resumed crawl's files are first cut back to what the store committed, and the pages
    /// written but not yet indexed at the stop go to the index again.
    async fn open(opts: &CrawlOptions, plan: &Plan) -> anyhow::Result<Outputs> {
        let out = &opts.out;
        if plan.start == Start::Overwrite {
            trawl_store::dir::remove_outputs(out)
                .with_context(|| format!("removing the earlier crawl in {}", out.display()))?;
        }
        std::fs::create_dir_all(out)
            .with_context(|| format!("creating output directory {}", out.display()))?;
        let started_at = chrono::Utc::now().to_rfc3339();
        let changes_path = out.join("changes.jsonl");
        let (conn, resume) = match &plan.start {
            Start::Resume(_) => {
                let (conn, r) = trawl_store::resume::open(out, &plan.spec)?;
                crawl_dir::cut_back(&plan.pages, r.pages_offset)?;
                crawl_dir::cut_back(&changes_path, r.changes_offset)?;
                crawl_dir::repair_warc(&plan.warc_dir)?;
                (conn, Some(r))
            }
            Start::Fresh | Start::Overwrite => (
                trawl_store::resume::create(out, &plan.spec, &started_at)?,
                None,
            ),
        };
        use trawl_store::schema::{self, keys};
        if let Some(o) = &plan.index {
            schema::set(&conn, keys::INDEX_URI, &o.uri)?;
        }
        let changes = match &plan.since {
            Some((d, _)) => {
                schema::set(&conn, keys::SINCE, &d.to_string_lossy())?;
                Some(JsonlSink::append(&changes_path)?)
            }
            None => None,
        };
        let journal_task = JournalTask::start(conn)?;
        let journal = journal_task.journal();
        let warc =
            WarcConfig::for_crawl(&plan.spec.settings, plan.warc_dir.clone(), "trawl".into())
                .map(WarcWriterTask::start)
                .transpose()?;
        let sink = Arc::new(Mutex::new(JsonlSink::append(&plan.pages)?));
        let index = match &plan.index {
            Some(o) => Some(
                start_index(
                    o,
                    &plan.pages,
                    plan.since.is_some(),
                    resume.as_ref(),
                    &journal,
                )
                .await?,
            ),
            None => None,
        };
        Ok(Outputs {
            journal_task,
            journal,
            resume,
            index,
            warc,
            sink,
            changes,
        })
    }
}

/// The in-memory hops, kept concrete for their lengths and for closing them. The
/// discovered hop is journaled: its batches survive a kill until the frontier has them.
struct MemoryHops {
    discovered: Arc<JournaledQueue>,
    fetch: Arc<MemoryQueue<FetchJob>>,
    fetched: Arc<MemoryQueue<Fetched>>,
    docs: Arc<MemoryQueue<Doc>>,
    render: Arc<MemoryQueue<Fetched>>,
    refine: Arc<MemoryQueue<RefineJob>>,
}

/// The bodies waiting for extraction, at most: pages are cut at the 8 MiB extraction reads
/// (sitemaps at 50 MiB), so 256 messages could otherwise hold gigabytes.
const FETCHED_BYTES: usize = 256 << 20;
/// The text and Markdown of records waiting for the writer, at most.
const DOCS_BYTES: usize = 128 << 20;

impl MemoryHops {
    fn new(concurrency: usize, tracker: &WorkTracker, journal: &Journal, first_id: u64) -> Self {
        MemoryHops {
            discovered: Arc::new(JournaledQueue::new(
                MemoryQueue::new(4096, tracker.clone()),
                journal.clone(),
                first_id,
            )),
            fetch: Arc::new(MemoryQueue::new(concurrency * 2, tracker.clone())),
            fetched: Arc::new(MemoryQueue::with_byte_budget(
                256,
                FETCHED_BYTES,
                |f: &Fetched| f.body.len(),
                tracker.clone(),
            )),
            // Pages for the browser wait here, a few at a time: the extractors slow down
            // to the renderer's pace rather than hold many bodies.
            render: Arc::new(MemoryQueue::with_byte_budget(
                32,
                FETCHED_BYTES / 4,
                |f: &Fetched| f.body.len(),
                tracker.clone(),
            )),
            docs: Arc::new(MemoryQueue::with_byte_budget(
                1024,
                DOCS_BYTES,
                |d: &Doc| {
                    d.page.text.len()
                        + d.page.markdown.as_ref().map_or(0, String::len)
                        + d.page.raw_html.as_ref().map_or(0, String::len)
                },
                tracker.clone(),
            )),
            // Pages for the refiner (`--refine`): a model is slower than the crawl, which
            // waits for it rather than hold the markup of many pages.
            refine: Arc::new(MemoryQueue::with_byte_budget(
                64,
                FETCHED_BYTES / 4,
                |j: &RefineJob| j.html.len(),
                tracker.clone(),
            )),
        }
    }

    fn hops(&self) -> Hops {
        Hops {
            discovered: self.discovered.clone(),
            fetch: self.fetch.clone(),
            fetched: self.fetched.clone(),
            docs: self.docs.clone(),
            render: self.render.clone(),
            changed: Arc::new(trawl_core::queue::Unconnected("changed")),
            refine: self.refine.clone(),
        }
    }

    /// Pages fetched and not yet written.
    async fn pages_in_output(&self) -> usize {
        self.fetched.len().await.unwrap_or(0)
            + self.render.len().await.unwrap_or(0)
            + self.docs.len().await.unwrap_or(0)
            + self.refine.len().await.unwrap_or(0)
    }

    fn close(&self) {
        self.discovered.close();
        self.fetch.close();
        self.fetched.close();
        self.render.close();
        self.docs.close();
        self.refine.close();
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
}

/// The earlier crawl's URLs this crawl did not reach are fetched once the crawl is done:
/// still there (not linked any more), changed, or removed.
struct Recheck {
    history: Arc<StoreHistory>,
    unlinked: Arc<dyn Unlinked>,
}

/// A re-crawl's writer outputs, its webhook notifier and its end-of-crawl check.
type RecrawlParts = (
    Option<Arc<RecrawlOutputs>>,
    Option<JoinHandle<trawl_notifier::webhook::Deliveries>>,
    Option<Recheck>,
);

fn recrawl_parts(
    opts: &CrawlOptions,
    plan: &Plan,
    changes: Option<JsonlSink>,
) -> anyhow::Result<RecrawlParts> {
    let (Some((_, history)), Some(changes)) = (&plan.since, changes) else {
        return Ok((None, None, None));
    };
    let s = &plan.spec.settings;
    let (notify, webhook) = match &s.webhook_url {
        Some(url) => {
            let secret = trawl_notifier::webhook::secret_from_env();
            if secret.is_none() {
                tracing::warn!(
                    "TRAWL_WEBHOOK_SECRET is not set: webhook deliveries are not signed"
                );
            }
            let cfg = trawl_notifier::webhook::WebhookConfig {
                url: url.clone(),
                secret: secret
                    .as_deref()
                    .map(trawl_notifier::webhook::WebhookConfig::secret_from),
                tries: s.webhook_tries.max(1),
                backoff: Duration::from_millis(s.webhook_backoff_ms),
                wait_after: Duration::from_secs(s.webhook_wait_s),
                undelivered: opts.out.join("changes-undelivered.jsonl"),
                delivered: opts.out.join("changes-delivered.txt"),
            };
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            if matches!(plan.start, Start::Resume(_)) {
                // A kill loses the deliveries in flight: what the earlier runs neither
                // delivered nor gave up on goes first (the same ids, so receivers dedupe).
                let owed = trawl_notifier::webhook::pending(
                    &opts.out.join("changes.jsonl"),
                    &cfg.delivered,
                    &cfg.undelivered,
                );
                if !owed.is_empty() {
                    tracing::info!(
                        events = owed.len(),
                        "delivering the events the stopped run had not"
                    );
                }
                for e in owed {
                    let _ = tx.send(e);
                }
            }
            (
                Some(tx),
                Some(tokio::spawn(trawl_notifier::webhook::run(cfg, rx))),
            )
        }
        None => (None, None),
    };
    let unlinked: Arc<dyn Unlinked> = Arc::new(MemoryUnlinked::default());
    let outputs = RecrawlOutputs {
        compare: Recrawl {
            history: history.clone(),
            crawl: plan.spec.crawl.clone(),
            since: history.crawl.clone(),
            schedule: Schedule::from_settings(s),
            unlinked: unlinked.clone(),
        },
        changes: Mutex::new(changes),
        notify,
        publish: None,
    };
    let recheck = Recheck {
        history: history.clone(),
        unlinked,
    };
    Ok((Some(Arc::new(outputs)), webhook, Some(recheck)))
}

impl Pipeline {
    async fn spawn(opts: &CrawlOptions, plan: &Plan) -> anyhow::Result<Pipeline> {
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
        let gate = s.page_gate().map(crate::page_gate::EmbeddedGate::new);
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
        // One in-memory gate for all extractors; a page whose extraction keeps failing is
        // written after 3 tries.
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

    async fn show(&self, progress: &Progress, started: Instant, control: &CrawlControl) {
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
        progress: &Progress,
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
        progress: &Progress,
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

/// The refiner's workers (`--refine`), writing `refined.jsonl` beside `pages.jsonl`; a page
/// whose model backend keeps failing is written as skipped (`backend`), so the crawl ends.
async fn start_refiner(
    opts: &CrawlOptions,
    output: &mut Workers,
    hops: &Hops,
    state: &Arc<dyn State>,
    stop: &trawl_core::pipeline::Shutdown,
) -> anyhow::Result<()> {
    let settings = opts.refine.clone();
    trawl_refiner::engine::check(&settings)?;
    let s = settings.clone();
    let engine = tokio::task::spawn_blocking(move || trawl_refiner::engine::build(&s))
        .await
        .context("loading the refiner's engine")??;
    let sink = Arc::new(trawl_refiner::RefinedSink::open(
        &opts.out.join("refined.jsonl"),
    )?);
    tracing::info!(engine = %engine.name(), "refining the crawl's pages into refined.jsonl");
    let mut cfg = trawl_refiner::RefinerConfig::new(engine, &settings);
    cfg.backend_tries = 5;
    cfg.write_backend_failures = true;
    let n = trawl_refiner::engine::concurrency(&settings);
    trawl_refiner::spawn(output, n, &Arc::new(cfg), &hops.refine, &sink, state, stop);
    Ok(())
}

/// The renderer, when the crawl's render mode wants one and a Chromium is found; without
/// one, pages the rule picks keep their fetched version (`render.unavailable`).
fn start_renderer(
    opts: &CrawlOptions,
    plan: &Plan,
    state: &Arc<dyn State>,
    warc: Option<&WarcWriterTask>,
    cfg: &mut trawl_extractor::ExtractorConfig,
) -> anyhow::Result<Option<Arc<trawl_renderer::Renderer>>> {
    let Some(route) = cfg.render.as_mut() else {
        return Ok(None);
    };
    let s = &plan.spec.settings;
    let process = trawl_core::settings::ProcessSettings {
        chromium: opts.chromium.clone(),
        render_concurrency: opts.render_concurrency,
        ..Default::default()
    };
    let Some(rc) = trawl_renderer::RendererConfig::from_settings(s, &process) else {
        let hint = match &opts.chromium {
            Some(p) => format!("{} is not a file", p.display()),
            None => "install chromium-headless-shell or pass --chromium".into(),
        };
        tracing::warn!(
            "no Chromium found ({hint}): pages that need JavaScript keep their fetched \
             version, counted as render.unavailable"
        );
        route.available.set(false);
        return Ok(None);
    };
    tracing::info!(browser = %rc.chromium.display(), mode = %s.render, "rendering pages that need JavaScript");
    let fetcher = Fetcher::new(
        FetcherConfig::from_settings(&plan.spec.crawl, s),
        state.clone(),
        plan.spec.scope(),
        s.normalizer(),
        warc.map(|w| w.handle()),
    )?;
    Ok(Some(Arc::new(trawl_renderer::Renderer::new(
        rc,
        fetcher,
        s,
        plan.spec.scope(),
        warc.map(|w| w.handle()),
    ))))
}

/// Puts a resumed crawl's state back: the seen-set, the counters, the queued URLs (fetched
/// again) and the dedup gate's kept pages.
async fn restore(
    r: &Resume,
    s: &trawl_core::settings::CrawlSettings,
    memory: &MemoryState,
    gate: Option<&crate::page_gate::EmbeddedGate>,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    memory.restore_seen(r.seen.iter().copied());
    for (k, v) in &r.counters {
        memory.incr(k, *v).await?;
    }
    // The budgets in force count at least what the store holds as admitted.
    let mut floors = Vec::new();
    if s.max_pages > 0 {
        floors.push((Counter::FrontierAdmitted, r.admitted_pages));
    }
    if s.max_pages_per_host > 0 {
        floors.extend(
            r.admitted_by_host
                .iter()
                .map(|(h, n)| (Counter::HostPages(h.clone()), *n)),
        );
    }
    for (c, floor) in floors {
        let have = r.counters.get(c.key().as_ref()).copied().unwrap_or(0);
        if (floor as i64) > have {
            memory.count(&c, floor as i64 - have).await?;
        }
    }
    for job in &r.queued {
        memory.enqueue(job.clone()).await?;
    }
    if let Some(g) = gate {
        g.restore(&r.kept, &out.join("pages.jsonl"))?;
    }
    tracing::info!(
        seen = r.seen.len(),
        queued = r.queued.len(),
        pending_batches = r.pending.len(),
        run = r.runs + 1,
        "resuming the crawl"
    );
    Ok(())
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
    progress: &Progress,
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
fn early_exit(r: Result<(), String>) -> anyhow::Error {
    match r {
        Ok(()) => anyhow::anyhow!("a pipeline task stopped unexpectedly"),
        Err(e) => anyhow::anyhow!(e),
    }
}
