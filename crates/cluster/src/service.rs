//! What every service shares: settings ([`Settings::load`]: defaults, `TRAWL_CONFIG`, then
//! `TRAWL_*`), JSON logs, the HTTP endpoints (`/healthz`, `/readyz`, `/metrics` in the
//! Prometheus text format), the hops over JetStream, the crawl spec, the state in Redis, and
//! a SIGTERM that drains. A service binary is one call of [`run`] (or [`run_checked`]) with
//! its [`Stage`] and the stage's `serve`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use trawl_core::pipeline::{Backlog, Hops, Shutdown, StageContext};
pub use trawl_core::pipeline::{Hop, Stage, StageError, StageResult};
use trawl_core::queue::{Queue, Unconnected};
use trawl_core::settings::{ClusterSettings, PageGate, Settings, redact_url};
use trawl_core::spec::CrawlSpec;
use trawl_dedup::Gate;

use crate::jetstream::{JetStreamQueue, QueueConfig};
use crate::redis_history::RedisHistory;
use crate::redis_state::RedisState;

/// Connects to NATS with the settings' credentials; errors never show a password.
/// `nats_url` may name several servers of one cluster, comma-separated: the first that
/// answers is used, and the client moves to another when it goes away (it also learns the
/// cluster's other servers from the one it reached).
pub async fn nats(c: &ClusterSettings) -> Result<async_nats::Client, String> {
    let mut o = async_nats::ConnectOptions::new();
    if let (Some(u), Some(p)) = (&c.nats_user, &c.nats_password) {
        o = async_nats::ConnectOptions::with_user_and_password(u.clone(), p.clone());
    } else if let Some(t) = &c.nats_token {
        o = async_nats::ConnectOptions::with_token(t.clone());
    }
    // Back soon after a restart: tries at most a second apart (the client's own pause
    // grows to 4 s, which a restart of a few seconds would mostly spend waiting).
    o = o.reconnect_delay_callback(|attempts| {
        Duration::from_millis((attempts as u64 * 100).min(1_000))
    });
    let shown = || redact_url(&c.nats_url);
    let addrs = c
        .nats_url
        .split(',')
        .map(|u| u.trim().parse::<async_nats::ServerAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("NATS at {}: {e}", shown()))?;
    o.connect(addrs.as_slice())
        .await
        .map_err(|e| format!("NATS at {}: {e}", shown()))
}

/// The queue of one hop, consumed by its stage (publishers name the hop too: the consumer
/// is created once, by whoever comes first).
pub async fn queue<M>(
    client: &async_nats::Client,
    c: &ClusterSettings,
    hop: Hop,
) -> Result<Arc<JetStreamQueue<M>>, String> {
    JetStreamQueue::connect(client, QueueConfig::from_settings(c, hop))
        .await
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// `hop` over JetStream when `stage` uses it, else [`Unconnected`].
async fn hop_of<M>(
    client: &async_nats::Client,
    c: &ClusterSettings,
    stage: Stage,
    hop: Hop,
) -> Result<Arc<dyn Queue<M>>, String>
where
    M: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    let q: Arc<dyn Queue<M>> = if stage.uses(hop) {
        queue::<M>(client, c, hop).await?
    } else {
        Arc::new(Unconnected(hop))
    };
    Ok(q)
}

/// The hops `stage` uses over JetStream ([`Stage::hops`]); the others are [`Unconnected`],
/// so a process creates (and watches the dead letters of) only the streams it works with.
/// (The ingester's own hop, [`Hop::Archives`], is not one of the [`Hops`]:
/// [`Backends::queue`].)
pub async fn hops(
    client: &async_nats::Client,
    c: &ClusterSettings,
    stage: Stage,
) -> Result<Hops, String> {
    Ok(Hops {
        discovered: hop_of(client, c, stage, Hop::Discovered).await?,
        fetch: hop_of(client, c, stage, Hop::Fetch).await?,
        fetched: hop_of(client, c, stage, Hop::Fetched).await?,
        docs: hop_of(client, c, stage, Hop::Docs).await?,
        render: hop_of(client, c, stage, Hop::Render).await?,
        changed: hop_of(client, c, stage, Hop::Changed).await?,
        refine: hop_of(client, c, stage, Hop::Refine).await?,
    })
}

