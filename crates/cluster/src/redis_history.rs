//! What a cluster crawl keeps for a later re-crawl, in Redis next to its state, and the
//! [`History`] a re-crawl (`trawl submit --since CRAWL`) reads back from it.
//!
//! Layout under `trawl:{crawl}:` (the crawl's hash tag, like its state):
//! - `facts` (URL -> JSON [`Prior`]): status, validators verbatim, payload digest, text hash,
//!   SimHash, fetch time, last change, revisit interval, next due time, failures, the WARC
//!   record of the last full response, depth and kind: what the fetcher asks before its
//!   conditional request, small enough to read on every fetch;
//! - `records` (URL -> deflated JSON [`PageRecord`]): the written record, which the indexer
//!   carries forward for an unchanged page and diffs for a changed one;
//! - `unlinked` (set of URLs): URLs this crawl admitted only by its end-of-crawl check of the
//!   earlier crawl's URLs;
//! - `recheck`: set once that check has run to its end, so restarts do not run it again.

use std::io::{Read, Write};

use crate::redis_conn::Conn;
use async_trait::async_trait;
use trawl_core::history::{History, KnownPage, PageArchive, Prior, Unlinked};
use trawl_core::{CoreError, CoreResult, PageRecord};

fn backend(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("redis {what}: {e}"))
}

fn prefix(crawl: &str) -> String {
    format!("trawl:{{{crawl}}}:")
}

/// A record as it is kept: JSON, deflated (a page's Markdown and text shrink to a third).
fn pack(page: &PageRecord) -> CoreResult<Vec<u8>> {
    let json = serde_json::to_vec(page).map_err(|e| backend("encoding a record", e))?;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&json)
        .and_then(|_| z.finish())
        .map_err(|e| backend("deflating a record", e))
}

/// The record back; a value that does not decode is an error naming the URL, never a panic.
fn unpack(url: &str, bytes: &[u8]) -> CoreResult<PageRecord> {
    let mut json = Vec::new();
    flate2::read::DeflateDecoder::new(bytes)
        .take(256 << 20)
        .read_to_end(&mut json)
        .map_err(|e| backend(&format!("inflating the record of {url}"), e))?;
    serde_json::from_slice(&json).map_err(|e| backend(&format!("the record of {url}"), e))
}

fn unprior(url: &str, json: &str) -> CoreResult<Prior> {
    serde_json::from_str(json).map_err(|e| backend(&format!("the facts of {url}"), e))
}

/// One crawl's keys for re-crawls: written by its indexers ([`PageArchive`]), read by a
/// later crawl's fetchers and indexers ([`History`]), and its own unlinked set.
#[derive(Clone)]
pub struct RedisHistory {
    conn: Conn,
    prefix: String,
    /// The crawl whose keys these are.
    pub crawl: String,
}

impl RedisHistory {
    pub async fn connect(url: &str, crawl: &str) -> CoreResult<RedisHistory> {
        let conn = crate::redis_conn::connect_patient(url)
            .await
            .map_err(|e| backend("connect", e))?;
        Ok(RedisHistory {
            conn,
            prefix: prefix(crawl),
            crawl: crawl.to_string(),
        })
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// URLs with facts kept (written pages).
    pub async fn len(&self) -> CoreResult<usize> {
        let mut conn = self.conn.clone();
        redis::cmd("HLEN")
            .arg(self.key("facts"))
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("HLEN facts", e))
    }

    /// One step through the kept records (`HSCAN`: start at cursor 0, done when the cursor
    /// comes back 0; a record may come twice).
    pub async fn scan_records(&self, cursor: u64) -> CoreResult<(u64, Vec<PageRecord>)> {
        let mut conn = self.conn.clone();
        let (next, fields): (u64, Vec<(String, Vec<u8>)>) = redis::cmd("HSCAN")
            .arg(self.key("records"))
            .arg(cursor)
            .arg("COUNT")
            .arg(200)
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("HSCAN records", e))?;
        let records = fields
            .iter()
            .map(|(url, bytes)| unpack(url, bytes))
            .collect::<CoreResult<Vec<_>>>()?;
        Ok((next, records))
    }

    pub async fn is_empty(&self) -> CoreResult<bool> {
        Ok(self.len().await? == 0)
    }

    /// Bytes Redis uses for the kept facts and records (`MEMORY USAGE`, every field
    /// sampled).
    pub async fn memory_bytes(&self) -> CoreResult<u64> {
        let mut conn = self.conn.clone();
        let mut total = 0u64;
        for name in ["facts", "records"] {
            let n: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(self.key(name))
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut conn)
                .await
                .map_err(|e| backend("MEMORY USAGE", e))?;
            total += n.unwrap_or(0);
        }
        Ok(total)
    }
}

