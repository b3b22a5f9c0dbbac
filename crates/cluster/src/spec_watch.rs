//! A service follows its crawl's spec: every [`POLL`] it reads the stored spec and marks
//! the one it runs under `trawl-running:{crawl}:<stage>:<replica>` (a digest of the stored
//! JSON, expiring after [`MARK_TTL_S`]; outside the crawl's own keys, so clearing a crawl
//! leaves the marks). A different stored spec (`trawl submit --replace`, or `trawl serve
//! --cluster` starting its next job) stops the stage, which the service starts again under
//! it. Whoever stores a spec waits with [`wait_taken`] until no live replica marks another
//! before it publishes the crawl's seeds.

use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use trawl_core::pipeline::{Shutdown, ShutdownTrigger, Stage};
use trawl_core::spec::CrawlSpec;

use crate::redis_conn::Within;

/// How often a service looks at the stored spec.
pub const POLL: Duration = Duration::from_secs(2);
/// A replica's mark outlives its last refresh this long (longer than one poll that waits
/// on a slow Redis: a connection and two calls under their deadlines).
pub const MARK_TTL_S: u64 = 30;

/// What a mark holds: the stored JSON of the spec, hashed (not a re-encoding, which a
/// service of another version would write differently).
pub fn digest_json(json: &str) -> String {
    format!("{:032x}", trawl_core::state::seen_digest(json))
}

/// The digest of the JSON [`crate::spec::put`] stores for `spec`.
pub fn digest(spec: &CrawlSpec) -> String {
    digest_json(&serde_json::to_string(spec).unwrap_or_default())
}

fn marks_prefix(crawl: &str) -> String {
    format!("trawl-running:{{{crawl}}}:")
}

/// One key per stage a live replica of it refreshes with its mark: whether any runs is
/// one EXISTS (no scan of the keyspace).
fn stage_key(crawl: &str, stage: Stage) -> String {
    format!("trawl-stage:{{{crawl}}}:{stage}")
}

/// Marks the spec `current` (stored as `current_json`) as running every [`POLL`] until
/// `stop` (the stage is stopped at once), or until the stored spec differs: then `trigger`
/// stops the stage and the new spec (and its JSON) is returned. A spec that cannot be read
/// (Redis away, a spec removed, one this version cannot parse) changes nothing.
pub async fn watch(
    redis_url: String,
    stage: Stage,
    replica: String,
    current: CrawlSpec,
    current_json: String,
    mut stop: Shutdown,
    trigger: ShutdownTrigger,
) -> Option<(CrawlSpec, String)> {
    let key = format!("{}{stage}:{replica}", marks_prefix(&current.crawl));
    let live = stage_key(&current.crawl, stage);
    let mine = digest_json(&current_json);
    let mut conn: Option<ConnectionManager> = None;
    loop {
        // Redis may hang for its deadlines: the process's stop must not wait for it.
        let step = stop
            .run_until(poll_once(
                &redis_url,
                &mut conn,
                (&key, &live),
                &mine,
                &current,
            ))
            .await;
        match step {
            None => {
                trigger.trigger();
                return None;
            }
            Some(Some(new)) => {
                tracing::info!(crawl = %current.crawl, stage = stage.name(), "the crawl's spec was replaced: restarting the stage under it");
                trigger.trigger();
                return Some(new);
            }
            Some(None) => {}
        }
        if stop.run_until(tokio::time::sleep(POLL)).await.is_none() {
            trigger.trigger();
            return None;
        }
    }
}

async fn poll_once(
    redis_url: &str,
    conn: &mut Option<ConnectionManager>,
    (key, live): (&str, &str),
    mine: &str,
    current: &CrawlSpec,
) -> Option<(CrawlSpec, String)> {
    if conn.is_none() {
        *conn = crate::redis_conn::connect(redis_url).await.ok();
    }
    let c = conn.as_mut()?;
    for k in [key, live] {
        set_mark(c, k, mine).await;
    }
    let stored: Option<String> = redis::cmd("GET")
        .arg(crate::spec::spec_key(&current.crawl))
        .query_async(c)
        .within()
        .await
        .ok()
        .flatten();
    let json = stored?;
    match serde_json::from_str::<CrawlSpec>(&json) {
        Ok(spec) if spec != *current => Some((spec, json)),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(crawl = %current.crawl, "the stored spec cannot be read by this version ({e}): running the last one");
            None
        }
    }
}

/// The spec digest each live replica of `crawl` marks, by `stage:replica`.
async fn marks(conn: &mut ConnectionManager, crawl: &str) -> Result<Vec<(String, String)>, String> {
    let prefix = marks_prefix(crawl);
    let keys = crate::redis_conn::keys_matching(conn, &format!("{prefix}*"))
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for k in keys {
        let v: Option<String> = redis::cmd("GET")
            .arg(&k)
            .query_async(conn)
            .within()
            .await
            .map_err(|e| e.to_string())?;
        if let Some(v) = v {
            out.push((k.strip_prefix(&prefix).unwrap_or(&k).to_string(), v));
        }
    }
    Ok(out)
}

/// Marks a replica of `stage` as there for `crawl` before it runs under a spec (it waits
/// for one): [`stage_live`] is true from its start, not from its first [`POLL`] under the
/// spec. Best effort: Redis away leaves the mark to the next call.
pub async fn mark_stage(
    redis_url: &str,
    conn: &mut Option<ConnectionManager>,
    crawl: &str,
    stage: Stage,
) {
    if conn.is_none() {
        *conn = crate::redis_conn::connect(redis_url).await.ok();
    }
    if let Some(c) = conn.as_mut() {
        set_mark(c, &stage_key(crawl, stage), "waiting").await;
    }
}

/// One mark, expiring after [`MARK_TTL_S`]; a failure is left to the next refresh.
async fn set_mark(c: &mut ConnectionManager, key: &str, value: &str) {
    let _ = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("EX")
        .arg(MARK_TTL_S)
        .query_async::<()>(c)
        .within()
        .await;
}

/// Whether a live replica of `stage` works on `crawl` (one marked its spec in the last
/// 30 s).
pub async fn stage_live(
    conn: &mut ConnectionManager,
    crawl: &str,
    stage: Stage,
) -> Result<bool, String> {
    redis::cmd("EXISTS")
        .arg(stage_key(crawl, stage))
        .query_async::<i64>(conn)
        .within()
        .await
        .map(|n| n > 0)
        .map_err(|e| e.to_string())
}

/// Waits until no live replica of `crawl` marks a spec other than `spec` (a replica that
/// starts later reads the stored spec itself); an error names the replicas still on
/// another one after `timeout`.
pub async fn wait_taken(
    redis_url: &str,
    crawl: &str,
    spec: &CrawlSpec,
    timeout: Duration,
) -> Result<(), String> {
    let want = digest(spec);
    let started = Instant::now();
    let mut conn = crate::redis_conn::connect(redis_url)
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let live = marks(&mut conn, crawl).await?;
        let behind: Vec<&str> = live
            .iter()
            .filter(|(_, d)| *d != want)
            .map(|(n, _)| n.as_str())
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "these replicas of crawl {crawl} still run another spec after {} s: {}",
                timeout.as_secs(),
                behind.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
