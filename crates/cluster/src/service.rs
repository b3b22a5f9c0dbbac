//! What every service shares: settings ([`Settings::load`]: defaults, `TRAWL_CONFIG`, then
//! `TRAWL_*`), JSON logs, the HTTP endpoints (`/healthz`, `/readyz`, `/metrics` in the
//! Prometheus text format), the hops over JetStream, the crawl spec, the state in Redis, and
//! a SIGTERM that drains. A service binary is one call of [`run`] with its stage's `serve`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use trawl_core::pipeline::{Backlog, HOPS, Hops, Shutdown, StageContext, StageResult};
use trawl_core::queue::Unconnected;
use trawl_core::settings::{ClusterSettings, PageGate, Settings, redact_url};
use trawl_core::spec::CrawlSpec;
use trawl_dedup::Gate;

use crate::jetstream::{JetStreamQueue, QueueConfig};
use crate::redis_history::RedisHistory;
use crate::redis_state::RedisState;

/// Connects to NATS with the settings' credentials; errors never show a password.
pub async fn nats(c: &ClusterSettings) -> Result<async_nats::Client, String> {
    let mut o = async_nats::ConnectOptions::new();
    if let (Some(u), Some(p)) = (&c.nats_user, &c.nats_password) {
        o = async_nats::ConnectOptions::with_user_and_password(u.clone(), p.clone());
    } else if let Some(t) = &c.nats_token {
        o = async_nats::ConnectOptions::with_token(t.clone());
    }
    o.connect(&c.nats_url)
        .await
        .map_err(|e| format!("NATS at {}: {e}", redact_url(&c.nats_url)))
}

