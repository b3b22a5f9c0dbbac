//! What every service shares: configuration (a JSON file, then `TRAWL_*` environment
//! variables), JSON logs, the HTTP endpoints (`/healthz`, `/readyz`, `/metrics` in the
//! Prometheus text format), the hop queues, the crawl spec, and a SIGTERM that drains.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;

use crate::jetstream::{JetStreamQueue, QueueConfig};
use crate::redis_state::RedisState;
use crate::spec::CrawlSpec;

/// The hops between the stages, in pipeline order.
pub const HOPS: [(&str, &str); 4] = [
    ("discovered", "frontier"),
    ("fetch", "fetcher"),
    ("fetched", "extractor"),
    ("docs", "indexer"),
];

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    pub nats_url: String,
    pub nats_user: Option<String>,
    pub nats_password: Option<String>,
    pub nats_token: Option<String>,
    /// Credentials go in the URL: `redis://user:password@host:6379`.
    pub redis_url: String,
    pub metrics_addr: String,
    pub crawl: String,
    /// Subject and stream prefix of the hops.
    pub queue_prefix: String,
    /// Workers in this process (fetch requests in flight, extraction tasks).
    pub concurrency: usize,
    /// Where the indexer writes `pages-<id>.jsonl`.
    pub out_dir: String,
    /// Where the indexer writes the search index (LanceDB); unset: `pages-*.jsonl` only.
    pub index_uri: Option<String>,
    pub model_dir: Option<String>,
    /// Embed chunks (needs the model); `TRAWL_EMBED=false` builds a full-text index only.
    pub embed: bool,
    pub max_deliver: i64,
    pub ack_wait_s: u64,
    /// A host slot claimed and never released (its holder died) frees itself after this,
    /// and its job goes back in the queue. Longer than a fetch can take.
    pub claim_ttl_s: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            nats_url: "nats://127.0.0.1:4222".into(),
            nats_user: None,
            nats_password: None,
            nats_token: None,
            redis_url: "redis://127.0.0.1:6379".into(),
            metrics_addr: "0.0.0.0:9100".into(),
            crawl: "default".into(),
            queue_prefix: "trawl".into(),
            concurrency: 8,
            out_dir: "./trawl-out".into(),
            index_uri: None,
            model_dir: None,
            embed: true,
            max_deliver: 5,
            ack_wait_s: 120,
            claim_ttl_s: 600,
        }
    }
}

impl ServiceConfig {
    /// `TRAWL_CONFIG` (a JSON file) first, then each `TRAWL_*` variable over it.
    pub fn load() -> Result<Self, String> {
        let mut c = match std::env::var("TRAWL_CONFIG") {
            Ok(path) => {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?
            }
            Err(_) => ServiceConfig::default(),
        };
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let num = |k: &str, v: String| -> Result<u64, String> {
            v.parse().map_err(|_| format!("{k}={v:?} is not a number"))
        };
        if let Some(v) = var("TRAWL_NATS_URL") {
            c.nats_url = v;
        }
        if let Some(v) = var("TRAWL_NATS_USER") {
            c.nats_user = Some(v);
        }
        if let Some(v) = var("TRAWL_NATS_PASSWORD") {
            c.nats_password = Some(v);
        }
        if let Some(v) = var("TRAWL_NATS_TOKEN") {
            c.nats_token = Some(v);
        }
        if let Some(v) = var("TRAWL_REDIS_URL") {
            c.redis_url = v;
        }
        if let Some(v) = var("TRAWL_METRICS_ADDR") {
            c.metrics_addr = v;
        }
        if let Some(v) = var("TRAWL_CRAWL") {
            c.crawl = v;
        }
        if let Some(v) = var("TRAWL_QUEUE_PREFIX") {
            c.queue_prefix = v;
        }
        if let Some(v) = var("TRAWL_CONCURRENCY") {
            c.concurrency = num("TRAWL_CONCURRENCY", v)? as usize;
        }
        if let Some(v) = var("TRAWL_OUT") {
            c.out_dir = v;
        }
        if let Some(v) = var("TRAWL_INDEX_URI") {
            c.index_uri = Some(v);
        }
        if let Some(v) = var("TRAWL_MODEL_DIR") {
            c.model_dir = Some(v);
        }
        if let Some(v) = var("TRAWL_EMBED") {
            c.embed = match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => return Err(format!("TRAWL_EMBED={v:?} is not true or false")),
            };
        }
        if let Some(v) = var("TRAWL_MAX_DELIVER") {
            c.max_deliver = num("TRAWL_MAX_DELIVER", v)? as i64;
        }
        if let Some(v) = var("TRAWL_ACK_WAIT_S") {
            c.ack_wait_s = num("TRAWL_ACK_WAIT_S", v)?;
        }
        if let Some(v) = var("TRAWL_CLAIM_TTL_S") {
            c.claim_ttl_s = num("TRAWL_CLAIM_TTL_S", v)?;
        }
        if c.concurrency == 0 {
            return Err("TRAWL_CONCURRENCY must be at least 1".into());
        }
        Ok(c)
    }

    pub async fn nats(&self) -> Result<async_nats::Client, String> {
        let mut o = async_nats::ConnectOptions::new();
        if let (Some(u), Some(p)) = (&self.nats_user, &self.nats_password) {
            o = async_nats::ConnectOptions::with_user_and_password(u.clone(), p.clone());
        } else if let Some(t) = &self.nats_token {
            o = async_nats::ConnectOptions::with_token(t.clone());
        }
        o.connect(&self.nats_url)
            .await
            .map_err(|e| format!("NATS at {}: {e}", self.nats_url))
    }

    pub fn queue_config(&self, hop: &str, stage: &str) -> QueueConfig {
        let mut q = QueueConfig::for_hop(&self.queue_prefix, hop, stage);
        q.max_deliver = self.max_deliver;
        q.ack_wait = Duration::from_secs(self.ack_wait_s);
        q
    }

    /// The queue of one hop, consumed by `stage` (publishers pass the consuming stage too:
    /// the consumer is created once, by whoever comes first).
    pub async fn queue<M>(
        &self,
        client: &async_nats::Client,
        hop: &str,
    ) -> Result<Arc<JetStreamQueue<M>>, String> {
        let stage = HOPS
            .iter()
            .find(|(h, _)| *h == hop)
            .map_or(hop, |(_, s)| *s);
        JetStreamQueue::connect(client, self.queue_config(hop, stage))
            .await
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }
}

