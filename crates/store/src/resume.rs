//! Creating a crawl's store, and reading back what a resumed crawl starts from.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;
use trawl_core::spec::CrawlSpec;
use trawl_core::state::seen_digest;
use trawl_core::urlnorm::host_key;
use trawl_core::{Discovered, FetchJob, MESSAGE_VERSION};

use crate::journal::kind_of;
use crate::schema::{self, UrlState, keys};
use crate::{DB_FILE, StoreError, StoreResult};

/// A written page the dedup gate must know again: one kept, not a copy. (Copies are not
/// put back: the gate's order is not the write order, so a copy can be written while the
/// page it names is not, and that page, fetched again, must not be matched to its copy.)
#[derive(Debug, Clone, PartialEq)]
pub struct KeptPage {
    pub final_url: String,
    pub simhash: u64,
    pub text_hash: u128,
    /// Where its line starts in `pages.jsonl` (the MinHash gate makes its sketch again).
    pub page_offset: Option<u64>,
}

/// Everything a resumed crawl starts from.
#[derive(Debug, Default)]
pub struct Resume {
    pub spec: Option<CrawlSpec>,
    pub started_at: Option<String>,
    pub runs: u64,
    /// The seen-set's digests.
    pub seen: Vec<u128>,
    /// Admitted URLs without a line in `pages.jsonl`: fetched again.
    pub queued: Vec<FetchJob>,
    /// Discovered batches the frontier had not finished, by journal id.
    pub pending: Vec<(u64, Discovered)>,
    pub counters: BTreeMap<String, i64>,
    /// `pages.jsonl` is cut back to this length.
    pub pages_offset: u64,
    /// Lines of `pages.jsonl` from here to `pages_offset` go to the index again.
    pub index_offset: u64,
    /// `changes.jsonl` is cut back to this length.
    pub changes_offset: u64,
    pub kept: Vec<KeptPage>,
    /// Pages admitted (queued or written), in all and by host: the budgets' counters are
    /// raised to these, as a kill can come between an admission and the next snapshot of
    /// the counters.
    pub admitted_pages: u64,
    pub admitted_by_host: BTreeMap<String, u64>,
}

/// Creates the store of a new crawl in `dir`.
pub fn create(dir: &Path, spec: &CrawlSpec, started_at: &str) -> StoreResult<Connection> {
    let path = dir.join(DB_FILE);
    if path.exists() {
        return Err(StoreError::Invalid(format!(
            "{} exists already",
            path.display()
        )));
    }
    let mut conn = schema::open(&path)?;
    // One transaction: a store either has its spec or is not a started crawl.
    let tx = conn.transaction()?;
    schema::set(&tx, keys::SPEC, &serde_json::to_string(spec)?)?;
    schema::set(&tx, keys::STATUS, schema::RUNNING)?;
    schema::set(&tx, keys::STARTED_AT, started_at)?;
    schema::set(&tx, keys::RUNS, "1")?;
    tx.commit()?;
    Ok(conn)
}

/// Opens the store in `dir` for a resume: reads it back and records the new run (with the
/// spec it runs under).
pub fn open(dir: &Path, spec: &CrawlSpec) -> StoreResult<(Connection, Resume)> {
    let mut conn = schema::open(&dir.join(DB_FILE))?;
    let resume = read(&conn, &spec.crawl)?;
    let tx = conn.transaction()?;
    schema::set(&tx, keys::SPEC, &serde_json::to_string(spec)?)?;
    schema::set(&tx, keys::STATUS, schema::RUNNING)?;
    schema::set(&tx, keys::RUNS, &(resume.runs + 1).to_string())?;
    tx.commit()?;
    Ok((conn, resume))
}

