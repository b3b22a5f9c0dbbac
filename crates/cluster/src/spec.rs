//! The crawl spec in Redis (`trawl:{crawl}:spec`): `trawl submit` writes it, and every
//! service of the crawl reads it at start-up.

pub use trawl_core::spec::CrawlSpec;

use crate::redis_conn::Within;

pub fn spec_key(crawl: &str) -> String {
    format!("trawl:{{{crawl}}}:spec")
}

/// Stores `spec`; with `replace` false only when the crawl has none yet. Returns whether
/// it was stored.
pub async fn put(redis_url: &str, spec: &CrawlSpec, replace: bool) -> Result<bool, String> {
    let mut conn = crate::redis_conn::connect(redis_url)
        .await
        .map_err(|e| e.to_string())?;
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd("SET");
    cmd.arg(spec_key(&spec.crawl)).arg(json);
    if !replace {
        cmd.arg("NX");
    }
    let stored: Option<String> = cmd
        .query_async(&mut conn)
        .within()
        .await
        .map_err(|e| e.to_string())?;
    Ok(stored.is_some())
}

/// The crawl's spec, once `trawl submit` has written it.
pub async fn get(redis_url: &str, crawl: &str) -> Result<Option<CrawlSpec>, String> {
    let mut conn = crate::redis_conn::connect(redis_url)
        .await
        .map_err(|e| e.to_string())?;
    let v: Option<String> = redis::cmd("GET")
        .arg(spec_key(crawl))
        .query_async(&mut conn)
        .within()
        .await
        .map_err(|e| e.to_string())?;
    v.map(|s| {
        serde_json::from_str(&s).map_err(|e| {
            format!(
                "crawl spec of {crawl}: {e} (stored by another version of `trawl submit`? \
                 submit the crawl again with --replace, or under a new --crawl id)"
            )
        })
    })
    .transpose()
}

fn submitter_key(crawl: &str) -> String {
    format!("trawl:{{{crawl}}}:submitter")
}

/// Names who stored the crawl's current spec (`trawl serve --cluster`: the job's id), so
/// that a restarted submitter knows its job is the one running. Cleared with the crawl.
pub async fn set_submitter(redis_url: &str, crawl: &str, who: &str) -> Result<(), String> {
    let mut conn = crate::redis_conn::connect(redis_url)
        .await
        .map_err(|e| e.to_string())?;
    redis::cmd("SET")
        .arg(submitter_key(crawl))
        .arg(who)
        .query_async::<()>(&mut conn)
        .within()
        .await
        .map_err(|e| e.to_string())
}

pub async fn submitter(redis_url: &str, crawl: &str) -> Result<Option<String>, String> {
    let mut conn = crate::redis_conn::connect(redis_url)
        .await
        .map_err(|e| e.to_string())?;
    redis::cmd("GET")
        .arg(submitter_key(crawl))
        .query_async(&mut conn)
        .within()
        .await
        .map_err(|e| e.to_string())
}
