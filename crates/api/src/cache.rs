//! `maxAge` and `storeInCache`: a scrape answered from an earlier scrape of the same URL
//! with the same options, when that one is younger than `maxAge` (Firecrawl's default, two
//! days, when the request gives none). Kept per key in `serve.db`. A scrape that tracks
//! changes, or whose script draws (its screenshots expire), always goes to the site.

use rusqlite::{OptionalExtension, params};
use serde_json::Value;
use sha2::Digest;

use super::api::PageOptions;
use super::db::Db;

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS scrape_cache (
    owner TEXT NOT NULL,
    url TEXT NOT NULL,
    options TEXT NOT NULL,
    doc TEXT NOT NULL,
    stored_at INTEGER NOT NULL,
    PRIMARY KEY (owner, url, options)
);
";

/// Firecrawl's `maxAge` when a request gives none: two days, in milliseconds.
pub const DEFAULT_MAX_AGE_MS: u64 = 2 * 24 * 3600 * 1000;

/// Entries older than this are swept (the longest `maxAge` worth keeping for).
const KEEP_MS: i64 = 30 * 24 * 3600 * 1000;

/// The options a cached answer must share: a digest of everything that shapes it.
pub fn options_key(opts: &PageOptions) -> String {
    let d = sha2::Sha256::digest(format!("{opts:?}").as_bytes());
    data_encoding::HEXLOWER.encode(&d[..16])
}

/// Whether a scrape with these options may be answered from, or kept in, the cache.
pub fn cacheable(opts: &PageOptions) -> bool {
    opts.formats.change_tracking.is_none() && !opts.script.as_ref().is_some_and(|s| s.draws())
}

#[derive(Clone)]
pub struct Cache {
    db: Db,
}

impl Cache {
    pub fn new(db: Db) -> anyhow::Result<Self> {
        db.with(|c| c.execute_batch(SCHEMA))?;
        Ok(Self { db })
    }

    /// The cached document, marked a hit with when it was scraped, when younger than
    /// `max_age_ms`.
    pub fn get(
        &self,
        owner: &str,
        url: &str,
        key: &str,
        max_age_ms: u64,
    ) -> anyhow::Result<Option<Value>> {
        let oldest = chrono::Utc::now().timestamp_millis() - max_age_ms.min(i64::MAX as u64) as i64;
        let found: Option<(String, i64)> = self.db.with(|c| {
            c.query_row(
                "SELECT doc, stored_at FROM scrape_cache
                 WHERE owner = ?1 AND url = ?2 AND options = ?3 AND stored_at >= ?4",
                params![owner, url, key, oldest],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })?;
        let Some((doc, at)) = found else {
            return Ok(None);
        };
        let Ok(mut doc) = serde_json::from_str::<Value>(&doc) else {
            return Ok(None);
        };
        if let Some(m) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("cacheState".into(), "hit".into());
            if let Some(t) = chrono::DateTime::from_timestamp_millis(at) {
                m.insert("cachedAt".into(), t.to_rfc3339().into());
            }
        }
        Ok(Some(doc))
    }

    pub fn put(&self, owner: &str, url: &str, key: &str, doc: &Value) -> anyhow::Result<()> {
        let now = chrono::Utc::now().timestamp_millis();
        let text = serde_json::to_string(doc)?;
        self.db.with(|c| {
            c.execute(
                "INSERT OR REPLACE INTO scrape_cache (owner, url, options, doc, stored_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![owner, url, key, text, now],
            )?;
            c.execute(
                "DELETE FROM scrape_cache WHERE stored_at < ?1",
                params![now - KEEP_MS],
            )
            .map(|_| ())
        })
    }
}

/// A scrape through the cache: answered from it when `max_age_ms` allows, kept in it
/// unless `store` is false.
pub async fn scrape(
    app: &std::sync::Arc<super::App>,
    ask: super::scraping::Ask<'_>,
    max_age_ms: Option<u64>,
    store: Option<bool>,
) -> Result<Value, super::api::ApiError> {
    use super::api::ApiError;
    let use_cache = cacheable(ask.opts);
    let max_age = max_age_ms.unwrap_or(DEFAULT_MAX_AGE_MS);
    let key = options_key(ask.opts);
    let (owner, url) = (ask.owner.to_string(), ask.url.to_string());
    if use_cache && max_age > 0 {
        let (cache, owner, url, key) = (app.cache.clone(), owner.clone(), url.clone(), key.clone());
        let hit = tokio::task::spawn_blocking(move || cache.get(&owner, &url, &key, max_age))
            .await
            .map_err(ApiError::internal)??;
        if let Some(doc) = hit {
            return Ok(doc);
        }
    }
    let doc = super::scraping::scrape(app, ask).await?;
    // A site's error is not kept: the next scrape asks again.
    let ok = doc["metadata"]["statusCode"]
        .as_u64()
        .is_some_and(|c| (200..300).contains(&c));
    if use_cache && ok && store != Some(false) {
        let (cache, d) = (app.cache.clone(), doc.clone());
        tokio::task::spawn_blocking(move || {
            if let Err(e) = cache.put(&owner, &url, &key, &d) {
                tracing::warn!(error = %format!("{e:#}"), "a scrape could not be cached");
            }
        });
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_hit_is_younger_than_max_age_and_keyed_by_options() {
        let dir = tempfile::tempdir().unwrap();
        let c = Cache::new(Db::open(&dir.path().join("serve.db")).unwrap()).unwrap();
        let doc = json!({"markdown": "# A", "metadata": {"cacheState": "miss"}});
        c.put("k", "http://h/a", "o1", &doc).unwrap();
        let hit = c.get("k", "http://h/a", "o1", 60_000).unwrap().unwrap();
        assert_eq!(hit["metadata"]["cacheState"], "hit");
        assert!(hit["metadata"]["cachedAt"].is_string());
        assert!(c.get("k", "http://h/a", "o2", 60_000).unwrap().is_none());
        assert!(
            c.get("other", "http://h/a", "o1", 60_000)
                .unwrap()
                .is_none()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(c.get("k", "http://h/a", "o1", 1).unwrap().is_none());
    }
}