fn read(conn: &Connection, crawl: &str) -> StoreResult<Resume> {
    let mut r = Resume {
        spec: schema::get(conn, keys::SPEC)?
            .map(|s| serde_json::from_str(&s))
            .transpose()?,
        started_at: schema::get(conn, keys::STARTED_AT)?,
        runs: schema::get_u64(conn, keys::RUNS)?,
        pages_offset: schema::get_u64(conn, keys::PAGES_OFFSET)?,
        index_offset: schema::get_u64(conn, keys::INDEX_OFFSET)?,
        changes_offset: schema::get_u64(conn, keys::CHANGES_OFFSET)?,
        counters: schema::get(conn, keys::COUNTERS)?
            .map(|s| serde_json::from_str(&s))
            .transpose()?
            .unwrap_or_default(),
        ..Resume::default()
    };
    let mut rows = conn.prepare(
        "SELECT url, state, depth, kind, priority, final_url, simhash, text_hash, duplicate_of,
                page_offset
         FROM urls",
    )?;
    let mut it = rows.query([])?;
    while let Some(row) = it.next()? {
        let url: String = row.get(0)?;
        let state: i64 = row.get(1)?;
        // A URL only seen is not restored: it may be a redirect target of a page that was
        // not written, or a URL whose admission the kill cut short (seen, not queued). A
        // batch or a page fetched again offers it again, and the frontier's rules (budgets
        // included, their counters restored) decide anew.
        if state == UrlState::Seen as i64 {
            continue;
        }
        r.seen.push(seen_digest(&url));
        let kind: Option<String> = row.get(3)?;
        if kind.as_deref().is_none_or(|k| k == "page") {
            r.admitted_pages += 1;
            if let Ok(u) = url::Url::parse(&url) {
                *r.admitted_by_host.entry(host_key(&u)).or_default() += 1;
            }
        }
        if state == UrlState::Queued as i64 {
            r.queued.push(job(crawl, url, row)?);
        } else if state == UrlState::Written as i64
            && let Some(k) = kept(row)?
        {
            r.kept.push(k);
        }
    }
    drop(it);
    let mut pending = conn.prepare("SELECT id, batch FROM pending ORDER BY id")?;
    let mut it = pending.query([])?;
    while let Some(row) = it.next()? {
        let id: i64 = row.get(0)?;
        let json: String = row.get(1)?;
        r.pending.push((id as u64, serde_json::from_str(&json)?));
    }
    Ok(r)
}

fn job(crawl: &str, url: String, row: &rusqlite::Row<'_>) -> StoreResult<FetchJob> {
    let parsed = url::Url::parse(&url)
        .map_err(|e| StoreError::Invalid(format!("queued URL {url:?}: {e}")))?;
    let kind: Option<String> = row.get(3)?;
    Ok(FetchJob {
        v: MESSAGE_VERSION,
        crawl: crawl.to_string(),
        host: host_key(&parsed),
        url,
        depth: row.get::<_, Option<u32>>(2)?.unwrap_or(0),
        kind: kind.as_deref().map_or(Default::default(), kind_of),
        priority: row.get::<_, Option<i64>>(4)?.unwrap_or(0),
        retries: 0,
        lastmod: None,
        robots_wait_since_ms: None,
        claim: None,
    })
}

fn kept(row: &rusqlite::Row<'_>) -> StoreResult<Option<KeptPage>> {
    let final_url: Option<String> = row.get(5)?;
    let simhash: Option<String> = row.get(6)?;
    let text_hash: Option<String> = row.get(7)?;
    let duplicate_of: Option<String> = row.get(8)?;
    let page_offset: Option<i64> = row.get(9)?;
    let parsed = match (final_url, simhash, text_hash, duplicate_of) {
        (Some(f), Some(s), Some(t), None) => u64::from_str_radix(&s, 16)
            .ok()
            .zip(u128::from_str_radix(&t, 16).ok())
            .map(|(simhash, text_hash)| KeptPage {
                final_url: f,
                simhash,
                text_hash,
                page_offset: page_offset.and_then(|o| u64::try_from(o).ok()),
            }),
        _ => None,
    };
    Ok(parsed)
}

#[cfg(test)]
pub(crate) mod tests {
    use trawl_core::journal::Journal as _;
    use trawl_core::{DiscoveredUrl, PageRecord, UrlKind};

    use super::*;
    use crate::journal::JournalTask;

    /// The spec of a crawl `crawl` of `http://a.test/` (the store's tests share it).
    pub(crate) fn spec_of(crawl: &str) -> CrawlSpec {
        CrawlSpec {
            crawl: crawl.into(),
            start: vec![("http://a.test/".into(), UrlKind::Page)],
            settings: Default::default(),
            index: Default::default(),
            since: None,
            due_only: false,
            state_shards: 1,
        }
    }