/// Waits for `trawl submit` to store the crawl's spec; `None` on a stop. Meanwhile the
/// replica counts as one of `stage` for the crawl (`spec_watch::mark_stage`): a deployed
/// renderer waiting for the spec must be known to the extractors before the seeds are
/// fetched, or the first pages that need a browser are kept unrendered.
pub async fn wait_for_spec(
    c: &ClusterSettings,
    crawl: &str,
    stage: Stage,
    stop: &mut Shutdown,
) -> Result<Option<CrawlSpec>, String> {
    let mut warned = false;
    let mut conn = None;
    loop {
        crate::spec_watch::mark_stage(&c.redis_url, &mut conn, crawl, stage).await;
        if let Some(s) = crate::spec::get(&c.redis_url, crawl).await? {
            return Ok(Some(s));
        }
        if !warned {
            tracing::info!(crawl, "waiting for `trawl submit` to start this crawl");
            warned = true;
        }
        if stop
            .run_until(tokio::time::sleep(Duration::from_secs(1)))
            .await
            .is_none()
        {
            return Ok(None);
        }
    }
}

/// The crawl's state in Redis: a [fatal](StageError::fatal) error when this process names
/// another count of servers than the crawl was submitted with ([`state_nodes_for`]), a
/// transient one when Redis does not answer.
pub async fn state_for(
    c: &ClusterSettings,
    spec: &CrawlSpec,
) -> Result<Arc<RedisState>, StageError> {
    let nodes = state_nodes_for(c, spec)?;
    RedisState::connect_sharded(
        &nodes,
        &spec.crawl,
        spec.settings.max_queued,
        spec.settings.concurrency_per_host,
        c.claim_ttl_s.max(1) * 1000,
    )
    .await
    .map(|s| Arc::new(s.with_lease(c.claim_lease_s.max(1) * 1000)))
    .map_err(StageError::transient)
}

/// The Redis servers of the crawl's per-host state, when this process names as many as
/// the crawl was submitted with; otherwise a [fatal](StageError::fatal) error: settings
/// that cannot work with this crawl.
pub fn state_nodes_for(c: &ClusterSettings, spec: &CrawlSpec) -> Result<Vec<String>, StageError> {
    let nodes = c.state_nodes();
    if nodes.len() != spec.state_shards.max(1) as usize {
        // Another count of servers would look for each host on another shard: hosts
        // fetched twice at once, URLs admitted twice.
        return Err(StageError::fatal(format!(
            "crawl {} keeps its per-host state on {} Redis server(s) (`trawl submit` was \
             given {} --redis-state-url); this service names {}: give every service and \
             `trawl submit` the same TRAWL_REDIS_STATE_URLS",
            spec.crawl,
            spec.state_shards,
            spec.state_shards.saturating_sub(1),
            nodes.len()
        )));
    }
    Ok(nodes)
}

/// What a service's stage may ask of the cluster beyond its [`StageContext`].
pub struct Backends {
    pub settings: Settings,
    pub client: async_nats::Client,
}

/// The crawl hops' backlog, from their streams' message counts (no consumer is made).
struct StreamBacklog {
    client: async_nats::Client,
    cluster: ClusterSettings,
}

#[async_trait::async_trait]
impl Backlog for StreamBacklog {
    async fn pending(&self) -> trawl_core::CoreResult<u64> {
        crate::jetstream::crawl_backlog(&self.client, &self.cluster).await
    }
}

