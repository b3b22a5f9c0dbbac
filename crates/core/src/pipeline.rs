//! How stages are wired: the hops between them and one set of workers per runtime.
//!
//! The embedded runtime spawns all four stages over [`crate::queue::MemoryQueue`]s; a service
//! spawns one stage over JetStream. Both go through the stages' own `spawn` functions, which
//! take a [`Hops`], the shared state and a [`Shutdown`], and add their workers to a
//! [`Workers`] set.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinSet;

use crate::change::ChangeEvent;
use crate::queue::Queue;
use crate::settings::ProcessSettings;
use crate::spec::CrawlSpec;
use crate::state::State;
use crate::{Discovered, Doc, FetchJob, Fetched, RefineJob};

pub use crate::shutdown::{Shutdown, ShutdownTrigger, shutdown};

/// A stage's failure, whatever its error type.
pub type StageError = Box<dyn std::error::Error + Send + Sync>;
pub type StageResult = Result<(), StageError>;

/// The queues between the stages, in pipeline order.
#[derive(Clone)]
pub struct Hops {
    /// Links, sitemap and feed URLs, seeds: into the frontier.
    pub discovered: Arc<dyn Queue<Discovered>>,
    /// Jobs of claimed hosts: into the fetchers.
    pub fetch: Arc<dyn Queue<FetchJob>>,
    /// Responses: into the extractors.
    pub fetched: Arc<dyn Queue<Fetched>>,
    /// Page records: into the indexer.
    pub docs: Arc<dyn Queue<Doc>>,
    /// Pages the render rule picked (`Fetched.render` set): into the renderer, which
    /// extracts the browser's DOM itself and publishes to `docs` and `discovered`.
    /// Unconnected where no renderer runs (`--render never`, or no browser).
    pub render: Arc<dyn Queue<Fetched>>,
    /// A re-crawl's change events: into the notifier (the cluster's; the embedded runtime
    /// hands its events to the webhook task directly and leaves this hop unconnected).
    pub changed: Arc<dyn Queue<ChangeEvent>>,
    /// Kept HTML pages of a crawl that refines (`refine`): into the refiner, which writes
    /// `refined.jsonl`. Unconnected where nothing refines.
    pub refine: Arc<dyn Queue<RefineJob>>,
}

/// The hop names and the stage that consumes each, in pipeline order (`archives`: web
/// archives for the ingesters of a distributed ingest, whose pages go to `docs`).
pub const HOPS: [(&str, &str); 8] = [
    ("archives", "ingester"),
    ("discovered", "frontier"),
    ("fetch", "fetcher"),
    ("fetched", "extractor"),
    ("render", "renderer"),
    ("docs", "indexer"),
    ("refine", "refiner"),
    ("changed", "notifier"),
];

/// Whether work on `hop` keeps a crawl running: change events are deliveries after it; a
/// page waiting for the refiner is work of the crawl (its `refined.jsonl` is not whole).
pub fn is_crawl_hop(hop: &str) -> bool {
    hop != "changed"
}

/// The hops each stage uses (consumes or publishes to).
pub fn hops_of(stage: &str) -> &'static [&'static str] {
    match stage {
        "frontier" => &["discovered", "fetch"],
        "fetcher" => &["fetch", "fetched", "discovered"],
        "extractor" => &["fetched", "docs", "discovered", "render", "refine"],
        "renderer" => &["render", "docs", "discovered", "refine"],
        "indexer" => &["docs", "changed"],
        "refiner" => &["refine"],
        "notifier" => &["changed"],
        // Its own hop, `archives`, is not one of the `Hops`: it asks for it by name.
        "ingester" => &["docs"],
        _ => &[
            "discovered",
            "fetch",
            "fetched",
            "render",
            "docs",
            "refine",
            "changed",
        ],
    }
}

/// Messages waiting or unacknowledged on every crawl hop (not `changed`), as a stage that
/// sees only its own hops asks the runtime: the cluster's frontier waits for zero before a
/// re-crawl's end-of-crawl check.
#[async_trait::async_trait]
pub trait Backlog: Send + Sync {
    async fn pending(&self) -> crate::CoreResult<u64>;
}

/// The tasks of one or more stages.
#[derive(Default)]
pub struct Workers {
    set: JoinSet<StageResult>,
}

impl Workers {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn spawn<F, E>(&mut self, work: F)
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<StageError> + 'static,
    {
        self.set
            .spawn(async move { work.await.map_err(Into::into) });
    }

    /// `n` copies of a worker, each made by `make`.
    pub fn spawn_n<F, Fut, E>(&mut self, n: usize, mut make: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<StageError> + 'static,
    {
        for _ in 0..n {
            self.spawn(make());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The next worker to end: `Err` when it failed or panicked; `None` when none is left.
    pub async fn next(&mut self) -> Option<Result<(), String>> {
        self.set.join_next().await.map(|r| match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) if e.is_panic() => Err(format!("worker panicked: {e}")),
            Err(e) => Err(format!("worker cancelled: {e}")),
        })
    }

    /// Waits for every worker. The first to fail (or panic) ends the set: the others are
    /// stopped rather than left to run short-handed.
    pub async fn join(&mut self) -> Result<(), String> {
        let mut result = Ok(());
        while let Some(r) = self.set.join_next().await {
            let failed = match r {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) if e.is_panic() => Some(format!("worker panicked: {e}")),
                Err(_) => None,
            };
            if let Some(e) = failed
                && result.is_ok()
            {
                result = Err(e);
                self.set.abort_all();
            }
        }
        result
    }

    pub fn abort_all(&mut self) {
        self.set.abort_all();
    }
}

/// What a stage run as a service gets from its runtime: the crawl, this process's settings,
/// the hops and state over the cluster's backends, the stop signal and a readiness flag.
#[derive(Clone)]
pub struct StageContext {
    pub spec: CrawlSpec,
    pub process: ProcessSettings,
    pub hops: Hops,
    pub state: Arc<dyn State>,
    pub shutdown: Shutdown,
    pub ready: Arc<AtomicBool>,
    /// The largest message a hop carries, in bytes (`None`: no limit).
    pub max_message_bytes: Option<usize>,
}

impl StageContext {
    /// The stage is serving: `/readyz` answers 200.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }
}