    fn spec() -> CrawlSpec {
        spec_of("c1")
    }

    fn job(url: &str) -> FetchJob {
        FetchJob {
            v: MESSAGE_VERSION,
            crawl: "c1".into(),
            url: url.into(),
            host: "a.test".into(),
            depth: 2,
            kind: UrlKind::Page,
            priority: 7,
            retries: 0,
            lastmod: None,
            robots_wait_since_ms: None,
            claim: None,
        }
    }

    fn batch(url: &str) -> Discovered {
        Discovered {
            v: MESSAGE_VERSION,
            crawl: "c1".into(),
            source: None,
            urls: vec![DiscoveredUrl {
                url: url.into(),
                depth: 1,
                kind: UrlKind::Page,
                lastmod: None,
            }],
        }
    }

    #[test]
    fn a_journaled_crawl_reads_back_as_it_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let conn = create(dir.path(), &spec(), "2026-12-01T00:00:00Z").unwrap();
        let task = JournalTask::start(conn).unwrap();
        let j = task.journal();
        for u in ["http://a.test/", "http://a.test/x", "http://a.test/y"] {
            j.seen(u).unwrap();
            j.queued(&job(u)).unwrap();
        }
        j.seen("http://a.test/redirected").unwrap();
        // Dropped by a full frontier: known (not offered again), never queued again.
        j.seen("http://a.test/dropped").unwrap();
        j.queued(&job("http://a.test/dropped")).unwrap();
        j.dropped("http://a.test/dropped").unwrap();
        // One batch acked within the commit (never stored), one still pending.
        j.published(1, &batch("http://a.test/z")).unwrap();
        j.acked(1).unwrap();
        j.published(2, &batch("http://a.test/w")).unwrap();
        let page = PageRecord {
            url: "http://a.test/x".into(),
            final_url: "http://a.test/x".into(),
            status: 200,
            simhash: Some("00000000000000ff".into()),
            text_hash: Some(format!("{:032x}", 42u128)),
            ..PageRecord::default()
        };
        let counters = [("pages".to_string(), 1i64)].into_iter().collect();
        j.written(&[(0, &page)], 120, counters, None).unwrap();
        j.indexed(60).unwrap();
        drop(j);
        task.finish(false).unwrap();

        let (_, r) = open(dir.path(), &spec()).unwrap();
        assert_eq!(r.runs, 1);
        // The URL only seen (a redirect target here) is not restored: it is offered again.
        assert_eq!(r.seen.len(), 4);
        assert!(r.seen.contains(&seen_digest("http://a.test/dropped")));
        let queued: Vec<&str> = r.queued.iter().map(|j| j.url.as_str()).collect();
        assert_eq!(queued.len(), 2);
        assert!(queued.contains(&"http://a.test/") && queued.contains(&"http://a.test/y"));
        assert_eq!((r.queued[0].depth, r.queued[0].priority), (2, 7));
        assert_eq!(r.admitted_pages, 4);
        assert_eq!(r.admitted_by_host.get("a.test"), Some(&4));
        assert_eq!(r.pending.len(), 1);
        assert_eq!(r.pending[0].0, 2);
        assert_eq!(r.pending[0].1.urls[0].url, "http://a.test/w");
        assert_eq!((r.pages_offset, r.index_offset), (120, 60));
        assert_eq!(r.counters.get("pages"), Some(&1));
        assert_eq!(
            r.kept,
            vec![KeptPage {
                final_url: "http://a.test/x".into(),
                simhash: 0xff,
                text_hash: 42,
                page_offset: Some(0),
            }]
        );
        // The second run is counted.
        let (_, r) = open(dir.path(), &spec()).unwrap();
        assert_eq!(r.runs, 2);
    }

    #[test]
    fn a_store_of_another_schema_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let conn = create(dir.path(), &spec(), "t").unwrap();
        schema::set(&conn, "schema_version", "99").unwrap();
        drop(conn);
        let e = open(dir.path(), &spec()).unwrap_err().to_string();
        assert!(e.contains("schema version 99"), "{e}");
    }
}