#[async_trait]
impl PageArchive for RedisHistory {
    async fn keep(&self, pages: &[&PageRecord]) -> CoreResult<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for p in pages {
            let facts =
                serde_json::to_string(&Prior::of(p)).map_err(|e| backend("encoding facts", e))?;
            pipe.cmd("HSET")
                .arg(self.key("facts"))
                .arg(&p.url)
                .arg(facts)
                .ignore();
            pipe.cmd("HSET")
                .arg(self.key("records"))
                .arg(&p.url)
                .arg(pack(p)?)
                .ignore();
        }
        let mut conn = self.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(|e| backend("keeping pages", e))
    }
}

#[async_trait]
impl History for RedisHistory {
    async fn prior(&self, url: &str) -> CoreResult<Option<Prior>> {
        let mut conn = self.conn.clone();
        let v: Option<String> = redis::cmd("HGET")
            .arg(self.key("facts"))
            .arg(url)
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("HGET facts", e))?;
        v.map(|json| unprior(url, &json)).transpose()
    }

    async fn previous(&self, url: &str) -> CoreResult<Option<PageRecord>> {
        let mut conn = self.conn.clone();
        let v: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(self.key("records"))
            .arg(url)
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("HGET records", e))?;
        v.map(|bytes| unpack(url, &bytes)).transpose()
    }

    async fn known(&self, cursor: Option<String>) -> CoreResult<KnownPage> {
        let mut conn = self.conn.clone();
        let cursor: u64 = match cursor.as_deref() {
            None => 0,
            Some(c) => c
                .parse()
                .map_err(|_| CoreError::Backend(format!("HSCAN facts: bad cursor {c:?}")))?,
        };
        // HSCAN may return a field twice across pages: the seen-set admits it once.
        let (next, fields): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(self.key("facts"))
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("HSCAN facts", e))?;
        let mut urls = Vec::with_capacity(fields.len());
        for (url, json) in fields {
            let p = unprior(&url, &json)?;
            if p.was_ok() {
                urls.push((url, p.depth, p.kind));
            }
        }
        Ok(KnownPage {
            urls,
            next: (next != 0).then(|| next.to_string()),
        })
    }
}

#[async_trait]
impl Unlinked for RedisHistory {
    async fn add(&self, urls: &[String]) -> CoreResult<()> {
        let mut conn = self.conn.clone();
        for chunk in urls.chunks(1000) {
            redis::cmd("SADD")
                .arg(self.key("unlinked"))
                .arg(chunk)
                .query_async::<()>(&mut conn)
                .await
                .map_err(|e| backend("SADD unlinked", e))?;
        }
        Ok(())
    }

    async fn checked(&self) -> CoreResult<bool> {
        let mut conn = self.conn.clone();
        redis::cmd("EXISTS")
            .arg(self.key("recheck"))
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("EXISTS recheck", e))
    }

    async fn mark_checked(&self) -> CoreResult<()> {
        let mut conn = self.conn.clone();
        redis::cmd("SET")
            .arg(self.key("recheck"))
            .arg(1)
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| backend("SET recheck", e))
    }

    async fn contains(&self, url: &str) -> CoreResult<bool> {
        let mut conn = self.conn.clone();
        redis::cmd("SISMEMBER")
            .arg(self.key("unlinked"))
            .arg(url)
            .query_async(&mut conn)
            .await
            .map_err(|e| backend("SISMEMBER unlinked", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_an_error() {
        let page = PageRecord {
            url: "http://a.test/x".into(),
            markdown: Some("# T\n\nbody ".repeat(100)),
            ..PageRecord::default()
        };
        let packed = pack(&page).unwrap();
        assert!(packed.len() < serde_json::to_vec(&page).unwrap().len() / 3);
        assert_eq!(unpack(&page.url, &packed).unwrap(), page);
        let err = unpack(&page.url, b"not deflate at all").unwrap_err();
        assert!(err.to_string().contains("http://a.test/x"), "{err}");
        assert!(unprior("u", "{").is_err());
    }
}