/// Waits for `trawl submit` to store the crawl's spec.
pub async fn wait_for_spec(
    cfg: &ServiceConfig,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<CrawlSpec>, String> {
    let mut warned = false;
    loop {
        if let Some(s) = crate::spec::get(&cfg.redis_url, &cfg.crawl).await? {
            return Ok(Some(s));
        }
        if !warned {
            tracing::info!(crawl = %cfg.crawl, "waiting for `trawl submit` to start this crawl");
            warned = true;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return Ok(None),
        }
    }
}

pub async fn state_for(cfg: &ServiceConfig, spec: &CrawlSpec) -> Result<Arc<RedisState>, String> {
    RedisState::connect(
        &cfg.redis_url,
        &spec.crawl,
        spec.max_queued,
        spec.per_host,
        cfg.claim_ttl_s.max(1) * 1000,
    )
    .await
    .map(Arc::new)
    .map_err(|e| e.to_string())
}

/// Whether the service is serving its stage (the spec is loaded and the workers run).
#[derive(Default)]
pub struct Health {
    pub ready: AtomicBool,
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

/// A stop signal set by SIGTERM or Ctrl-C.
pub fn stop_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::error!("cannot watch SIGTERM: {e}");
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
        let _ = tx.send(true);
    });
    rx
}

/// Serves `/healthz`, `/readyz` and `/metrics` until the process ends.
pub async fn serve_http(
    cfg: ServiceConfig,
    stage: &'static str,
    client: async_nats::Client,
    health: Arc<Health>,
) -> Result<(), String> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(&cfg.metrics_addr)
        .await
        .map_err(|e| format!("metrics address {}: {e}", cfg.metrics_addr))?;
    tracing::info!(addr = %cfg.metrics_addr, "serving /healthz, /readyz, /metrics");
    let h1 = health.clone();
    let c1 = client.clone();
    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let (h, c) = (h1.clone(), c1.clone());
                async move {
                    let nats = c.connection_state() == async_nats::connection::State::Connected;
                    if h.ready.load(Ordering::Relaxed) && nats {
                        (axum::http::StatusCode::OK, "ready")
                    } else {
                        (axum::http::StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let (cfg, h, c) = (cfg.clone(), health.clone(), client.clone());
                async move { metrics_text(&cfg, stage, &c, &h).await }
            }),
        );
    axum::serve(listener, app).await.map_err(|e| e.to_string())
}

