//! The journal: stages report what happened through a [`Journal`] handle; one thread owns
//! the connection and applies the reports in the order they were sent, one transaction
//! every [`COMMIT_EVERY`] (or [`COMMIT_EVENTS`] reports). A kill at any moment leaves a
//! prefix of the reports on disk, so the store never holds a page whose cause it lost:
//! a URL is queued before its page is written, a discovered batch is stored before the
//! page it came from is written, and every URL of a batch is queued before the batch is
//! acknowledged.
//!
//! The channel is unbounded on purpose: reports are small, the thread commits far faster
//! than a crawl produces them, and a bounded channel would let a stage holding a state
//! lock wait on the disk.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use trawl_core::{CoreError, CoreResult, Discovered, FetchJob, PageRecord, UrlKind};

use crate::schema::{self, UrlState, keys};
use crate::{StoreError, StoreResult};

pub const COMMIT_EVERY: Duration = Duration::from_millis(100);
pub const COMMIT_EVENTS: usize = 20_000;

/// What a written page leaves in the store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageFacts {
    pub url: String,
    pub offset: u64,
    pub status: u16,
    pub final_url: String,
    pub error: Option<String>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub payload_digest: Option<String>,
    pub text_hash: Option<String>,
    pub simhash: Option<String>,
    pub duplicate_of: Option<String>,
    pub fetched_at: String,
    pub warc_record_id: Option<String>,
    pub warc_date: Option<String>,
    pub changed_at: Option<String>,
    pub interval_s: Option<u64>,
    pub next_due: Option<String>,
    pub fails: u32,
}

impl PageFacts {
    pub fn of(offset: u64, p: &PageRecord) -> Self {
        PageFacts {
            url: p.url.clone(),
            offset,
            status: p.status,
            final_url: p.final_url.clone(),
            error: p.error.as_ref().map(|e| e.kind.clone()),
            etag: p.facts.etag.clone(),
            last_modified: p.facts.last_modified.clone(),
            payload_digest: p.facts.payload_digest.clone(),
            text_hash: p.text_hash.clone(),
            simhash: p.simhash.clone(),
            duplicate_of: p.duplicate_of.clone(),
            fetched_at: p.fetched_at.clone(),
            warc_record_id: p.facts.warc.as_ref().map(|w| w.record_id.clone()),
            warc_date: p.facts.warc.as_ref().map(|w| w.date.clone()),
            changed_at: p.change.as_ref().map(|c| c.changed_at.clone()),
            interval_s: p.change.as_ref().map(|c| c.interval_s),
            next_due: p.change.as_ref().map(|c| c.next_due.clone()),
            fails: p.change.as_ref().map_or(0, |c| c.fails),
        }
    }
}

enum Event {
    Seen(String),
    Queued {
        url: String,
        depth: u32,
        kind: UrlKind,
        priority: i64,
    },
    Dropped(String),
    Published(u64, String),
    Acked(u64),
    Written {
        pages: Vec<PageFacts>,
        end: u64,
        counters: BTreeMap<String, i64>,
        changes_end: Option<u64>,
    },
    Indexed(u64),
    /// Commit and stop.
    Close,
    /// A report coalesced away (a batch published and acknowledged within one commit).
    Nothing,
}

/// The stages' handle on the journal; cheap to clone.
#[derive(Clone)]
pub struct Journal {
    tx: Sender<Event>,
    failure: Arc<Mutex<Option<String>>>,
}

impl Journal {
    fn send(&self, e: Event) -> CoreResult<()> {
        self.tx.send(e).map_err(|_| {
            let why = self
                .failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .unwrap_or_else(|| "closed".into());
            CoreError::Backend(format!("crawl store: the writer stopped: {why}"))
        })
    }

    /// `url` entered the seen-set.
    pub fn seen(&self, url: &str) -> CoreResult<()> {
        self.send(Event::Seen(url.to_string()))
    }

    /// `job` is in a host queue (again, after a retry).
    pub fn queued(&self, job: &FetchJob) -> CoreResult<()> {
        self.send(Event::Queued {
            url: job.url.clone(),
            depth: job.depth,
            kind: job.kind,
            priority: job.priority,
        })
    }

    /// `url`, queued before, was dropped by a full frontier.
    pub fn dropped(&self, url: &str) -> CoreResult<()> {
        self.send(Event::Dropped(url.to_string()))
    }