impl Backends {
    /// The crawl's shared near-duplicate gate in Redis (`None` when dedup is off).
    pub async fn dedup_gate(&self, spec: &CrawlSpec) -> Result<Option<Arc<dyn Gate>>, String> {
        let url = &self.settings.cluster.redis_url;
        let gate: Arc<dyn Gate> = match spec.settings.page_gate() {
            None => return Ok(None),
            Some(PageGate::SimHash { distance }) => Arc::new(
                crate::redis_gate::RedisGate::connect(url, &spec.crawl, distance)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            Some(PageGate::MinHash { similarity }) => Arc::new(
                crate::redis_min_gate::RedisMinGate::connect(url, &spec.crawl, similarity)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
        };
        Ok(Some(gate))
    }

    /// Whether a replica of `stage` runs for the crawl, asked of Redis when called: a
    /// yes is kept 5 s, a no 1 s (a replica starting is seen soon), an unanswered
    /// question keeps the last answer.
    pub fn stage_probe(
        &self,
        spec: &CrawlSpec,
        stage: Stage,
    ) -> Arc<
        dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> + Send + Sync,
    > {
        let url = self.settings.cluster.redis_url.clone();
        let crawl = spec.crawl.clone();
        // The answer, when it was had, and the connection it is asked on (one EXISTS, so
        // workers waiting on a refresh wait a round trip).
        type Cache = (
            Option<(std::time::Instant, bool)>,
            Option<redis::aio::ConnectionManager>,
        );
        let cache: Arc<tokio::sync::Mutex<Cache>> = Arc::default();
        Arc::new(move || {
            let (url, crawl, cache) = (url.clone(), crawl.clone(), cache.clone());
            Box::pin(async move {
                let mut c = cache.lock().await;
                if let Some((at, live)) = c.0 {
                    let keep = if live { 5 } else { 1 };
                    if at.elapsed() < Duration::from_secs(keep) {
                        return live;
                    }
                }
                let last = c.0.is_some_and(|(_, live)| live);
                if c.1.is_none() {
                    c.1 = crate::redis_conn::connect(&url).await.ok();
                }
                let answer = match c.1.as_mut() {
                    Some(conn) => crate::spec_watch::stage_live(conn, &crawl, stage).await,
                    None => Err("no connection to Redis".to_string()),
                };
                let live = match answer {
                    Ok(live) => {
                        if c.0.is_none_or(|(_, was)| was != live) {
                            tracing::info!(
                                stage = stage.name(),
                                live,
                                "replicas of the stage running"
                            );
                        }
                        live
                    }
                    // A Redis blip keeps the last answer (for its lifetime, not per page).
                    Err(e) => {
                        let stage = stage.name();
                        tracing::warn!(stage, error = %e, "stage replicas not checked");
                        last
                    }
                };
                c.0 = Some((std::time::Instant::now(), live));
                live
            })
        })
    }

    pub fn backlog(&self) -> Arc<dyn Backlog> {
        Arc::new(StreamBacklog {
            client: self.client.clone(),
            cluster: self.settings.cluster.clone(),
        })
    }

    /// The crawl's archive ledger (a distributed ingest's progress per archive).
    pub async fn ledger(
        &self,
        spec: &CrawlSpec,
    ) -> Result<Arc<crate::redis_archives::RedisLedger>, String> {
        crate::redis_archives::RedisLedger::connect(&self.settings.cluster.redis_url, &spec.crawl)
            .await
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }

    /// A queue of `hop` that is not one of the [`Hops`] (the ingesters' `archives`).
    pub async fn queue<M>(&self, hop: Hop) -> Result<Arc<JetStreamQueue<M>>, String> {
        queue(&self.client, &self.settings.cluster, hop).await
    }

    /// Where this crawl keeps its pages for a later re-crawl, and its unlinked set.
    pub async fn archive(&self, spec: &CrawlSpec) -> Result<Arc<RedisHistory>, String> {
        RedisHistory::connect(&self.settings.cluster.redis_url, &spec.crawl)
            .await
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }

    /// A re-crawl's earlier crawl (`spec.since`), read back from Redis.
    pub async fn history(&self, spec: &CrawlSpec) -> Result<Option<Arc<RedisHistory>>, String> {
        let Some(since) = &spec.since else {
            return Ok(None);
        };
        let h = RedisHistory::connect(&self.settings.cluster.redis_url, since)
            .await
            .map_err(|e| e.to_string())?;
        if h.is_empty().await.map_err(|e| e.to_string())? {
            tracing::warn!(
                since,
                "the earlier crawl kept no pages: every page will be new"
            );
        }
        Ok(Some(Arc::new(h)))
    }
}

/// JSON logs on stderr, filtered by `TRAWL_LOG` (default `info`).
pub fn init_logs() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRAWL_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(trawl_core::DEFAULT_LOG_FILTER)
            }),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// A stop set by SIGTERM or Ctrl-C (or, if signals cannot be watched, right away: a
/// service that cannot be stopped cleanly should not start).
pub fn stop_on_signals() -> Shutdown {
    let (trigger, stop) = trawl_core::pipeline::shutdown();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::error!("cannot watch SIGTERM: {e}");
                        trigger.trigger();
                        return;
                    }
                };
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("stop requested: draining in-flight work");
        trigger.trigger();
    });
    stop
}

/// The first pause before a failed stage is started again; it doubles up to [`PAUSE_MAX`].
const PAUSE_START: Duration = Duration::from_millis(500);
const PAUSE_MAX: Duration = Duration::from_secs(10);
/// A stage that ran this long before it failed was healthy: its failure is a new outage,
/// and the pause starts over.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// The pauses between the starts of a stage that keeps failing.
#[derive(Debug)]
struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: PAUSE_START }
    }
}

impl Backoff {
    /// The pause after a run that lasted `ran`.
    fn after(&mut self, ran: Duration) -> Duration {
        if ran >= HEALTHY_RUN {
            self.reset();
        }
        let pause = self.next;
        self.next = (pause * 2).min(PAUSE_MAX);
        pause
    }

    fn reset(&mut self) {
        self.next = PAUSE_START;
    }
}

