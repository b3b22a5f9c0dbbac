//! How stages are wired: the topology (which [`Stage`] consumes which [`Hop`], and where it
//! publishes), the queues between the stages, and one set of workers per runtime.
//!
//! The embedded runtime spawns the stages over [`crate::queue::MemoryQueue`]s; a service
//! spawns one stage over JetStream. Both go through the stages' own `spawn` functions, which
//! take a [`Hops`], the shared state and a [`Shutdown`], and add their workers to a
//! [`Workers`] set.

use std::fmt;
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

/// A queue between stages, in pipeline order. Its [`name`](Hop::name) names its stream,
/// subject and dead letters (`TRAWL_FETCH`, `trawl.fetch`, `TRAWL_DLQ_FETCH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hop {
    /// Web archives of a distributed ingest: into the ingesters (not one of the [`Hops`]:
    /// the ingester asks for it by name).
    Archives,
    /// Links, sitemap and feed URLs, seeds: into the frontier.
    Discovered,
    /// Jobs of claimed hosts: into the fetchers.
    Fetch,
    /// Responses: into the extractors.
    Fetched,
    /// Pages the render rule picked: into the renderers.
    Render,
    /// Page records: into the indexers.
    Docs,
    /// Kept HTML pages of a crawl that refines: into the refiners.
    Refine,
    /// A re-crawl's change events: into the notifier.
    Changed,
}

impl Hop {
    /// Every hop, in pipeline order.
    pub const ALL: [Hop; 8] = [
        Hop::Archives,
        Hop::Discovered,
        Hop::Fetch,
        Hop::Fetched,
        Hop::Render,
        Hop::Docs,
        Hop::Refine,
        Hop::Changed,
    ];

    /// The name its stream, subject and dead letters are made of, and `trawl status` shows.
    pub const fn name(self) -> &'static str {
        match self {
            Hop::Archives => "archives",
            Hop::Discovered => "discovered",
            Hop::Fetch => "fetch",
            Hop::Fetched => "fetched",
            Hop::Render => "render",
            Hop::Docs => "docs",
            Hop::Refine => "refine",
            Hop::Changed => "changed",
        }
    }

    /// The hop of this name; `None` for a name that is not one.
    pub fn from_name(name: &str) -> Option<Hop> {
        Hop::ALL.into_iter().find(|h| h.name() == name)
    }

    /// The stage that consumes it (its durable consumer's name).
    pub const fn consumer(self) -> Stage {
        match self {
            Hop::Archives => Stage::Ingester,
            Hop::Discovered => Stage::Frontier,
            Hop::Fetch => Stage::Fetcher,
            Hop::Fetched => Stage::Extractor,
            Hop::Render => Stage::Renderer,
            Hop::Docs => Stage::Indexer,
            Hop::Refine => Stage::Refiner,
            Hop::Changed => Stage::Notifier,
        }
    }

    /// Whether work on it keeps a crawl running: change events are deliveries after it; a
    /// page waiting for the refiner is work of the crawl (its `refined.jsonl` is not whole).
    pub const fn is_crawl_hop(self) -> bool {
        !matches!(self, Hop::Changed)
    }
}

impl fmt::Display for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A stage of the pipeline, in pipeline order. Its [`name`](Stage::name) is its service's
/// (`trawl-<name>`), its metrics' prefix (`trawl_<name>_`), its key under the Helm chart's
/// `stages`, and the durable consumer of the hop it consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Ingester,
    Frontier,
    Fetcher,
    Extractor,
    Renderer,
    Indexer,
    Refiner,
    Notifier,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 8] = [
        Stage::Ingester,
        Stage::Frontier,
        Stage::Fetcher,
        Stage::Extractor,
        Stage::Renderer,
        Stage::Indexer,
        Stage::Refiner,
        Stage::Notifier,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Stage::Ingester => "ingester",
            Stage::Frontier => "frontier",
            Stage::Fetcher => "fetcher",
            Stage::Extractor => "extractor",
            Stage::Renderer => "renderer",
            Stage::Indexer => "indexer",
            Stage::Refiner => "refiner",
            Stage::Notifier => "notifier",
        }
    }

    /// The stage of this name; `None` for a name that is not one.
    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The hop it takes its work from (each stage consumes exactly one, each hop is
    /// consumed by exactly one stage: [`Hop::consumer`] is the other way round).
    pub const fn consumes(self) -> Hop {
        match self {
            Stage::Ingester => Hop::Archives,
            Stage::Frontier => Hop::Discovered,
            Stage::Fetcher => Hop::Fetch,
            Stage::Extractor => Hop::Fetched,
            Stage::Renderer => Hop::Render,
            Stage::Indexer => Hop::Docs,
            Stage::Refiner => Hop::Refine,
            Stage::Notifier => Hop::Changed,
        }
    }

    /// The hops it publishes to.
    pub const fn produces(self) -> &'static [Hop] {
        match self {
            Stage::Ingester => &[Hop::Docs],
            Stage::Frontier => &[Hop::Fetch],
            Stage::Fetcher => &[Hop::Fetched, Hop::Discovered],
            Stage::Extractor => &[Hop::Docs, Hop::Discovered, Hop::Render, Hop::Refine],
            Stage::Renderer => &[Hop::Docs, Hop::Discovered, Hop::Refine],
            Stage::Indexer => &[Hop::Changed],
            Stage::Refiner | Stage::Notifier => &[],
        }
    }

    /// Every hop it uses: the one it consumes, then those it publishes to. A service
    /// connects these and leaves the other [`Hops`] unconnected.
    pub fn hops(self) -> impl Iterator<Item = Hop> {
        std::iter::once(self.consumes()).chain(self.produces().iter().copied())
    }

    /// Whether it consumes or publishes to `hop`.
    pub fn uses(self, hop: Hop) -> bool {
        self.consumes() == hop || self.produces().contains(&hop)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a stage's failure is worth starting it again for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A backend went away, a worker panicked, a disk filled: the service starts the stage
    /// again after a pause, with fresh connections.
    Transient,
    /// Settings that cannot work (no browser, no model, an invalid setting): starting
    /// again would fail the same way, so the service ends with an error instead.
    Fatal,
}

