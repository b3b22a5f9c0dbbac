//! An earlier crawl's directory as the [`History`] of a re-crawl: its store's facts per
//! URL, looked up by key in its `crawl.db` as pages come (never read whole into memory: a
//! re-crawl of ten million pages would hold gigabytes), and its `pages.jsonl` records,
//! read by offset when a page is carried forward or compared.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row};
use trawl_core::history::{History, KnownPage, Prior};
use trawl_core::{CoreError, CoreResult, PageRecord, ResponseFacts, UrlKind, WarcRef};

use crate::journal::kind_of;
use crate::schema::{self, UrlState, keys};
use crate::{DB_FILE, StoreError, StoreResult};

/// SQLite's page cache for the lookups: the earlier crawl's rows are read once each, in no
/// useful order, so a larger cache would only grow the process.
const CACHE_KIB: i64 = 8 << 10;
/// URLs a page of [`History::known`] holds.
const KNOWN_PAGE: usize = 10_000;

const COLUMNS: &str = "url, status, final_url, etag, last_modified, payload_digest, text_hash,
     simhash, fetched_at, changed_at, interval_s, fails, depth, kind, warc_record_id,
     warc_date, page_offset, next_due";

pub struct StoreHistory {
    /// One connection: lookups are single-row reads by primary key (microseconds), far
    /// shorter than the fetch each one comes with.
    conn: Mutex<Connection>,
    written: usize,
    pages: PathBuf,
    /// The earlier crawl's id.
    pub crawl: String,
    /// Where its index is: a re-crawl updates it in place.
    pub index: PathBuf,
}

impl StoreHistory {
    /// Opens the crawl in `dir`; it must be finished (a crawl still running is not a
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
        conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
        let spec: Option<trawl_core::spec::CrawlSpec> = schema::get(&conn, keys::SPEC)?
            .map(|s| serde_json::from_str(&s))
            .transpose()?;
        let written: i64 = conn.query_row(
            "SELECT COUNT(*) FROM urls WHERE state = ?1",
            [UrlState::Written as i64],
            |r| r.get(0),
        )?;
        let index = schema::get(&conn, keys::INDEX_URI)?
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.join("index"));
        Ok(StoreHistory {
            conn: Mutex::new(conn),
            written: written.max(0) as usize,
            pages: dir.join("pages.jsonl"),
            crawl: spec.map(|s| s.crawl).unwrap_or_default(),
            index,
        })
    }

    /// The earlier crawl's written URLs.
    pub fn len(&self) -> usize {
        self.written
    }

    pub fn is_empty(&self) -> bool {
        self.written == 0
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The written URL's facts and where its line starts.
    fn lookup(&self, url: &str) -> StoreResult<Option<(Prior, Option<u64>)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM urls WHERE url = ?1 AND state = ?2"
        ))?;
        Ok(stmt
            .query_row(rusqlite::params![url, UrlState::Written as i64], prior_of)
            .optional()?)
    }

    /// Up to [`KNOWN_PAGE`] written URLs after `after`, in URL order.
    fn known_after(&self, after: &str) -> StoreResult<Vec<(String, Prior)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM urls WHERE state = ?1 AND url > ?2 ORDER BY url LIMIT ?3"
        ))?;
        let rows = stmt.query_map(
            rusqlite::params![UrlState::Written as i64, after, KNOWN_PAGE as i64],
            |r| Ok((r.get::<_, String>(0)?, prior_of(r)?.0)),
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn read_record(&self, offset: u64) -> std::io::Result<Option<PageRecord>> {
        let mut f = std::fs::File::open(&self.pages)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut line = Vec::new();
        BufReader::new(f).read_until(b'\n', &mut line)?;
        Ok(serde_json::from_slice(&line).ok())
    }
}

/// A row of [`COLUMNS`] as the facts a re-crawl compares with, and its line's offset.
fn prior_of(r: &Row<'_>) -> rusqlite::Result<(Prior, Option<u64>)> {
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
    Ok((prior, offset.and_then(|o| u64::try_from(o).ok())))
}

fn backend(what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("the earlier crawl's store: {what}: {e}"))
}

#[async_trait]
impl History for StoreHistory {
    async fn prior(&self, url: &str) -> CoreResult<Option<Prior>> {
        Ok(self
            .lookup(url)
            .map_err(|e| backend("prior", e))?
            .map(|(p, _)| p))
    }

    async fn previous(&self, url: &str) -> CoreResult<Option<PageRecord>> {
        let Some((_, Some(offset))) = self.lookup(url).map_err(|e| backend("previous", e))? else {
            return Ok(None);
        };
        self.read_record(offset)
            .map_err(|e| CoreError::Backend(format!("reading {}: {e}", self.pages.display())))
    }