/// Runs a service: settings, endpoints, the crawl spec, then `serve` until SIGTERM. `serve`
/// gets the context (hops, state, stop) and returns when its workers have drained. A stage
/// that fails with a transient error (NATS or Redis went away: a restart, a failover) is
/// started again with fresh connections after a pause that grows to 10 s (and starts over
/// after a healthy minute), so a backend outage stalls the crawl instead of ending the
/// service. A [fatal](StageError::fatal) error (settings that cannot work) ends the process
/// with an error instead: started again, the stage would fail the same way.
pub async fn run<F, Fut>(stage: Stage, serve: F) -> std::process::ExitCode
where
    F: Fn(StageContext, Arc<Backends>) -> Fut,
    Fut: std::future::Future<Output = StageResult>,
{
    run_checked(stage, |_| Ok(()), serve).await
}

/// [`run`], with the stage's own start-up `check` of the settings before anything is
/// connected (a browser, a model): its fatal error ends the process before the replica is
/// counted as one of its stage, which would have the other stages wait on it.
pub async fn run_checked<C, F, Fut>(stage: Stage, check: C, serve: F) -> std::process::ExitCode
where
    C: FnOnce(&Settings) -> Result<(), StageError>,
    F: Fn(StageContext, Arc<Backends>) -> Fut,
    Fut: std::future::Future<Output = StageResult>,
{
    init_logs();
    let result = match Service::start(stage, check).await {
        Ok(Some(mut service)) => {
            let r = service.supervise(&serve).await;
            service.http.abort();
            r
        }
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => {
            tracing::info!(stage = stage.name(), "stopped cleanly");
            std::process::ExitCode::SUCCESS
        }
        Err(e) if e.is_fatal() => {
            tracing::error!(
                stage = stage.name(),
                fatal = true,
                "{e} (not started again: the settings must change)"
            );
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            tracing::error!(stage = stage.name(), "{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A service between its stage's runs: what it connected once, and the crawl it runs.
struct Service {
    stage: Stage,
    settings: Settings,
    client: async_nats::Client,
    backends: Arc<Backends>,
    ready: Arc<AtomicBool>,
    /// The process's stop (SIGTERM).
    stop: Shutdown,
    http: tokio::task::JoinHandle<Result<(), String>>,
    replica: String,
    max_message_bytes: Option<usize>,
    spec: CrawlSpec,
    /// The spec as stored (what the replica marks, hashed).
    spec_json: String,
    state: Arc<RedisState>,
}

/// How one run of the stage ended.
enum Ended {
    /// By the process's stop: the stage's result is the service's.
    Stopped(StageResult),
    /// By a replaced spec: the new one and its stored JSON.
    Replaced(Box<CrawlSpec>, String),
    /// On its own (`Ok`: without a stop), after running this long.
    Failed(StageResult, Duration),
}

impl Service {
    /// Everything before the stage's first run: the settings (unreadable or invalid:
    /// fatal), `check`, NATS, the endpoints, the signals, the crawl's spec and its state.
    /// `None` when stopped before the spec came.
    async fn start<C>(stage: Stage, check: C) -> Result<Option<Service>, StageError>
    where
        C: FnOnce(&Settings) -> Result<(), StageError>,
    {
        let settings = Settings::load(None).map_err(|e| StageError::fatal(e.to_string()))?;
        check(&settings)?;
        let client = nats(&settings.cluster).await?;
        let ready = Arc::new(AtomicBool::new(false));
        let http = tokio::spawn(crate::endpoints::serve_http(
            settings.clone(),
            stage,
            client.clone(),
            ready.clone(),
        ));
        let mut stop = stop_on_signals();
        let c = &settings.cluster;
        let Some(spec) = wait_for_spec(c, &settings.process.crawl, stage, &mut stop).await? else {
            http.abort();
            return Ok(None);
        };
        let state = state_for(c, &spec).await?;
        tracing::info!(crawl = %spec.crawl, stage = stage.name(), "running");
        Ok(Some(Service {
            stage,
            replica: format!(
                "{}-{}",
                settings.process.instance_name(stage.name()),
                std::process::id()
            ),
            max_message_bytes: Some(client.server_info().max_payload),
            backends: Arc::new(Backends {
                settings: settings.clone(),
                client: client.clone(),
            }),
            spec_json: serde_json::to_string(&spec).unwrap_or_default(),
            settings,
            client,
            ready,
            stop,
            http,
            spec,
            state,
        }))
    }

    /// Runs the stage until the process's stop or a fatal error: again after a transient
    /// failure (with a pause), and under the new spec when the stored one is replaced.
    async fn supervise<F, Fut>(&mut self, serve: &F) -> StageResult
    where
        F: Fn(StageContext, Arc<Backends>) -> Fut,
        Fut: std::future::Future<Output = StageResult>,
    {
        let mut backoff = Backoff::default();
        loop {
            match self.run_once(serve).await {
                Ended::Stopped(r) => return r,
                Ended::Replaced(spec, json) => {
                    self.spec = *spec;
                    self.spec_json = json;
                    self.reconnect_state().await?;
                    if self.stop.is_shutdown() {
                        return Ok(());
                    }
                    backoff.reset();
                    tracing::info!(
                        crawl = %self.spec.crawl,
                        stage = self.stage.name(),
                        "running under the new spec"
                    );
                }
                Ended::Failed(Err(e), _) if e.is_fatal() => return Err(e),
                Ended::Failed(r, ran) => {
                    let pause = backoff.after(ran);
                    log_restart(self.stage, &r, pause);
                    if self
                        .stop
                        .run_until(tokio::time::sleep(pause))
                        .await
                        .is_none()
                    {
                        return Ok(());
                    }
                    self.reconnect_state().await?;
                }
            }
        }
    }

    /// One run of the stage, under a stop of its own that the process's stop and a
    /// replaced spec trigger.
    async fn run_once<F, Fut>(&self, serve: &F) -> Ended
    where
        F: Fn(StageContext, Arc<Backends>) -> Fut,
        Fut: std::future::Future<Output = StageResult>,
    {
        let c = &self.settings.cluster;
        let (stage_trigger, stage_stop) = trawl_core::pipeline::shutdown();
        let stage_stopped = stage_stop.clone();
        let watcher = tokio::spawn(crate::spec_watch::watch(
            c.redis_url.clone(),
            self.stage,
            self.replica.clone(),
            self.spec.clone(),
            self.spec_json.clone(),
            self.stop.clone(),
            stage_trigger,
        ));
        let started = Instant::now();
        let r = match hops(&self.client, c, self.stage).await {
            Ok(hops) => {
                let ctx = StageContext {
                    spec: self.spec.clone(),
                    process: self.settings.process.clone(),
                    hops,
                    state: self.state.clone(),
                    shutdown: stage_stop,
                    ready: self.ready.clone(),
                    max_message_bytes: self.max_message_bytes,
                };
                serve(ctx, self.backends.clone()).await
            }
            Err(e) => Err(StageError::transient(e)),
        };
        let ran = started.elapsed();
        if self.stop.is_shutdown() {
            watcher.abort();
            return Ended::Stopped(r);
        }
        self.ready.store(false, Ordering::Relaxed);
        // Stopped by the watcher: it has returned, or is about to.
        if stage_stopped.is_shutdown() {
            if let Some((spec, json)) = watcher.await.ok().flatten() {
                return Ended::Replaced(Box::new(spec), json);
            }
        } else {
            watcher.abort();
        }
        Ended::Failed(r, ran)
    }

    /// A fresh state connection (the old one may be wedged on a server that went away);
    /// Redis not back yet keeps the old one. Another count of state servers under a
    /// replaced spec is fatal: running on the old state under the new spec would look for
    /// hosts on the wrong shards.
    async fn reconnect_state(&mut self) -> StageResult {
        match state_for(&self.settings.cluster, &self.spec).await {
            Ok(s) => self.state = s,
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => tracing::warn!(stage = self.stage.name(), "Redis not back yet: {e}"),
        }
        Ok(())
    }
}

fn log_restart(stage: Stage, r: &StageResult, pause: Duration) {
    match r {
        Ok(()) => tracing::warn!(
            stage = stage.name(),
            "stage ended without a stop; starting it again in {pause:?}"
        ),
        Err(e) => tracing::error!(
            stage = stage.name(),
            "stage failed, starting it again in {pause:?}: {e}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_grows_to_its_cap_and_starts_over_after_a_healthy_run() {
        let mut b = Backoff::default();
        let quick = Duration::from_secs(1);
        let pauses: Vec<Duration> = (0..7).map(|_| b.after(quick)).collect();
        let ms = Duration::from_millis;
        assert_eq!(
            pauses,
            [
                ms(500),
                ms(1000),
                ms(2000),
                ms(4000),
                ms(8000),
                PAUSE_MAX,
                PAUSE_MAX
            ]
        );
        assert_eq!(b.after(HEALTHY_RUN), PAUSE_START);
        assert_eq!(b.after(quick), ms(1000));
        b.reset();
        assert_eq!(b.after(quick), PAUSE_START);
    }
}
