//! The refining loop shared by both runtimes: one page at a time per worker, refined on the
//! blocking pool (a model's generation can take minutes on a CPU), its row written, its
//! counters added, then acked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use trawl_core::counters::Counter;
use trawl_core::pipeline::{Shutdown, Stage, StageContext, StageError, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_core::settings::RefineSettings;
use trawl_core::state::State;
use trawl_core::{CoreError, RefineJob};
use trawl_refine::backend::BackendError;
use trawl_refine::page::{Engine, Refined, refine_guarded};
use trawl_refine::program::Mode;

use crate::sink::{RefinedSink, SinkError};

/// A delivery in progress is marked this often, so the queue does not hand a long
/// generation to another replica (the cluster's `ack_wait` is 120 s).
const PROGRESS_EVERY: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum RefinerError {
    #[error(transparent)]
    Queue(#[from] CoreError),
    #[error("writing refined rows: {0}")]
    Sink(#[from] SinkError),
    #[error("the refining task was lost: {0}")]
    Task(String),
}

/// What a worker refines with.
pub struct RefinerConfig {
    pub engine: Engine,
    pub max_html_bytes: usize,
    /// Tries of a page in place while the model's backend fails (a server restarting),
    /// waiting longer each time, before the page is given up on.
    pub backend_tries: u32,
    /// Given up on: the row is written as skipped (`backend`: the embedded runtime, which
    /// must finish); else the page is put back for a later delivery, and dead-lettered at
    /// the queue's delivery limit (the cluster).
    pub write_backend_failures: bool,
}

impl RefinerConfig {
    pub fn new(engine: Engine, s: &RefineSettings) -> Self {
        RefinerConfig {
            engine,
            max_html_bytes: s.refine_max_html_bytes,
            backend_tries: 8,
            write_backend_failures: false,
        }
    }
}

/// `n` refining workers over `queue`, writing to `sink`.
pub fn spawn(
    workers: &mut Workers,
    n: usize,
    cfg: &Arc<RefinerConfig>,
    queue: &Arc<dyn Queue<RefineJob>>,
    sink: &Arc<RefinedSink>,
    state: &Arc<dyn State>,
    stop: &Shutdown,
) {
    workers.spawn_n(n, || {
        run_worker(
            queue.clone(),
            cfg.clone(),
            sink.clone(),
            state.clone(),
            stop.clone(),
        )
    });
}

/// The refiner's start-up check: the engine its settings name can be built (a model
/// file, a system prompt, an endpoint), checked without loading anything. A failure is
/// [fatal](StageError::fatal): the crawl's pages would wait for a refiner that restarts
/// forever.
pub fn check(settings: &RefineSettings) -> Result<(), StageError> {
    crate::engine::check(settings).map_err(StageError::fatal)
}

/// The refiner as one stage of a cluster crawl: the engine of this process's settings
/// (checked, then loaded before the stage is ready: what cannot load is fatal, a server
/// that does not answer is not), its own `refined-<replica>-<pid>.jsonl` in the output
/// directory.
pub async fn serve(ctx: StageContext, settings: RefineSettings) -> StageResult {
    check(&settings)?;
    let s = settings.clone();
    let engine = tokio::task::spawn_blocking(move || crate::engine::build(&s))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| match e {
            crate::engine::EngineError::Backend(
                BackendError::Unreachable { .. } | BackendError::Status { .. },
            ) => StageError::transient(e),
            e => StageError::fatal(e),
        })?;
    let name = format!(
        "{}-{}",
        ctx.process.instance_name(Stage::Refiner.name()),
        std::process::id()
    );
    let sink = Arc::new(RefinedSink::open(
        &ctx.process.out.join(format!("refined-{name}.jsonl")),
    )?);
    tracing::info!(
        engine = %engine.name(),
        out = %sink.path().display(),
        "refining the crawl's pages"
    );
    let cfg = Arc::new(RefinerConfig::new(engine, &settings));
    ctx.set_ready();
    let mut workers = Workers::new();
    spawn(
        &mut workers,
        crate::engine::concurrency(&settings),
        &cfg,
        &ctx.hops.refine,
        &sink,
        &ctx.state,
        &ctx.shutdown,
    );
    workers.join().await
}

/// Pulls pages one at a time and refines them until the stop.
pub async fn run_worker(
    queue: Arc<dyn Queue<RefineJob>>,
    cfg: Arc<RefinerConfig>,
    sink: Arc<RefinedSink>,
    state: Arc<dyn State>,
    mut stop: Shutdown,
) -> Result<(), RefinerError> {
    while let Some(batch) = stop
        .run_until(queue.pull(1, Duration::from_millis(200)))
        .await
    {
        for d in batch? {
            if !handle(&*queue, &cfg, &sink, &*state, &mut stop, d.id, d.msg).await? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// One delivery to its end: written and acked, or put back. False when the stop came first
/// (the page is put back for another worker or the next start).
async fn handle(
    queue: &dyn Queue<RefineJob>,
    cfg: &Arc<RefinerConfig>,
    sink: &RefinedSink,
    state: &dyn State,
    stop: &mut Shutdown,
    id: u64,
    job: RefineJob,
) -> Result<bool, RefinerError> {
    let job = Arc::new(job);
    let mut tries = 0;
    loop {
        let started = Instant::now();
        let Some(row) = refine(queue, cfg, stop, id, &job).await? else {
            queue.nak(id, Duration::ZERO).await?;
            return Ok(false);
        };
        if row.skipped.as_deref() == Some("backend") {
            tries += 1;
            state.count(&Counter::RefineRetries, 1).await?;
            tracing::warn!(url = %job.url, tries, error = ?row.error, "the model's backend failed");
            if tries < cfg.backend_tries {
                let wait = Duration::from_secs((1u64 << tries.min(6)).min(60));
                if stop.run_until(tokio::time::sleep(wait)).await.is_none() {
                    queue.nak(id, Duration::ZERO).await?;
                    return Ok(false);
                }
                continue;
            }
            if !cfg.write_backend_failures {
                queue.nak(id, Duration::from_secs(30)).await?;
                return Ok(true);
            }
        }
        sink.write(&row)?;
        count(state, &row, started.elapsed()).await?;
        queue.ack(id).await?;
        return Ok(true);
    }
}

/// The page refined on the blocking pool, its delivery marked in progress meanwhile;
/// `None` on a stop.
async fn refine(
    queue: &dyn Queue<RefineJob>,
    cfg: &Arc<RefinerConfig>,
    stop: &mut Shutdown,
    id: u64,
    job: &Arc<RefineJob>,
) -> Result<Option<Refined>, RefinerError> {
    let (c, j) = (cfg.clone(), job.clone());
    let mut task = tokio::task::spawn_blocking(move || {
        let source = match &j.warc_record {
            Some(r) => format!("warc:{r}"),
            None => format!("crawl:{}", j.crawl),
        };
        let mut row = refine_guarded(
            &c.engine,
            Mode::Trawl,
            &j.url,
            &source,
            &j.html,
            c.max_html_bytes,
        );
        row.input_cut = j.html_cut;
        row
    });
    let waited = stop
        .run_until(async {
            let mut tick = tokio::time::interval(PROGRESS_EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    r = &mut task => return r.map_err(|e| RefinerError::Task(e.to_string())),
                    _ = tick.tick() => queue.progress(id).await?,
                }
            }
        })
        .await;
    waited.transpose()
}

/// A written row's counters.
async fn count(state: &dyn State, row: &Refined, took: Duration) -> Result<(), CoreError> {
    state.count(&Counter::RefinePages, 1).await?;
    state
        .count(
            &Counter::RefineMs,
            took.as_millis().min(i64::MAX as u128) as i64,
        )
        .await?;
    if let Some(why) = &row.skipped {
        return state
            .count(&Counter::RefineSkipped(why.clone()), 1)
            .await
            .map(drop);
    }
    if let Some(d) = row.decision {
        let name = format!("{d:?}").to_lowercase();
        state.count(&Counter::RefineDecision(name), 1).await?;
    } else {
        state
            .count(&Counter::RefineDecision("none".into()), 1)
            .await?;
    }
    if row.fell_back {
        state.count(&Counter::RefineFallbacks, 1).await?;
    }
    for (c, n) in [
        (Counter::RefinePromptTokens, row.tokens.prompt),
        (Counter::RefineCompletionTokens, row.tokens.completion),
    ] {
        if n > 0 {
            state.count(&c, n as i64).await?;
        }
    }
    Ok(())
}
