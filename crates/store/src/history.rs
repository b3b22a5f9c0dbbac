//! An earlier crawl's directory as the [`History`] of a re-crawl: its store's facts per
//! URL (read once, into memory) and its `pages.jsonl` records, read by offset when a page
//! is carried forward or compared.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use trawl_core::history::{History, Prior};
use trawl_core::{CoreError, CoreResult, PageRecord, ResponseFacts, UrlKind, WarcRef};

use crate::journal::kind_of;
use crate::schema::{self, UrlState, keys};
use crate::{DB_FILE, StoreError, StoreResult};

pub struct StoreHistory {
    urls: HashMap<String, (Prior, Option<u64>)>,
    pages: PathBuf,
    /// The earlier crawl's id.
    pub crawl: String,
    /// Where its index is: a re-crawl updates it in place.
    pub index: PathBuf,
}

impl StoreHistory {
    /// Reads the crawl in `dir`; it must be finished (a crawl still running is not a
    /// baseline: its pages would count as removed).
    pub fn open(dir: &Path) -> StoreResult<StoreHistory> {
        let db = dir.join(DB_FILE);
        if !db.exists() {
            return Err(StoreError::Invalid(format!(
                "{} holds no crawl (no {DB_FILE})",
                dir.display()
            )));
        }
        let conn = schema::open(&db)?;
        if schema::get(&conn, keys::STATUS)?.as_deref() != Some(schema::FINISHED) {
            return Err(StoreError::Invalid(format!(
                "the crawl in {} is not finished: resume it first (--resume)",
                dir.display()
            )));
        }
        let spec: Option<trawl_core::spec::CrawlSpec> = schema::get(&conn, keys::SPEC)?
            .map(|s| serde_json::from_str(&s))
            .transpose()?;
        let mut stmt = conn.prepare(
            "SELECT url, status, final_url, etag, last_modified, payload_digest, text_hash,
                    simhash, fetched_at, changed_at, interval_s, fails, depth, kind,
                    warc_record_id, warc_date, page_offset, next_due
             FROM urls WHERE state = ?1",
        )?;
        let mut rows = stmt.query([UrlState::Written as i64])?;
        let mut urls = HashMap::new();
        while let Some(r) = rows.next()? {
            let url: String = r.get(0)?;
            let warc = match (
                r.get::<_, Option<String>>(14)?,
                r.get::<_, Option<String>>(15)?,
            ) {
                (Some(record_id), Some(date)) => Some(WarcRef { record_id, date }),
                _ => None,
            };
            let offset: Option<i64> = r.get(16)?;
            let kind: Option<String> = r.get(13)?;
            let prior = Prior {
                status: r.get::<_, Option<u16>>(1)?.unwrap_or(0),
                final_url: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                facts: ResponseFacts {
                    etag: r.get(3)?,
                    last_modified: r.get(4)?,
                    payload_digest: r.get(5)?,
                    warc,
                    revisit: None,
                },
                text_hash: r.get(6)?,
                simhash: r.get(7)?,
                fetched_at: r.get::<_, Option<String>>(8)?.unwrap_or_default(),
                changed_at: r.get(9)?,
                interval_s: r.get::<_, Option<i64>>(10)?.map(|s| s.max(0) as u64),
                next_due: r.get(17)?,
                fails: r.get::<_, Option<u32>>(11)?.unwrap_or(0),
                depth: r.get::<_, Option<u32>>(12)?.unwrap_or(0),
                kind: kind.as_deref().map_or(UrlKind::Page, kind_of),
                has_record: offset.is_some(),
            };
            urls.insert(url, (prior, offset.map(|o| o as u64)));
        }
        let index = schema::get(&conn, keys::INDEX_URI)?
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.join("index"));
        Ok(StoreHistory {
            urls,
            pages: dir.join("pages.jsonl"),
            crawl: spec.map(|s| s.crawl).unwrap_or_default(),
            index,
        })
    }

    pub fn len(&self) -> usize {
        self.urls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }

    fn read_record(&self, offset: u64) -> std::io::Result<Option<PageRecord>> {
        let mut f = std::fs::File::open(&self.pages)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut line = Vec::new();
        BufReader::new(f).read_until(b'\n', &mut line)?;
        Ok(serde_json::from_slice(&line).ok())
    }
}

#[async_trait]
impl History for StoreHistory {
    async fn prior(&self, url: &str) -> CoreResult<Option<Prior>> {
        Ok(self.urls.get(url).map(|(p, _)| p.clone()))
    }

    async fn previous(&self, url: &str) -> CoreResult<Option<PageRecord>> {
        let Some((_, Some(offset))) = self.urls.get(url) else {
            return Ok(None);
        };
        self.read_record(*offset)
            .map_err(|e| CoreError::Backend(format!("reading {}: {e}", self.pages.display())))
    }

    async fn known(&self) -> CoreResult<Vec<(String, u32, UrlKind)>> {
        let mut v: Vec<(String, u32, UrlKind)> = self
            .urls
            .iter()
            .filter(|(_, (p, _))| p.was_ok())
            .map(|(u, (p, _))| (u.clone(), p.depth, p.kind))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(v)
    }
}
