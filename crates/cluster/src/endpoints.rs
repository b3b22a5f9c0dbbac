//! Every service's HTTP endpoints: `/healthz` (alive, and not stalled while its backends
//! answer), `/readyz` (the stage serves, NATS
//! is connected, and no hop it consumes has messages waiting while it consumed nothing for
//! `stall_after_s`) and `/metrics` (Prometheus text). GET only: nothing here changes state.
//!
//! `/metrics` answers from a snapshot a background task refreshes every
//! [`REFRESH`] over one Redis connection, each gathering under a deadline: a scrape never
//! waits on NATS or Redis, and a slow backend only makes the snapshot older
//! (`trawl_<stage>_metrics_age_seconds`). The series are a fixed set: queue lag and dead
//! letters per hop, the crawl's counters without the per-host budgets.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use trawl_core::counters::Counters;
use trawl_core::pipeline::Stage;
use trawl_core::settings::Settings;

use crate::jetstream::hop_stats;
use crate::redis_conn::Within;

/// How often the metrics snapshot is gathered.
pub const REFRESH: Duration = Duration::from_secs(5);
/// The longest one gathering may take.
pub const GATHER_TIMEOUT: Duration = Duration::from_secs(4);

/// The last gathered series of each backend and when they were gathered.
#[derive(Default)]
struct Snapshot {
    hops: String,
    counters: String,
    consumers: String,
    /// Why the stage is stalled, when it is: a hop it consumes has messages waiting and
    /// it consumed nothing for `stall_after_s`.
    stalled: Option<String>,
    /// Stalled while NATS and Redis both answer: the stage itself is stuck, and starting
    /// it again may help (a backend away would make every stage restart, for nothing).
    stuck: bool,
    at: Option<Instant>,
}

