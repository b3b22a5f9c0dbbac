//! A service follows its crawl's spec: every [`POLL`] it marks the spec it runs under
//! `trawl:{crawl}:running:<stage>:<replica>` (a digest, expiring after [`MARK_TTL_S`]) and
//! reads the stored spec; a different one (`trawl submit --replace`, or `trawl serve
//! --cluster` starting its next job) stops the stage, which the service starts again under
//! it. Whoever stores a spec can so wait until every live replica runs it
//! ([`running`]) before it publishes the crawl's seeds.

use std::time::Duration;

use redis::aio::ConnectionManager;
use trawl_core::pipeline::{Shutdown, ShutdownTrigger};
use trawl_core::spec::CrawlSpec;

use crate::redis_conn::Within;

/// How often a service looks at the stored spec.
pub const POLL: Duration = Duration::from_secs(2);
/// A replica's mark outlives it this long.
pub const MARK_TTL_S: u64 = 10;

/// What a mark holds: the spec's JSON, hashed.
pub fn digest(spec: &CrawlSpec) -> String {
    let json = serde_json::to_string(spec).unwrap_or_default();
    format!("{:032x}", trawl_core::state::seen_digest(&json))
}

fn mark_key(crawl: &str, stage: &str, replica: &str) -> String {
    format!("trawl:{{{crawl}}}:running:{stage}:{replica}")
}

/// Marks `current` as running every [`POLL`] until `stop`, or until the stored spec
/// differs: then `trigger` stops the stage and the new spec is returned. A spec that
/// cannot be read (Redis away, a spec removed) changes nothing.
pub async fn watch(
    redis_url: String,
    stage: &'static str,
    replica: String,
    current: CrawlSpec,
    mut stop: Shutdown,
    trigger: ShutdownTrigger,
) -> Option<CrawlSpec> {
    let mine = digest(&current);
    let key = mark_key(&current.crawl, stage, &replica);
    let mut conn: Option<ConnectionManager> = None;
    loop {
        if conn.is_none() {
            conn = crate::redis_conn::connect(&redis_url).await.ok();
        }
        if let Some(c) = conn.as_mut() {
            let _ = redis::cmd("SET")
                .arg(&key)
                .arg(&mine)
                .arg("EX")
                .arg(MARK_TTL_S)
                .query_async::<()>(c)
                .within()
                .await;
            let stored: Result<Option<String>, _> = redis::cmd("GET")
                .arg(crate::spec::spec_key(&current.crawl))
                .query_async(c)
                .within()
                .await;
            if let Ok(Some(json)) = stored
                && let Ok(spec) = serde_json::from_str::<CrawlSpec>(&json)
                && spec != current
            {
                tracing::info!(crawl = %current.crawl, stage, "the crawl's spec was replaced: restarting the stage under it");
                let _ = redis::cmd("DEL")
                    .arg(&key)
                    .query_async::<()>(c)
                    .within()
                    .await;
                trigger.trigger();
                return Some(spec);
            }
        }
        if stop.run_until(tokio::time::sleep(POLL)).await.is_none() {
            trigger.trigger();
            return None;
        }
    }
}

/// The spec digest each live replica of `crawl` runs, by `stage:replica`.
pub async fn running(redis_url: &str, crawl: &str) -> Result<Vec<(String, String)>, String> {
    let mut conn = crate::redis_conn::connect(redis_url)
        .await
        .map_err(|e| e.to_string())?;
    let prefix = mark_key(crawl, "", "");
    let prefix = prefix.trim_end_matches(':');
    let mut cursor: u64 = 0;
    let mut keys: Vec<String> = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| e.to_string())?;
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        let v: Option<String> = redis::cmd("GET")
            .arg(&k)
            .query_async(&mut conn)
            .within()
            .await
            .map_err(|e| e.to_string())?;
        if let Some(v) = v {
            let name = k.strip_prefix(prefix).unwrap_or(&k).trim_start_matches(':');
            out.push((name.to_string(), v));
        }
    }
    Ok(out)
}