    /// A discovered batch, under journal id `id`, waits for the frontier.
    pub fn published(&self, id: u64, batch: &Discovered) -> CoreResult<()> {
        let json = serde_json::to_string(batch)
            .map_err(|e| CoreError::Backend(format!("crawl store: encoding a batch: {e}")))?;
        self.send(Event::Published(id, json))
    }

    /// The frontier is done with batch `id`.
    pub fn acked(&self, id: u64) -> CoreResult<()> {
        self.send(Event::Acked(id))
    }
}

impl trawl_core::journal::Journal for Journal {
    fn written(
        &self,
        pages: &[(u64, &PageRecord)],
        end: u64,
        counters: BTreeMap<String, i64>,
        changes_end: Option<u64>,
    ) -> CoreResult<()> {
        self.send(Event::Written {
            pages: pages.iter().map(|(o, p)| PageFacts::of(*o, p)).collect(),
            end,
            counters,
            changes_end,
        })
    }

    fn indexed(&self, end: u64) -> CoreResult<()> {
        self.send(Event::Indexed(end))
    }
}

/// Owns the writer thread.
pub struct JournalTask {
    journal: Journal,
    thread: std::thread::JoinHandle<StoreResult<Connection>>,
}

impl JournalTask {
    /// Starts the writer over an open store.
    pub fn start(conn: Connection) -> StoreResult<JournalTask> {
        let (tx, rx) = mpsc::channel();
        let failure = Arc::new(Mutex::new(None));
        let f = failure.clone();
        let thread = std::thread::Builder::new()
            .name("crawl-store".into())
            .spawn(move || {
                let r = run(conn, rx);
                if let Err(e) = &r {
                    tracing::error!(error = %e, "the crawl store stopped");
                    *f.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                }
                r
            })?;
        Ok(JournalTask {
            journal: Journal { tx, failure },
            thread,
        })
    }

    pub fn journal(&self) -> Journal {
        self.journal.clone()
    }

    /// Commits what is reported, stops the thread and, when the crawl is complete, marks
    /// it finished. Reports sent after this fail.
    pub fn finish(self, finished: bool) -> StoreResult<()> {
        let JournalTask { journal, thread } = self;
        // Handles may outlive the crawl (the state is read for the report): the thread
        // stops on this report, not when the last handle goes.
        let _ = journal.tx.send(Event::Close);
        let conn = thread
            .join()
            .map_err(|_| StoreError::Stopped("the writer thread panicked".into()))??;
        if finished {
            schema::set(&conn, keys::STATUS, schema::FINISHED)?;
        }
        conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")?;
        Ok(())
    }
}

fn run(mut conn: Connection, rx: Receiver<Event>) -> StoreResult<Connection> {
    let mut batch = Batch::default();
    loop {
        let wait = batch.since.map_or(Duration::from_secs(3600), |t| {
            COMMIT_EVERY.saturating_sub(t.elapsed())
        });
        match rx.recv_timeout(wait) {
            Ok(Event::Close) => {
                batch.commit(&mut conn)?;
                return Ok(conn);
            }
            Ok(e) => {
                batch.push(e);
                if batch.events.len() >= COMMIT_EVENTS {
                    batch.commit(&mut conn)?;
                }
            }
            Err(RecvTimeoutError::Timeout) => batch.commit(&mut conn)?,
            Err(RecvTimeoutError::Disconnected) => {
                batch.commit(&mut conn)?;
                return Ok(conn);
            }
        }
        if batch.since.is_some_and(|t| t.elapsed() >= COMMIT_EVERY) {
            batch.commit(&mut conn)?;
        }
    }
}

/// Reports not yet committed, in order.
#[derive(Default)]
struct Batch {
    events: Vec<Event>,
    /// Where each batch published since the last commit sits in `events`.
    published: HashMap<u64, usize>,
    since: Option<Instant>,
}

impl Batch {
    fn push(&mut self, e: Event) {
        self.since.get_or_insert_with(Instant::now);
        match e {
            Event::Published(id, _) => {
                self.published.insert(id, self.events.len());
                self.events.push(e);
            }
            Event::Acked(id) => match self.published.remove(&id) {
                // Published and done within one commit: neither reaches the disk.
                Some(i) => self.events[i] = Event::Nothing,
                None => self.events.push(e),
            },
            e => self.events.push(e),
        }
    }