/// A stage's failure: what went wrong, and whether to retry ([`ErrorKind`]). Any error
/// (or message) converts into a [`Transient`](ErrorKind::Transient) one with `?`; a stage
/// that finds its settings unusable says so with [`StageError::fatal`].
///
/// It is no `std::error::Error` itself (that would make the blanket conversion overlap
/// `From<T> for T`): it is `Display` (its message) and `Debug`, which `anyhow!` and
/// `anyhow::Error::msg` take.
#[derive(Debug)]
pub struct StageError {
    kind: ErrorKind,
    error: Box<dyn std::error::Error + Send + Sync>,
}

impl StageError {
    pub fn transient(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        StageError {
            kind: ErrorKind::Transient,
            error: e.into(),
        }
    }

    pub fn fatal(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        StageError {
            kind: ErrorKind::Fatal,
            error: e.into(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn is_fatal(&self) -> bool {
        self.kind == ErrorKind::Fatal
    }
}

impl fmt::Display for StageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// Any error, `String` or `&str` is a transient failure unless said otherwise.
impl<E: Into<Box<dyn std::error::Error + Send + Sync>>> From<E> for StageError {
    fn from(e: E) -> Self {
        StageError::transient(e)
    }
}

pub type StageResult = Result<(), StageError>;

/// The queues between the stages, in pipeline order (all but [`Hop::Archives`]).
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
    /// A panic or a cancellation is [transient](ErrorKind::Transient): the stage is
    /// started again, as for a backend that went away.
    pub async fn next(&mut self) -> Option<StageResult> {
        self.set.join_next().await.map(|r| match r {
            Ok(r) => r,
            Err(e) if e.is_panic() => Err(StageError::transient(format!("worker panicked: {e}"))),
            Err(e) => Err(StageError::transient(format!("worker cancelled: {e}"))),
        })
    }

    /// Waits for every worker. The first to fail (or panic: [transient](ErrorKind::Transient))
    /// ends the set: the others are stopped rather than left to run short-handed. Its
    /// error is returned, fatal or not.
    pub async fn join(&mut self) -> StageResult {
        let mut result = Ok(());
        while let Some(r) = self.set.join_next().await {
            let failed = match r {
                Ok(r) => r.err(),
                Err(e) if e.is_panic() => {
                    Some(StageError::transient(format!("worker panicked: {e}")))
                }
                // Cancelled: by `abort_all`, after the first failure.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_round_trip_and_misspellings_are_none() {
        for h in Hop::ALL {
            assert_eq!(Hop::from_name(h.name()), Some(h));
            assert_eq!(h.to_string(), h.name());
            assert_eq!(serde_json::to_value(h).unwrap(), h.name());
        }
        for s in Stage::ALL {
            assert_eq!(Stage::from_name(s.name()), Some(s));
            assert_eq!(s.to_string(), s.name());
        }
        for bad in ["", "Fetch", "fetches", "discover", "worker", "frontier"] {
            assert_eq!(Hop::from_name(bad), None, "{bad}");
        }
        for bad in ["", "Fetcher", "fetch", "render", "indexers"] {
            assert_eq!(Stage::from_name(bad), None, "{bad}");
        }
    }

    /// The stream, subject and consumer names of running clusters are made of these: a
    /// change strands their messages.
    #[test]
    fn names_are_the_streams_and_consumers_of_before() {
        let hops: Vec<_> = Hop::ALL.iter().map(|h| h.name()).collect();
        assert_eq!(
            hops,
            [
                "archives",
                "discovered",
                "fetch",
                "fetched",
                "render",
                "docs",
                "refine",
                "changed"
            ]
        );
        let consumers: Vec<_> = Hop::ALL.iter().map(|h| h.consumer().name()).collect();
        assert_eq!(
            consumers,
            [
                "ingester",
                "frontier",
                "fetcher",
                "extractor",
                "renderer",
                "indexer",
                "refiner",
                "notifier"
            ]
        );
        assert!(Hop::ALL.windows(2).all(|w| w[0] < w[1]));
        assert!(Stage::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn every_hop_has_one_consumer_and_every_stage_one_input() {
        for h in Hop::ALL {
            let consumers: Vec<_> = Stage::ALL.iter().filter(|s| s.consumes() == h).collect();
            assert_eq!(consumers, [&h.consumer()], "{h}");
        }
        for s in Stage::ALL {
            assert_eq!(s.consumes().consumer(), s);
            assert!(!s.produces().contains(&s.consumes()), "{s} feeds itself");
            for p in s.produces() {
                assert!(Hop::ALL.contains(p));
                assert_eq!(
                    s.produces().iter().filter(|q| *q == p).count(),
                    1,
                    "{s}: {p} twice"
                );
            }
            for h in Hop::ALL {
                assert_eq!(s.uses(h), s.hops().any(|u| u == h), "{s} {h}");
            }
        }
        // Every hop but the first is fed by some stage (archives: by `trawl submit`).
        for h in &Hop::ALL[1..] {
            assert!(
                Stage::ALL.iter().any(|s| s.produces().contains(h)),
                "nothing publishes to {h}"
            );
        }
        assert!(
            Hop::ALL
                .iter()
                .all(|h| h.is_crawl_hop() == (*h != Hop::Changed))
        );
    }

    /// A service connects the same hops as before the topology was typed (`archives`, not
    /// one of the `Hops`, the ingester asks for by name).
    #[test]
    fn each_stage_connects_the_hops_it_did() {
        let before: [(Stage, &[&str]); 8] = [
            (Stage::Frontier, &["discovered", "fetch"]),
            (Stage::Fetcher, &["fetch", "fetched", "discovered"]),
            (
                Stage::Extractor,
                &["fetched", "docs", "discovered", "render", "refine"],
            ),
            (Stage::Renderer, &["render", "docs", "discovered", "refine"]),
            (Stage::Indexer, &["docs", "changed"]),
            (Stage::Refiner, &["refine"]),
            (Stage::Notifier, &["changed"]),
            (Stage::Ingester, &["docs"]),
        ];
        for (stage, hops) in before {
            let now: BTreeSet<&str> = stage
                .hops()
                .filter(|h| *h != Hop::Archives)
                .map(Hop::name)
                .collect();
            assert_eq!(
                now,
                hops.iter().copied().collect::<BTreeSet<_>>(),
                "{stage}"
            );
        }
    }

    /// The Helm chart's `stages` are keyed by these names (one Deployment each).
    #[test]
    fn the_helm_charts_stages_are_these() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/helm/trawl/values.yaml"
        );
        let values = std::fs::read_to_string(path).unwrap();
        let keys: BTreeSet<&str> = values
            .lines()
            .skip_while(|l| *l != "stages:")
            .skip(1)
            .take_while(|l| l.is_empty() || l.starts_with(' ') || l.starts_with('#'))
            .filter_map(|l| l.strip_prefix("  "))
            .filter(|l| !l.starts_with([' ', '#']))
            .filter_map(|l| l.strip_suffix(':'))
            .collect();
        let names: BTreeSet<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(keys, names);
    }

    #[test]
    fn errors_are_transient_unless_said_fatal() {
        fn io() -> Result<(), std::io::Error> {
            Err(std::io::Error::other("disk"))
        }
        fn stage() -> StageResult {
            io()?;
            Ok(())
        }
        let e = stage().unwrap_err();
        assert!(!e.is_fatal());
        assert_eq!(e.to_string(), "disk");
        let from_str: StageError = "no Chromium found".into();
        assert_eq!(from_str.kind(), ErrorKind::Transient);
        let fatal = StageError::fatal(format!("no model in {}", "/m"));
        assert!(fatal.is_fatal());
        assert_eq!(fatal.to_string(), "no model in /m");
        // `?` keeps the kind.
        let kept = || -> StageResult {
            Err::<(), _>(fatal)?;
            Ok(())
        };
        assert!(kept().unwrap_err().is_fatal());
    }

    #[tokio::test]
    async fn workers_give_back_the_first_error_as_it_was() {
        let mut w = Workers::new();
        w.spawn(async { Err::<(), _>(StageError::fatal("no browser")) });
        w.spawn(std::future::pending::<Result<(), String>>());
        let e = w.join().await.unwrap_err();
        assert!(e.is_fatal());
        assert_eq!(e.to_string(), "no browser");
        async fn boom() -> Result<(), String> {
            panic!("boom")
        }
        let mut w = Workers::new();
        w.spawn(boom());
        let e = w.next().await.unwrap().unwrap_err();
        assert!(!e.is_fatal() && e.to_string().contains("panicked"), "{e}");
    }
}
