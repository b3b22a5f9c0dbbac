//! The journal: stages report what happened through a [`Journal`] handle; one thread owns
//! the connection and applies the reports in the order they were sent, one transaction
//! every [`COMMIT_EVERY`] (or [`COMMIT_EVENTS`] reports). A kill at any moment leaves a
//! prefix of the reports on disk, so the store never holds a page whose cause it lost:
//! a URL is queued before its page is written, a discovered batch is stored before the
//! page it came from is written, and every URL of a batch is queued before the batch is
//! acknowledged.
//!
//! The reports waiting for the thread are bounded in bytes ([`HELD_BYTES`], counted until
//! their commit): a disk slower than the crawl makes the stages wait for it instead of the
//! reports growing the process (a discovered batch can hold 50,000 URLs). Stages report
//! after they let go of the state's lock, so a wait holds up no other stage.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use trawl_core::{CoreError, CoreResult, Discovered, FetchJob, PageRecord, UrlKind};

use crate::schema::{self, UrlState, keys};
use crate::{StoreError, StoreResult};

pub const COMMIT_EVERY: Duration = Duration::from_millis(100);
pub const COMMIT_EVENTS: usize = 20_000;
/// Bytes of reports sent and not yet committed past which a report waits.
pub const HELD_BYTES: usize = 64 << 20;

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

impl Event {
    /// About what the report holds in memory until its commit.
    fn bytes(&self) -> usize {
        const BASE: usize = 64;
        BASE + match self {
            Event::Seen(url) | Event::Dropped(url) | Event::Queued { url, .. } => url.len(),
            Event::Published(_, json) => json.len(),
            Event::Written {
                pages, counters, ..
            } => {
                pages.iter().map(PageFacts::bytes).sum::<usize>()
                    + counters.keys().map(|k| k.len() + 16).sum::<usize>()
            }
            Event::Acked(_) | Event::Indexed(_) | Event::Close | Event::Nothing => 0,
        }
    }
}

impl PageFacts {
    fn bytes(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        std::mem::size_of::<PageFacts>()
            + self.url.len()
            + self.final_url.len()
            + self.fetched_at.len()
            + [
                &self.error,
                &self.etag,
                &self.last_modified,
                &self.payload_digest,
                &self.text_hash,
                &self.simhash,
                &self.duplicate_of,
                &self.warc_record_id,
                &self.warc_date,
                &self.changed_at,
                &self.next_due,
            ]
            .into_iter()
            .map(opt)
            .sum::<usize>()
    }
}

/// Bytes of reports sent and not yet committed.
#[derive(Default)]
struct Held {
    bytes: Mutex<usize>,
    freed: Condvar,
}

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `n` more bytes fit (a report larger than the bound goes alone).
    fn take(&self, n: usize) {
        let mut held = self.lock();
        while *held > 0 && *held + n > HELD_BYTES {
            held = self
                .freed
                .wait_timeout(held, COMMIT_EVERY)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        *held += n;
    }

    fn give(&self, n: usize) {
        let mut held = self.lock();
        *held = held.saturating_sub(n);
        self.freed.notify_all();
    }
}

/// The stages' handle on the journal; cheap to clone.
#[derive(Clone)]
pub struct Journal {
    tx: Sender<(Event, usize)>,
    held: Arc<Held>,
    failure: Arc<Mutex<Option<String>>>,
}

impl Journal {
    fn send(&self, e: Event) -> CoreResult<()> {
        let n = e.bytes();
        self.held.take(n);
        self.tx.send((e, n)).map_err(|_| {
            self.held.give(n);
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
        let held = Arc::new(Held::default());
        let f = failure.clone();
        let h = held.clone();
        let thread = std::thread::Builder::new()
            .name("crawl-store".into())
            .spawn(move || {
                let r = run(conn, rx, &h);
                // Nothing is committed any more: no report waits for room.
                h.give(usize::MAX);
                if let Err(e) = &r {
                    tracing::error!(error = %e, "the crawl store stopped");
                    *f.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                }
                r
            })?;
        Ok(JournalTask {
            journal: Journal { tx, held, failure },
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
        let _ = journal.tx.send((Event::Close, 0));
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

fn run(mut conn: Connection, rx: Receiver<(Event, usize)>, held: &Held) -> StoreResult<Connection> {
    let mut batch = Batch::default();
    loop {
        let wait = batch.since.map_or(Duration::from_secs(3600), |t| {
            COMMIT_EVERY.saturating_sub(t.elapsed())
        });
        match rx.recv_timeout(wait) {
            Ok((Event::Close, _)) => {
                batch.commit(&mut conn, held)?;
                return Ok(conn);
            }
            Ok((e, n)) => {
                batch.bytes += n;
                batch.push(e);
                if batch.events.len() >= COMMIT_EVENTS || batch.bytes >= HELD_BYTES / 2 {
                    batch.commit(&mut conn, held)?;
                }
            }
            Err(RecvTimeoutError::Timeout) => batch.commit(&mut conn, held)?,
            Err(RecvTimeoutError::Disconnected) => {
                batch.commit(&mut conn, held)?;
                return Ok(conn);
            }
        }
        if batch.since.is_some_and(|t| t.elapsed() >= COMMIT_EVERY) {
            batch.commit(&mut conn, held)?;
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
    /// What the reports of `events` were counted as when sent.
    bytes: usize,
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

    /// Commits the reports and gives their bytes back to the senders.
    fn commit(&mut self, conn: &mut Connection, held: &Held) -> StoreResult<()> {
        self.apply(conn)?;
        held.give(std::mem::take(&mut self.bytes));
        Ok(())
    }

    fn apply(&mut self, conn: &mut Connection) -> StoreResult<()> {
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use trawl_core::{DiscoveredUrl, MESSAGE_VERSION};

    use super::*;

    #[test]
    fn a_report_past_the_bound_waits_for_a_commit() {
        let held = Arc::new(Held::default());
        held.take(HELD_BYTES - 10);
        let (tx, rx) = mpsc::channel();
        let h = held.clone();
        std::thread::spawn(move || {
            h.take(100);
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        held.give(HELD_BYTES - 10);
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(*held.lock(), 100);
        // One report larger than the bound goes alone.
        held.give(100);
        held.take(2 * HELD_BYTES);
        assert_eq!(*held.lock(), 2 * HELD_BYTES);
    }

    #[test]
    fn reports_larger_than_the_bound_together_are_all_committed() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open(&dir.path().join("crawl.db")).unwrap();
        let task = JournalTask::start(conn).unwrap();
        let j = task.journal();
        // Four batches of about a third of the bound each.
        let urls: Vec<DiscoveredUrl> = (0..HELD_BYTES / 3 / 100)
            .map(|n| DiscoveredUrl {
                url: format!("http://a.test/{n:060}"),
                depth: 1,
                kind: UrlKind::Page,
                lastmod: None,
            })
            .collect();
        let batch = Discovered {
            v: MESSAGE_VERSION,
            crawl: "c".into(),
            source: None,
            urls,
        };
        for id in 1..=4 {
            j.published(id, &batch).unwrap();
        }
        drop(j);
        task.finish(false).unwrap();
        let conn = schema::open(&dir.path().join("crawl.db")).unwrap();
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM pending", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 4);
    }
}