    fn commit(&mut self, conn: &mut Connection) -> StoreResult<()> {
        self.published.clear();
        self.since = None;
        if self.events.is_empty() {
            return Ok(());
        }
        let tx = conn.transaction()?;
        let mut pages_end = None;
        let mut index_end = None;
        let mut counters = None;
        let mut changes_end = None;
        for e in self.events.drain(..) {
            match e {
                Event::Seen(url) => {
                    tx.prepare_cached("INSERT OR IGNORE INTO urls(url, state) VALUES (?1, ?2)")?
                        .execute(params![url, UrlState::Seen as i64])?;
                }
                Event::Queued {
                    url,
                    depth,
                    kind,
                    priority,
                } => {
                    tx.prepare_cached(
                        "INSERT INTO urls(url, state, depth, kind, priority)
                         VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT(url) DO UPDATE SET
                           state = CASE WHEN state = ?6 THEN state ELSE ?2 END,
                           depth = ?3, kind = ?4, priority = ?5",
                    )?
                    .execute(params![
                        url,
                        UrlState::Queued as i64,
                        depth,
                        kind_name(kind),
                        priority,
                        UrlState::Written as i64
                    ])?;
                }
                Event::Dropped(url) => {
                    tx.prepare_cached("UPDATE urls SET state = ?2 WHERE url = ?1 AND state = ?3")?
                        .execute(params![
                            url,
                            UrlState::Dropped as i64,
                            UrlState::Queued as i64
                        ])?;
                }
                Event::Published(id, json) => {
                    tx.prepare_cached("INSERT OR REPLACE INTO pending(id, batch) VALUES (?1, ?2)")?
                        .execute(params![id as i64, json])?;
                }
                Event::Acked(id) => {
                    tx.prepare_cached("DELETE FROM pending WHERE id = ?1")?
                        .execute([id as i64])?;
                }
                Event::Written {
                    pages,
                    end,
                    counters: c,
                    changes_end: ce,
                } => {
                    for p in &pages {
                        write_page(&tx, p)?;
                    }
                    pages_end = Some(end);
                    counters = Some(c);
                    changes_end = ce.or(changes_end);
                }
                Event::Indexed(end) => index_end = Some(end),
                Event::Close | Event::Nothing => {}
            }
        }
        if let Some(end) = pages_end {
            schema::set(&tx, keys::PAGES_OFFSET, &end.to_string())?;
        }
        if let Some(end) = index_end {
            schema::set(&tx, keys::INDEX_OFFSET, &end.to_string())?;
        }
        if let Some(c) = counters {
            schema::set(&tx, keys::COUNTERS, &serde_json::to_string(&c)?)?;
        }
        if let Some(end) = changes_end {
            schema::set(&tx, keys::CHANGES_OFFSET, &end.to_string())?;
        }
        tx.commit()?;
        Ok(())
    }
}

fn write_page(tx: &rusqlite::Transaction<'_>, p: &PageFacts) -> StoreResult<()> {
    tx.prepare_cached(
        "INSERT INTO urls(url, state, status, final_url, error, etag, last_modified,
                          payload_digest, text_hash, simhash, duplicate_of, fetched_at,
                          warc_record_id, warc_date, page_offset, changed_at, interval_s,
                          next_due, fails)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19)
         ON CONFLICT(url) DO UPDATE SET
           state = ?2, status = ?3, final_url = ?4, error = ?5, etag = ?6,
           last_modified = ?7, payload_digest = ?8, text_hash = ?9, simhash = ?10,
           duplicate_of = ?11, fetched_at = ?12, warc_record_id = ?13, warc_date = ?14,
           page_offset = ?15, changed_at = ?16, interval_s = ?17, next_due = ?18,
           fails = ?19",
    )?
    .execute(params![
        p.url,
        UrlState::Written as i64,
        p.status,
        p.final_url,
        p.error,
        p.etag,
        p.last_modified,
        p.payload_digest,
        p.text_hash,
        p.simhash,
        p.duplicate_of,
        p.fetched_at,
        p.warc_record_id,
        p.warc_date,
        p.offset as i64,
        p.changed_at,
        p.interval_s.map(|s| s as i64),
        p.next_due,
        p.fails
    ])?;
    Ok(())
}

pub fn kind_name(k: UrlKind) -> &'static str {
    match k {
        UrlKind::Page => "page",
        UrlKind::Sitemap => "sitemap",
        UrlKind::Feed => "feed",
    }
}

pub fn kind_of(s: &str) -> UrlKind {
    match s {
        "sitemap" => UrlKind::Sitemap,
        "feed" => UrlKind::Feed,
        _ => UrlKind::Page,
    }
}