async fn metrics_text(
    cfg: &ServiceConfig,
    stage: &str,
    client: &async_nats::Client,
    h: &Health,
) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# TYPE trawl_{stage}_ready gauge\ntrawl_{stage}_ready {}\n",
        u8::from(h.ready.load(Ordering::Relaxed))
    ));
    // Queue lag: messages waiting or unacked in each hop's stream.
    let js = async_nats::jetstream::new(client.clone());
    s.push_str("# TYPE trawl_queue_pending_messages gauge\n");
    for (hop, st) in HOPS {
        let q = cfg.queue_config(hop, st);
        if let Ok(mut stream) = js.get_stream(&q.stream).await
            && let Ok(info) = stream.info().await
        {
            s.push_str(&format!(
                "trawl_queue_pending_messages{{hop=\"{hop}\"}} {}\n",
                info.state.messages
            ));
        }
        if let Ok(mut stream) = js.get_stream(&q.dead_letter_stream).await
            && let Ok(info) = stream.info().await
        {
            s.push_str(&format!(
                "trawl_queue_dead_letters{{hop=\"{hop}\"}} {}\n",
                info.state.messages
            ));
        }
    }
    // The crawl's shared counters (pages by status, robots blocks, duplicates, errors by kind).
    if let Ok(counters) = crawl_counters(&cfg.redis_url, &cfg.crawl).await {
        s.push_str("# TYPE trawl_crawl_events_total counter\n");
        for (k, v) in counters {
            s.push_str(&format!("trawl_crawl_events_total{{event=\"{k}\"}} {v}\n"));
        }
    }
    s
}

pub async fn crawl_counters(redis_url: &str, crawl: &str) -> Result<BTreeMap<String, i64>, String> {
    let client = redis::Client::open(redis_url).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    redis::cmd("HGETALL")
        .arg(format!("trawl:{{{crawl}}}:counters"))
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())
}

/// Waits for a stage's workers. The first to fail (or panic) ends the stage: the others are
/// stopped rather than left to run short-handed, and the service starts the stage again.
pub async fn join_workers<E: std::fmt::Display + 'static>(
    workers: &mut tokio::task::JoinSet<Result<(), E>>,
) -> Result<(), String> {
    let mut result = Ok(());
    while let Some(r) = workers.join_next().await {
        match r {
            Ok(Err(e)) => {
                result = Err(e.to_string());
                workers.abort_all();
            }
            Err(e) if e.is_panic() => {
                result = Err(format!("worker panicked: {e}"));
                workers.abort_all();
            }
            _ => {}
        }
    }
    result
}

/// Runs a service: configuration, endpoints, the crawl spec, then `stage` until SIGTERM.
/// `stage` gets the stop signal and returns when its workers have drained. A stage that
/// fails (NATS or Redis went away: a restart, a failover) is started again after a pause
/// that grows to 10 s, so a backend outage stalls the crawl instead of ending the service.
pub async fn run<F, Fut>(name: &'static str, stage: F) -> std::process::ExitCode
where
    F: Fn(
        ServiceConfig,
        async_nats::Client,
        CrawlSpec,
        Arc<RedisState>,
        watch::Receiver<bool>,
        Arc<Health>,
    ) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    init_logs();
    let result = async {
        let cfg = ServiceConfig::load()?;
        let client = cfg.nats().await?;
        let health = Arc::new(Health::default());
        let http = tokio::spawn(serve_http(
            cfg.clone(),
            name,
            client.clone(),
            health.clone(),
        ));
        let mut stop = stop_on_signals();
        let Some(spec) = wait_for_spec(&cfg, &mut stop).await? else {
            return Ok(());
        };
        let mut state = state_for(&cfg, &spec).await?;
        tracing::info!(crawl = %spec.crawl, stage = name, "running");
        let mut pause = Duration::from_millis(500);
        loop {
            let r = stage(
                cfg.clone(),
                client.clone(),
                spec.clone(),
                state.clone(),
                stop.clone(),
                health.clone(),
            )
            .await;
            if *stop.borrow() {
                http.abort();
                return r;
            }
            health.ready.store(false, Ordering::Relaxed);
            match r {
                Ok(()) => tracing::warn!(
                    stage = name,
                    "stage ended without a stop; starting it again"
                ),
                Err(e) => tracing::error!(
                    stage = name,
                    "stage failed, starting it again in {pause:?}: {e}"
                ),
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.changed() => { http.abort(); return Ok(()); }
            }
            pause = (pause * 2).min(Duration::from_secs(10));
            // A fresh connection: the old one may be wedged on a server that went away.
            match state_for(&cfg, &spec).await {
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