    async fn known(&self, cursor: Option<String>) -> CoreResult<KnownPage> {
        let rows = self
            .known_after(cursor.as_deref().unwrap_or(""))
            .map_err(|e| backend("known", e))?;
        let next = (rows.len() == KNOWN_PAGE)
            .then(|| rows.last().map(|(u, _)| u.clone()))
            .flatten();
        let urls = rows
            .into_iter()
            .filter(|(_, p)| p.was_ok())
            .map(|(u, p)| (u, p.depth, p.kind))
            .collect();
        Ok(KnownPage { urls, next })
    }
}

#[cfg(test)]
mod tests {
    use trawl_core::FetchJob;
    use trawl_core::journal::Journal as _;
    use trawl_core::spec::CrawlSpec;

    use super::*;
    use crate::journal::JournalTask;

    fn spec() -> CrawlSpec {
        crate::resume::tests::spec_of("old")
    }

    fn url(n: usize) -> String {
        format!("http://a.test/p{n:05}")
    }

    fn record(n: usize, status: u16) -> PageRecord {
        PageRecord {
            url: url(n),
            final_url: url(n),
            status,
            text: format!("page {n}"),
            text_hash: Some(format!("{n:032x}")),
            ..PageRecord::default()
        }
    }

    /// A finished crawl of `pages` written pages (the last a 404), one URL still queued,
    /// and its `pages.jsonl`.
    fn finished_crawl(dir: &Path, pages: usize) {
        let conn = crate::resume::create(dir, &spec(), "2026-12-01T00:00:00Z").unwrap();
        let task = JournalTask::start(conn).unwrap();
        let j = task.journal();
        let mut lines = Vec::new();
        let mut written = Vec::new();
        for n in 0..pages {
            let status = if n + 1 == pages { 404 } else { 200 };
            let r = record(n, status);
            written.push((lines.len() as u64, r.clone()));
            serde_json::to_writer(&mut lines, &r).unwrap();
            lines.push(b'\n');
        }
        let queued = FetchJob {
            crawl: "old".into(),
            url: "http://a.test/queued".into(),
            host: "a.test".into(),
            depth: 1,
            ..FetchJob::default()
        };
        j.queued(&queued).unwrap();
        for (o, r) in &written {
            j.queued(&FetchJob {
                url: r.url.clone(),
                ..queued.clone()
            })
            .unwrap();
            j.written(&[(*o, r)], *o, Default::default(), None).unwrap();
        }
        std::fs::write(dir.join("pages.jsonl"), lines).unwrap();
        drop(j);
        task.finish(true).unwrap();
    }

    #[tokio::test]
    async fn facts_and_records_are_looked_up_by_url() {
        let dir = tempfile::tempdir().unwrap();
        finished_crawl(dir.path(), 3);
        let h = StoreHistory::open(dir.path()).unwrap();
        assert_eq!((h.len(), h.crawl.as_str()), (3, "old"));
        let p = h.prior(&url(1)).await.unwrap().unwrap();
        assert_eq!((p.status, p.final_url.as_str()), (200, url(1).as_str()));
        assert_eq!(p.text_hash, Some(format!("{:032x}", 1)));
        assert!(p.has_record);
        assert_eq!(h.previous(&url(1)).await.unwrap(), Some(record(1, 200)));
        assert_eq!(h.prior(&url(2)).await.unwrap().unwrap().status, 404);
        // Queued, never written: the earlier crawl knows nothing of it.
        assert_eq!(h.prior("http://a.test/queued").await.unwrap(), None);
        assert_eq!(h.previous("http://a.test/nowhere").await.unwrap(), None);
    }

    #[tokio::test]
    async fn known_urls_come_a_page_at_a_time_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let n = KNOWN_PAGE + 5;
        finished_crawl(dir.path(), n);
        let h = StoreHistory::open(dir.path()).unwrap();
        let first = h.known(None).await.unwrap();
        assert_eq!(first.urls.len(), KNOWN_PAGE);
        assert_eq!(first.urls[0].0, url(0));
        let second = h.known(first.next.clone()).await.unwrap();
        // The 404 is no page to look for again.
        assert_eq!(second.urls.len(), 4);
        assert_eq!(second.next, None);
        let all: Vec<String> = first
            .urls
            .into_iter()
            .chain(second.urls)
            .map(|(u, _, _)| u)
            .collect();
        assert_eq!(all, (0..n - 1).map(url).collect::<Vec<_>>());
    }

    #[test]
    fn a_crawl_still_running_is_no_baseline() {
        let dir = tempfile::tempdir().unwrap();
        drop(crate::resume::create(dir.path(), &spec(), "t").unwrap());
        let e = StoreHistory::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("not finished"), "{e}");
    }
}