/// The queue of one hop, consumed by its stage (publishers name the hop too: the consumer
/// is created once, by whoever comes first).
pub async fn queue<M>(
    client: &async_nats::Client,
    c: &ClusterSettings,
    hop: &str,
) -> Result<Arc<JetStreamQueue<M>>, String> {
    let stage = HOPS
        .iter()
        .find(|(h, _)| *h == hop)
        .map_or(hop, |(_, s)| *s);
    JetStreamQueue::connect(client, QueueConfig::from_settings(c, hop, stage))
        .await
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// The hops `stage` uses over JetStream; the others are [`Unconnected`], so a process
/// creates (and watches the dead letters of) only the streams it works with.
pub async fn hops(
    client: &async_nats::Client,
    c: &ClusterSettings,
    stage: &str,
) -> Result<Hops, String> {
    let used = trawl_core::pipeline::hops_of(stage);
    macro_rules! hop {
        ($name:literal) => {
            if used.contains(&$name) {
                queue(client, c, $name).await? as _
            } else {
                Arc::new(Unconnected($name)) as _
            }
        };
    }
    Ok(Hops {
        discovered: hop!("discovered"),
        fetch: hop!("fetch"),
        fetched: hop!("fetched"),
        docs: hop!("docs"),
        render: hop!("render"),
        changed: hop!("changed"),
        refine: hop!("refine"),
    })
}

/// Waits for `trawl submit` to store the crawl's spec; `None` on a stop. Meanwhile the
/// replica counts as one of `stage` for the crawl (`spec_watch::mark_stage`): a deployed
/// renderer waiting for the spec must be known to the extractors before the seeds are
/// fetched, or the first pages that need a browser are kept unrendered.
pub async fn wait_for_spec(
    c: &ClusterSettings,
    crawl: &str,
    stage: &str,
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

pub async fn state_for(c: &ClusterSettings, spec: &CrawlSpec) -> Result<Arc<RedisState>, String> {
    let nodes = state_nodes_for(c, spec)?;
    RedisState::connect_sharded(
        &nodes,
        &spec.crawl,
        spec.settings.max_queued,
        spec.settings.concurrency_per_host,
        c.claim_ttl_s.max(1) * 1000,
    )
    .await
    .map(Arc::new)
    .map_err(|e| e.to_string())
}

/// The Redis servers of the crawl's per-host state, when this process names as many as
/// the crawl was submitted with.
pub fn state_nodes_for(c: &ClusterSettings, spec: &CrawlSpec) -> Result<Vec<String>, String> {
    let nodes = c.state_nodes();
    if nodes.len() != spec.state_shards.max(1) as usize {
        // Another count of servers would look for each host on another shard: hosts
        // fetched twice at once, URLs admitted twice.
        return Err(format!(
            "crawl {} keeps its per-host state on {} Redis server(s) (`trawl submit` was \
             given {} --redis-state-url); this service names {}: give every service and \
             `trawl submit` the same TRAWL_REDIS_STATE_URLS",
            spec.crawl,
            spec.state_shards,
            spec.state_shards.saturating_sub(1),
            nodes.len()
        ));
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
        stage: &'static str,
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
                            tracing::info!(stage, live, "replicas of the stage running");
                        }
                        live
                    }
                    // A Redis blip keeps the last answer (for its lifetime, not per page).
                    Err(e) => {
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
    pub async fn queue<M>(&self, hop: &str) -> Result<Arc<JetStreamQueue<M>>, String> {
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

/// Runs a service: settings, endpoints, the crawl spec, then `stage` until SIGTERM. `stage`
/// gets the context (hops, state, stop) and returns when its workers have drained. A stage
/// that fails (NATS or Redis went away: a restart, a failover) is started again after a
/// pause that grows to 10 s, with fresh connections, so a backend outage stalls the crawl
/// instead of ending the service.
pub async fn run<F, Fut>(name: &'static str, stage: F) -> std::process::ExitCode
where
    F: Fn(StageContext, Arc<Backends>) -> Fut,
    Fut: std::future::Future<Output = StageResult>,
{
    init_logs();
    let result = async {
        let settings = Settings::load(None).map_err(|e| e.to_string())?;
        let client = nats(&settings.cluster).await?;
        let ready = Arc::new(AtomicBool::new(false));
        let http = tokio::spawn(crate::endpoints::serve_http(
            settings.clone(),
            name,
            client.clone(),
            ready.clone(),
        ));
        let mut stop = stop_on_signals();
        let c = &settings.cluster;
        let Some(spec) = wait_for_spec(c, &settings.process.crawl, name, &mut stop).await? else {
            return Ok(());
        };
        let max_message_bytes = Some(client.server_info().max_payload);
        let backends = Arc::new(Backends {
            settings: settings.clone(),
            client: client.clone(),
        });
        let mut spec = spec;
        let mut spec_json = serde_json::to_string(&spec).unwrap_or_default();
        let mut state = state_for(c, &spec).await?;
        tracing::info!(crawl = %spec.crawl, stage = name, "running");
        let mut pause = Duration::from_millis(500);
        let replica = format!(
            "{}-{}",
            settings.process.instance_name(name),
            std::process::id()
        );
        loop {
            // The stage stops on the process's stop, or when the crawl's spec is replaced.
            let (stage_trigger, stage_stop) = trawl_core::pipeline::shutdown();
            let stage_stopped = stage_stop.clone();
            let watcher = tokio::spawn(crate::spec_watch::watch(
                c.redis_url.clone(),
                name,
                replica.clone(),
                spec.clone(),
                spec_json.clone(),
                stop.clone(),
                stage_trigger,
            ));
            let r = match hops(&client, c, name).await {
                Ok(hops) => {
                    let ctx = StageContext {
                        spec: spec.clone(),
                        process: settings.process.clone(),
                        hops,
                        state: state.clone(),
                        shutdown: stage_stop,
                        ready: ready.clone(),
                        max_message_bytes,
                    };
                    stage(ctx, backends.clone())
                        .await
                        .map_err(|e| e.to_string())
                }
                Err(e) => Err(e),
            };
            if stop.is_shutdown() {
                watcher.abort();
                http.abort();
                return r;
            }
            ready.store(false, Ordering::Relaxed);
            // Stopped by the watcher: it has returned, or is about to.
            let replaced = if stage_stopped.is_shutdown() {
                watcher.await.ok().flatten()
            } else {
                watcher.abort();
                None
            };
            if let Some((new, json)) = replaced {
                spec = new;
                spec_json = json;
                // Another count of servers is no blip to wait out: running on the old
                // state under the new spec would look for hosts on the wrong shards.
                if let Err(e) = state_nodes_for(c, &spec) {
                    http.abort();
                    return Err(e);
                }
                match state_for(c, &spec).await {
                    Ok(s) => state = s,
                    Err(e) => tracing::warn!(stage = name, "Redis not back yet: {e}"),
                }
                if stop.is_shutdown() {
                    http.abort();
                    return Ok(());
                }
                pause = Duration::from_millis(500);
                tracing::info!(crawl = %spec.crawl, stage = name, "running under the new spec");
                continue;
            }
            log_restart(name, r, pause);
            if stop.run_until(tokio::time::sleep(pause)).await.is_none() {
                http.abort();
                return Ok(());
            }
            pause = (pause * 2).min(Duration::from_secs(10));
            // A fresh connection: the old one may be wedged on a server that went away.
            match state_for(c, &spec).await {
                Ok(s) => state = s,
                Err(e) => tracing::warn!(stage = name, "Redis not back yet: {e}"),
            }
        }
    }
    .await;
    match result {
        Ok(()) => {
            tracing::info!(stage = name, "stopped cleanly");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(stage = name, "{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn log_restart(stage: &str, r: Result<(), String>, pause: Duration) {
    match r {
        Ok(()) => tracing::warn!(stage, "stage ended without a stop; starting it again"),
        Err(e) => tracing::error!(stage, "stage failed, starting it again in {pause:?}: {e}"),
    }
}