/// Serves `/healthz`, `/readyz` and `/metrics` until the process ends.
pub async fn serve_http(
    settings: Settings,
    stage: Stage,
    client: async_nats::Client,
    ready: Arc<AtomicBool>,
) -> Result<(), String> {
    use axum::routing::get;
    let addr = settings.process.metrics_addr.clone();
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("metrics address {addr}: {e}"))?;
    tracing::info!(addr = %addr, "serving /healthz, /readyz, /metrics");
    let snapshot = Arc::new(Mutex::new(Snapshot::default()));
    tokio::spawn(refresh(
        Arc::new(settings),
        stage,
        client.clone(),
        snapshot.clone(),
    ));
    let (r1, c1, s1, s2) = (ready.clone(), client, snapshot.clone(), snapshot.clone());
    let app = axum::Router::new()
        .route(
            "/healthz",
            // Alive unless stuck: a stage that consumes nothing while work waits and its
            // backends answer is restarted by Kubernetes's liveness probe, not only taken
            // out of service.
            get(move || {
                let s = s2.clone();
                async move {
                    let snap = s.lock().unwrap_or_else(|e| e.into_inner());
                    match (&snap.stalled, snap.stuck) {
                        (Some(why), true) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("stalled: {why}"),
                        ),
                        _ => (axum::http::StatusCode::OK, "ok".to_string()),
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let (r, c, s) = (r1.clone(), c1.clone(), s1.clone());
                async move {
                    let nats = c.connection_state() == async_nats::connection::State::Connected;
                    let stalled = s.lock().unwrap_or_else(|e| e.into_inner()).stalled.clone();
                    let unavailable = axum::http::StatusCode::SERVICE_UNAVAILABLE;
                    match stalled {
                        Some(why) => (unavailable, format!("not ready: {why}")),
                        None if r.load(Ordering::Relaxed) && nats => {
                            (axum::http::StatusCode::OK, "ready".to_string())
                        }
                        None => (unavailable, "not ready".to_string()),
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let (s, r) = (snapshot.clone(), ready.clone());
                async move { metrics_text(stage, &s, &r) }
            }),
        );
    axum::serve(listener, app).await.map_err(|e| e.to_string())
}

fn metrics_text(stage: Stage, snapshot: &Mutex<Snapshot>, ready: &AtomicBool) -> String {
    let snap = snapshot.lock().unwrap_or_else(|e| e.into_inner());
    let age = snap.at.map_or(-1.0, |t| t.elapsed().as_secs_f64());
    format!(
        "# TYPE trawl_{stage}_ready gauge\ntrawl_{stage}_ready {}\n\
         # TYPE trawl_{stage}_stalled gauge\ntrawl_{stage}_stalled {}\n\
         # TYPE trawl_{stage}_metrics_age_seconds gauge\ntrawl_{stage}_metrics_age_seconds {age:.1}\n{}{}{}",
        u8::from(ready.load(Ordering::Relaxed) && snap.stalled.is_none()),
        u8::from(snap.stalled.is_some()),
        snap.hops,
        snap.consumers,
        snap.counters
    )
}

/// Gathers the series every [`REFRESH`], each backend's under its own deadline: one that
/// does not answer keeps its last series, and never hides the other's.
async fn refresh(
    settings: Arc<Settings>,
    stage: Stage,
    client: async_nats::Client,
    snap: Arc<Mutex<Snapshot>>,
) {
    let mut redis: Option<ConnectionManager> = None;
    let started = Instant::now();
    loop {
        let hops = tokio::time::timeout(GATHER_TIMEOUT, hops_text(&settings, &client)).await;
        let consumers = tokio::time::timeout(
            GATHER_TIMEOUT,
            consumers_text(&settings, stage, &client, started.elapsed()),
        )
        .await;
        let counters =
            tokio::time::timeout(GATHER_TIMEOUT, counters_text(&settings, &mut redis)).await;
        {
            let mut s = snap.lock().unwrap_or_else(|e| e.into_inner());
            let fresh = hops.is_ok() || matches!(counters, Ok(Some(_)));
            if let Ok(t) = hops {
                s.hops = t;
            }
            // Unread (NATS away): the last reading stands; NATS's own state makes the
            // stage unready meanwhile. A stage waiting on a backend that is away is not
            // stalled: restarting it would not help, and every stage would restart at once.
            let redis_up = matches!(counters, Ok(Some(_)));
            if let Ok((t, stalled)) = consumers {
                s.stuck = stalled.is_some() && redis_up;
                if stalled.is_some() && s.stalled.is_none() {
                    tracing::error!(
                        stage = stage.name(),
                        "stalled, reporting not ready: {}",
                        stalled.as_deref().unwrap_or_default()
                    );
                }
                s.consumers = t;
                s.stalled = stalled;
            }
            match counters {
                Ok(Some(t)) => s.counters = t,
                // The connection may be wedged on a server that went away: a fresh one next.
                Ok(None) | Err(_) => redis = None,
            }
            if fresh {
                s.at = Some(Instant::now());
            }
        }
        tokio::time::sleep(REFRESH).await;
    }
}

/// Queue lag: messages waiting or unacked in each hop's stream, and its dead letters.
async fn hops_text(s: &Settings, client: &async_nats::Client) -> String {
    let stats = hop_stats(client, &s.cluster).await;
    let mut out = String::from("# TYPE trawl_queue_pending_messages gauge\n");
    for h in &stats {
        out.push_str(&format!(
            "trawl_queue_pending_messages{{hop=\"{}\"}} {}\n",
            h.hop, h.pending
        ));
    }
    for h in &stats {
        out.push_str(&format!(
            "trawl_queue_dead_letters{{hop=\"{}\"}} {}\n",
            h.hop, h.dead_letters
        ));
    }
    out
}

/// The consumers of the hops `stage` consumes, as the server sees them and as this process
/// last got something done on them; and why the stage is stalled, when it is.
async fn consumers_text(
    s: &Settings,
    stage: Stage,
    client: &async_nats::Client,
    up_for: Duration,
) -> (String, Option<String>) {
    let js = async_nats::jetstream::new(client.clone());
    let after = Duration::from_secs(s.cluster.stall_after_s.max(1));
    let mut out = String::new();
    let mut stalled = None;
    for hop in trawl_core::pipeline::Hop::ALL
        .into_iter()
        .filter(|h| h.consumer() == stage)
    {
        let Some(c) = crate::jetstream::consumer_stats_of(&js, &s.cluster, hop).await else {
            continue;
        };
        let stream = crate::jetstream::QueueConfig::from_settings(&s.cluster, hop).stream;
        let idle = crate::activity::idle_for(&stream);
        let labels = format!("hop=\"{hop}\",consumer=\"{}\"", c.consumer);
        out.push_str(&format!(
            "trawl_queue_consumer_waiting_messages{{{labels}}} {}\n\
             trawl_queue_consumer_unacked_messages{{{labels}}} {}\n\
             trawl_queue_consumer_redelivered_messages{{{labels}}} {}\n\
             trawl_{stage}_idle_seconds{{hop=\"{hop}\"}} {:.1}\n",
            c.waiting,
            c.unacked,
            c.redelivered,
            idle.unwrap_or(up_for).as_secs_f64(),
        ));
        if stalled.is_none() && crate::activity::stalled(c.waiting, idle, up_for, after) {
            stalled = Some(format!(
                "{} messages wait on {hop} and this replica consumed none for {}s",
                c.waiting,
                idle.unwrap_or(up_for).as_secs()
            ));
        }
    }
    (out, stalled)
}

/// The crawl's shared counters (pages by status, robots blocks, duplicates, errors by
/// kind), over one connection kept between gatherings. Per-host budgets are left out: one
/// series per host would grow without bound.
async fn counters_text(s: &Settings, redis: &mut Option<ConnectionManager>) -> Option<String> {
    if redis.is_none() {
        *redis = crate::redis_conn::connect(&s.cluster.redis_url).await.ok();
    }
    let counters: BTreeMap<String, i64> = redis::cmd("HGETALL")
        .arg(format!("trawl:{{{}}}:counters", s.process.crawl))
        .query_async(redis.as_mut()?)
        .within()
        .await
        .ok()?;
    let mut out = String::from("# TYPE trawl_crawl_events_total counter\n");
    for (k, v) in Counters::from_map(&counters).figures() {
        out.push_str(&format!("trawl_crawl_events_total{{event=\"{k}\"}} {v}\n"));
    }
    Some(out)
}
