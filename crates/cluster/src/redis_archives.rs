//! A distributed ingest's archive ledger in Redis: one hash per crawl, `source -> progress
//! as JSON`, under the crawl's hash tag (a clear of the crawl removes it).

use crate::redis_conn::Conn;
use async_trait::async_trait;
use redis::AsyncCommands;
use trawl_core::archives::{ArchiveLedger, ArchiveProgress};
use trawl_core::{CoreError, CoreResult};

fn err(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("redis {what}: {e}"))
}

pub struct RedisLedger {
    conn: Conn,
    key: String,
}

impl RedisLedger {
    pub async fn connect(url: &str, crawl: &str) -> CoreResult<Self> {
        let conn = crate::redis_conn::connect_patient(url)
            .await
            .map_err(|e| err("connect", e))?;
        Ok(RedisLedger {
            conn,
            key: format!("trawl:{{{crawl}}}:archives"),
        })
    }
}

/// An entry that does not read (written by another version) is left out, not an error: an
/// ingester reads its archive from the start instead of failing on it forever.
fn decode(json: &str) -> Option<ArchiveProgress> {
    serde_json::from_str(json)
        .inspect_err(|e| tracing::warn!("an archive ledger entry does not read: {e}"))
        .ok()
}

#[async_trait]
impl ArchiveLedger for RedisLedger {
    async fn put(&self, p: &ArchiveProgress) -> CoreResult<()> {
        let json = serde_json::to_string(p).map_err(|e| err("encode", e))?;
        let mut c = self.conn.clone();
        c.hset::<_, _, _, ()>(&self.key, &p.source, json)
            .await
            .map_err(|e| err("HSET", e))
    }

    async fn add(&self, p: &ArchiveProgress) -> CoreResult<bool> {
        let json = serde_json::to_string(p).map_err(|e| err("encode", e))?;
        let mut c = self.conn.clone();
        c.hset_nx(&self.key, &p.source, json)
            .await
            .map_err(|e| err("HSETNX", e))
    }

    async fn get(&self, source: &str) -> CoreResult<Option<ArchiveProgress>> {
        let mut c = self.conn.clone();
        let json: Option<String> = c
            .hget(&self.key, source)
            .await
            .map_err(|e| err("HGET", e))?;
        Ok(json.as_deref().and_then(decode))
    }

    async fn all(&self) -> CoreResult<Vec<ArchiveProgress>> {
        let mut c = self.conn.clone();
        let mut out = Vec::new();
        let mut cursor: u64 = 0;
        // HSCAN, not HGETALL: a Common Crawl list has tens of thousands of archives.
        loop {
            let (next, kv): (u64, Vec<String>) = redis::cmd("HSCAN")
                .arg(&self.key)
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut c)
                .await
                .map_err(|e| err("HSCAN", e))?;
            for pair in kv.chunks(2) {
                if let [_, json] = pair {
                    out.extend(decode(json));
                }
            }
            cursor = next;
            if cursor == 0 {
                return Ok(out);
            }
        }
    }
}
