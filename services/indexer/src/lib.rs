//! The indexer stage: the end of the pipeline, where documents become the corpus.
//!
//! It writes every record to `pages.jsonl`, keeps the report's per-page counters, and hands
//! pages to the knowledge base (`trawl-index`: chunks, embeddings, LanceDB). On a re-crawl
//! it first compares each page with the earlier crawl ([`changes`]): unchanged pages are
//! carried forward and never indexed again, changes become events in `changes.jsonl`.

pub mod changes;
pub mod follow;

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use trawl_core::change::ChangeEvent;
use trawl_core::counters::Counter;
use trawl_core::history::{History, PageArchive, Unlinked};
use trawl_core::journal::Journal;
use trawl_core::pipeline::{Hops, Shutdown, Stage, StageContext, StageError, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_core::{CoreError, Doc, PageRecord};

#[derive(Debug, thiserror::Error)]
pub enum IndexerError {
    #[error("writing the corpus: {0}")]
    Io(#[from] std::io::Error),
    #[error("encoding a record: {0}")]
    Json(#[from] serde_json::Error),
    #[error("shared state: {0}")]
    State(#[from] CoreError),
    #[error(transparent)]
    Index(#[from] trawl_index::IndexError),
    #[error("the index task stopped")]
    IndexStopped,
}

/// What the index task is asked to do, with where the page's line in `pages.jsonl` ends.
#[derive(Debug)]
pub enum IndexItem {
    Add(Box<PageRecord>, u64),
    Remove(String, u64),
}

impl IndexItem {
    /// The index's part of a line of `pages.jsonl`, as the writer sends it and a resumed
    /// crawl replays it: none for an unchanged or unindexable page.
    pub fn of_line(page: PageRecord, end: u64) -> Option<IndexItem> {
        match changes::IndexAction::of(&page) {
            changes::IndexAction::Keep => None,
            changes::IndexAction::Remove(canonical) => Some(IndexItem::Remove(canonical, end)),
            changes::IndexAction::Add => {
                trawl_index::indexer::wants(&page).then(|| IndexItem::Add(Box::new(page), end))
            }
        }
    }
}

/// `pages.jsonl`: one JSON object per line, appended as documents arrive. Lines are
/// buffered and written at each [`JsonlSink::flush`]; a write that fails (a full disk) is
/// cut back off the file, so the file never holds a torn line and a later append cannot
/// glue two records together.
pub struct JsonlSink {
    file: File,
    buf: Vec<u8>,
    /// Bytes in the file once flushed.
    written: u64,
}

impl JsonlSink {
    /// Opens `path` for appending (created if missing): a restarted writer keeps what the
    /// file already holds.
    pub fn append(path: &Path) -> Result<Self, IndexerError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            file,
            buf: Vec::new(),
            written,
        })
    }

    /// Starts `path` empty. Opened for appending all the same: after a failed write is cut
    /// back, the next one lands at the new end.
    pub fn create(path: &Path) -> Result<Self, IndexerError> {
        File::create(path)?;
        Self::append(path)
    }

    /// Appends one line; returns the offset it starts at.
    pub fn write<T: serde::Serialize>(&mut self, value: &T) -> Result<u64, IndexerError> {
        let start = self.len();
        serde_json::to_writer(&mut self.buf, value)?;
        self.buf.push(b'\n');
        Ok(start)
    }

    /// The file's length once flushed.
    pub fn len(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the buffered lines. On failure the file is cut back to its last whole line
    /// and the lines are dropped: the caller fails, and nothing it wrote is half there.
    pub fn flush(&mut self) -> Result<(), IndexerError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        match self.file.write_all(&self.buf) {
            Ok(()) => {
                self.written += self.buf.len() as u64;
                self.buf.clear();
                Ok(())
            }
            Err(e) => {
                self.buf.clear();
                if let Err(cut) = self.file.set_len(self.written) {
                    tracing::error!(error = %cut, "could not cut a failed write back off the file");
                }
                Err(e.into())
            }
        }
    }
}

/// `2xx`, `3xx`, ...; `none` when no response came.
pub fn status_class(status: u16) -> String {
    match status {
        100..=599 => format!("{}xx", status / 100),
        _ => "none".to_string(),
    }
}

/// Adds pages to the report's counters: summed by counter, one round trip for them all
/// (a batch of 64 pages made ~5 Redis round trips a page, one a counter).
pub async fn count_pages<'a>(
    state: &dyn State,
    pages: impl IntoIterator<Item = &'a PageRecord>,
) -> Result<(), CoreError> {
    let mut sums: std::collections::BTreeMap<Counter, i64> = Default::default();
    for page in pages {
        page_counts(page, &mut |c, n| *sums.entry(c).or_default() += n);
    }
    let sums: Vec<(Counter, i64)> = sums.into_iter().collect();
    if !sums.is_empty() {
        state.count_many(&sums).await?;
    }
    Ok(())
}

/// The page's robots directives and reserved uses, one counter each.
fn policy_counts(page: &PageRecord, add: &mut impl FnMut(Counter, i64)) {
    let r = &page.robots;
    for (on, name) in [
        (r.noindex.is_some(), "noindex"),
        (r.nofollow.is_some(), "nofollow"),
        (r.noarchive.is_some(), "noarchive"),
        (page.usage.search.is_reserved(), "search_reserved"),
        (page.usage.ai_input.is_reserved(), "ai_input_reserved"),
        (page.usage.ai_train.is_reserved(), "ai_train_reserved"),
    ] {
        if on {
            add(Counter::PagesByPolicy(name.to_string()), 1);
        }
    }
}

/// What one page adds to the report's counters, each given to `add`.
fn page_counts(page: &PageRecord, add: &mut impl FnMut(Counter, i64)) {
    add(Counter::Pages, 1);
    add(Counter::PagesByStatus(status_class(page.status)), 1);
    if let Some(e) = &page.error {
        add(Counter::PagesByError(e.kind.clone()), 1);
    }
    if page.redirects.len() > 1 {
        add(Counter::PagesRedirected, 1);
        add(Counter::RedirectHops, page.redirects.len() as i64 - 1);
    }
    if !page.text.is_empty() {
        add(Counter::PagesWithText, 1);
    }
    if let Some(c) = &page.change {
        add(Counter::PagesByChange(c.status.as_str().to_string()), 1);
    }
    match (page.distance, page.similarity) {
        (Some(0), _) => add(Counter::DuplicatesExact, 1),
        (Some(_), _) | (None, Some(_)) => add(Counter::DuplicatesNear, 1),
        (None, None) => {}
    }
    if page.links_dropped > 0 {
        add(Counter::LinksDropped, i64::from(page.links_dropped));
    }
    policy_counts(page, add);
    add(Counter::WireBytes, page.wire_bytes as i64);
    if let Some(r) = &page.render {
        render_counts(r, add);
    }
}

/// A page the render rule picked: why, how its render went, its subrequests.
fn render_counts(r: &trawl_core::render::RenderInfo, add: &mut impl FnMut(Counter, i64)) {
    add(Counter::RenderWanted(r.reason.clone()), 1);
    // A page cut at its deadline whose DOM was read is both rendered and a timeout.
    let error = r.error.as_deref();
    let outcomes = [
        (r.rendered, Counter::RenderRendered),
        (
            error.is_some_and(|e| e.starts_with("timeout")),
            Counter::RenderTimeouts,
        ),
        (
            error.is_some_and(|e| e.starts_with("unavailable")),
            Counter::RenderUnavailable,
        ),
        (
            !r.rendered
                && error
                    .is_some_and(|e| !e.starts_with("unavailable") && !e.starts_with("timeout")),
            Counter::RenderFailed,
        ),
    ];
    for (yes, c) in outcomes {
        if yes {
            add(c, 1);
        }
    }
    if r.requests > 0 {
        add(Counter::RenderRequests, i64::from(r.requests));
    }
    for (why, n) in &r.blocked {
        add(Counter::RenderBlocked(why.clone()), i64::from(*n));
    }
    add(Counter::RenderMs, r.ms as i64);
}

/// Where a page goes once it is in `pages.jsonl`, before its message is acked.
pub enum IndexTarget {
    /// Nowhere: JSON Lines only.
    None,
    /// The embedded runtime's index task, told how far `pages.jsonl` is written: it reads
    /// the pages from the file at its own pace, and the crawl never waits on it.
    Follow(follow::IndexFeed),
    /// The service: chunks embedded and stored before the ack; the full-text index
    /// refreshed every `refresh` and when the worker stops.
    InPlace {
        indexer: Box<trawl_index::Indexer>,
        refresh: Duration,
    },
}

/// Where the writer sends what it wrote besides `pages.jsonl`: the embedded runtime's
/// index task and journal, the cluster's page archive; and, on a re-crawl, what it compares
/// with and where the change events go.
#[derive(Default, Clone)]
pub struct WriterOutputs {
    pub index: Option<follow::IndexFeed>,
    pub journal: Option<Arc<dyn Journal>>,
    pub recrawl: Option<Arc<RecrawlOutputs>>,
    /// Each written page is kept here before its message is acked (the cluster's history
    /// for a later re-crawl; the embedded runtime's journal keeps the same).
    pub archive: Option<Arc<dyn PageArchive>>,
    /// Whether a page handed again after its line was written is written again (the
    /// embedded runtime, whose journal already makes a resume write each page once) or
    /// acknowledged without a second line (the cluster, where a replica killed between
    /// its write and its ack has its batch redelivered).
    pub once: Once,
}

/// How the writer treats a page whose URL already has a line in this crawl (its key in the
/// crawl's seen-set, `written|<url>`, set once the line is flushed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Once {
    /// Every delivery is written.
    #[default]
    Off,
    /// A page already written is skipped; a page written is marked.
    Mark,
    /// A page already written is skipped, and nothing is marked: dead-lettered pages,
    /// whose line must not keep a later successful copy out.
    Check,
}

/// Set once everything the writer does for a page is done (line, index, archive, count).
fn written_key(page: &PageRecord) -> String {
    format!("written|{}", page_key(page))
}

/// What makes a page one record: its URL, and for a page read from an archive the record
/// it came from (an ingest has several captures of one URL, each a document).
fn page_key(page: &PageRecord) -> String {
    match &page.source {
        Some(s) => format!(
            "{}#{}#{}",
            page.url,
            s.file,
            s.record_id.as_deref().or(s.date.as_deref()).unwrap_or("")
        ),
        None => page.url.clone(),
    }
}

/// Set once a page's line is flushed: a delivery handed again before its page was done
/// (a writer killed between its line and its index) redoes the rest, not the line.
fn line_key(page: &PageRecord) -> String {
    format!("line|{}", page_key(page))
}

/// Which of the batch's pages already have their line.
async fn lines_written(
    state: &dyn State,
    outcomes: &[changes::Outcome],
) -> Result<Vec<bool>, IndexerError> {
    let keys: Vec<String> = outcomes.iter().map(|o| line_key(&o.page)).collect();
    Ok(state.seen_contains_many(&keys).await?)
}

/// The batch without the pages already written (acked here, counted as repeated).
async fn drop_written(
    docs: &dyn Queue<Doc>,
    state: &dyn State,
    batch: Vec<trawl_core::queue::Delivery<Doc>>,
    once: Once,
) -> Result<Vec<trawl_core::queue::Delivery<Doc>>, IndexerError> {
    // A page is done when all was done for it; a dead letter, as soon as the page has a
    // line (its letter must not add a second).
    let key = match once {
        Once::Check => line_key,
        Once::Off | Once::Mark => written_key,
    };
    let keys: Vec<String> = batch.iter().map(|d| key(&d.msg.page)).collect();
    let written = state.seen_contains_many(&keys).await?;
    let mut keep = Vec::with_capacity(batch.len());
    let mut repeated = 0;
    for (d, done) in batch.into_iter().zip(written) {
        if done {
            tracing::info!(url = %d.msg.page.url, "page handed again after its line was written: not written twice");
            docs.ack(d.id).await?;
            repeated += 1;
        } else {
            keep.push(d);
        }
    }
    if repeated > 0 {
        state.count(&Counter::PagesRepeated, repeated).await?;
    }
    Ok(keep)
}

/// The write leases a batch holds, under a token of its own (two workers of one process
/// are two writers).
#[derive(Default)]
struct Leases {
    keys: Vec<String>,
    token: String,
}

impl Leases {
    async fn give_back(&self, state: &dyn State) -> Result<(), IndexerError> {
        if !self.keys.is_empty() {
            state.unlease_many(&self.keys, &self.token).await?;
        }
        Ok(())
    }
}

/// What of a pulled batch this writer writes, by `once`: with [`Once::Mark`], its pages
/// leased first, then checked (a page another writer finished meanwhile is seen written,
/// not written again); with [`Once::Check`], only checked; with [`Once::Off`], all of it.
async fn to_write(
    docs: &dyn Queue<Doc>,
    state: &dyn State,
    batch: Vec<trawl_core::queue::Delivery<Doc>>,
    once: Once,
) -> Result<(Vec<trawl_core::queue::Delivery<Doc>>, Leases), IndexerError> {
    let (batch, leases) = match once {
        Once::Off => return Ok((batch, Leases::default())),
        Once::Check => (batch, Leases::default()),
        Once::Mark => {
            let token = uuid::Uuid::new_v4().simple().to_string();
            let (batch, keys) = lease_writes(docs, state, batch, &token).await?;
            (batch, Leases { keys, token })
        }
    };
    Ok((drop_written(docs, state, batch, once).await?, leases))
}

/// How long a page's write lease lasts: longer than a batch takes to write, short enough
/// that a writer killed holding it frees its pages within a delivery or two handed back
/// (a page handed back too often would be dead-lettered).
const WRITE_LEASE: Duration = Duration::from_secs(10);

/// The batch's pages this writer may write now: those whose write lease it took. A page
/// another delivery is writing right now (a redelivery that overtook the first, after a
/// kill or a consumer made again) is handed back for a moment and then found written.
/// Returns the deliveries kept and their lease keys.
async fn lease_writes(
    docs: &dyn Queue<Doc>,
    state: &dyn State,
    batch: Vec<trawl_core::queue::Delivery<Doc>>,
    token: &str,
) -> Result<(Vec<trawl_core::queue::Delivery<Doc>>, Vec<String>), IndexerError> {
    if batch.is_empty() {
        return Ok((batch, Vec::new()));
    }
    // Two copies of a page in one batch (a stage before handed it on twice) would both
    // pass the batch's lease: the later copy waits, and is then found written.
    let mut firsts = std::collections::HashSet::new();
    let mut once = Vec::with_capacity(batch.len());
    for d in batch {
        if firsts.insert(page_key(&d.msg.page)) {
            once.push(d);
        } else {
            docs.nak(d.id, WRITE_LEASE / 2).await?;
        }
    }
    let batch = once;
    let keys: Vec<String> = batch.iter().map(|d| written_key(&d.msg.page)).collect();
    let taken = state
        .lease_many(&keys, WRITE_LEASE.as_millis() as u64, token)
        .await?;
    let mut keep = Vec::with_capacity(batch.len());
    let mut leases = Vec::with_capacity(batch.len());
    for ((d, key), mine) in batch.into_iter().zip(keys).zip(taken) {
        if mine {
            keep.push(d);
            leases.push(key);
        } else {
            tracing::info!(url = %d.msg.page.url, "page being written by another delivery: handed back");
            docs.nak(d.id, WRITE_LEASE / 2).await?;
        }
    }
    Ok((keep, leases))
}

/// A re-crawl's comparison and its events: `changes.jsonl`, then the embedded runtime's
/// webhook task (a channel) or the cluster's `trawl.changed` hop, published before the
/// page's message is acked.
pub struct RecrawlOutputs {
    pub compare: changes::Recrawl,
    pub changes: std::sync::Mutex<JsonlSink>,
    pub notify: Option<tokio::sync::mpsc::Sender<ChangeEvent>>,
    pub publish: Option<Arc<dyn Queue<ChangeEvent>>>,
}

/// The embedded runtime's writer over the hops (one: it owns `pages.jsonl`).
pub fn spawn(
    workers: &mut Workers,
    sink: &Arc<std::sync::Mutex<JsonlSink>>,
    state: &Arc<dyn State>,
    outputs: WriterOutputs,
    hops: &Hops,
    stop: &Shutdown,
) {
    workers.spawn(run_worker(
        hops.docs.clone(),
        sink.clone(),
        state.clone(),
        outputs,
        stop.clone(),
    ));
}

/// Writes documents as they come. One writer per output file. With an index, each page
/// is also handed to the index task before its message is acked; with a journal, each
/// flushed batch is reported with the counters that include it.
pub async fn run_worker(
    docs: Arc<dyn Queue<Doc>>,
    sink: Arc<std::sync::Mutex<JsonlSink>>,
    state: Arc<dyn State>,
    outputs: WriterOutputs,
    stop: impl Into<Shutdown>,
) -> Result<(), IndexerError> {
    let target = outputs.index.map_or(IndexTarget::None, IndexTarget::Follow);
    let side = Side {
        journal: outputs.journal,
        recrawl: outputs.recrawl,
        archive: outputs.archive,
        once: outputs.once,
    };
    write_docs(docs, sink, state, target, side, stop.into()).await?;
    Ok(())
}

/// The indexer service's loop: each batch is written to `pages.jsonl` and into the index
/// (embedded, stored) before any of it is acked, so a replica killed mid-batch loses
/// nothing: the batch comes again and its pages replace what was half written.
pub async fn run_indexing_worker(
    docs: Arc<dyn Queue<Doc>>,
    sink: Arc<std::sync::Mutex<JsonlSink>>,
    state: Arc<dyn State>,
    indexer: trawl_index::Indexer,
    refresh: Duration,
    outputs: WriterOutputs,
    stop: impl Into<Shutdown>,
) -> Result<trawl_index::IndexStats, IndexerError> {
    let target = IndexTarget::InPlace {
        indexer: Box::new(indexer),
        refresh,
    };
    let side = Side {
        journal: outputs.journal,
        recrawl: outputs.recrawl,
        archive: outputs.archive,
        once: outputs.once,
    };
    match write_docs(docs, sink, state, target, side, stop.into()).await? {
        IndexTarget::InPlace { mut indexer, .. } => Ok(indexer.finish().await?),
        _ => Err(IndexerError::IndexStopped),
    }
}

/// What the writer reports to besides its outputs.
#[derive(Default)]
struct Side {
    journal: Option<Arc<dyn Journal>>,
    recrawl: Option<Arc<RecrawlOutputs>>,
    archive: Option<Arc<dyn PageArchive>>,
    once: Once,
}

/// The one write-flush-ack loop: a batch is written and flushed before any ack, so a
/// process killed after the ack cannot take buffered pages with it (a kill between flush
/// and ack writes a page twice).
async fn write_docs(
    docs: Arc<dyn Queue<Doc>>,
    sink: Arc<std::sync::Mutex<JsonlSink>>,
    state: Arc<dyn State>,
    mut target: IndexTarget,
    side: Side,
    mut stop: Shutdown,
) -> Result<IndexTarget, IndexerError> {
    let mut last_refresh = std::time::Instant::now();
    let mut dirty = false;
    // The service waits longer for a batch: each one is a LanceDB commit.
    let wait = match target {
        IndexTarget::InPlace { .. } => Duration::from_millis(500),
        _ => Duration::from_millis(200),
    };
    while let Some(batch) = stop.run_until(docs.pull(64, wait)).await {
        let batch = batch?;
        if batch.is_empty() {
            if let IndexTarget::InPlace { indexer, refresh } = &mut target
                && dirty
                && last_refresh.elapsed() >= *refresh
            {
                indexer.finish().await?;
                dirty = false;
                last_refresh = std::time::Instant::now();
            }
            continue;
        }
        let (batch, leases) = to_write(&*docs, &*state, batch, side.once).await?;
        if batch.is_empty() {
            leases.give_back(&*state).await?;
            continue;
        }
        let ids: Vec<u64> = batch.iter().map(|d| d.id).collect();
        // Kept alive while it is written: a batch slowed past the ack wait (a loaded
        // machine, a slow index commit) would otherwise be handed out again and written twice.
        let work = async {
            let outcomes = compare(&side, batch.into_iter().map(|d| d.msg.page)).await?;
            let lined = match side.once {
                Once::Mark => lines_written(&*state, &outcomes).await?,
                Once::Off | Once::Check => vec![false; outcomes.len()],
            };
            let (starts, end, changes_end) = write_batch(&sink, &side, &outcomes, &lined)?;
            if side.once == Once::Mark {
                // One step for the batch, right after the flush: the window in which a
                // kill leaves a line its redelivery cannot see is one round trip.
                let marks = outcomes.iter().zip(&lined).filter(|(_, l)| !**l);
                let marks = marks.map(|(o, _)| (line_key(&o.page), None)).collect();
                state.admit_many(marks).await?;
            }
            if let IndexTarget::InPlace { indexer, .. } = &mut target {
                for o in &outcomes {
                    match changes::IndexAction::of(&o.page) {
                        changes::IndexAction::Add => {
                            indexer.add_page(&o.page).await?;
                        }
                        changes::IndexAction::Remove(c) => {
                            indexer.remove_page(&c)?;
                        }
                        changes::IndexAction::Keep => {}
                    }
                }
                indexer.flush().await?;
                dirty = true;
            }
            if let Some(a) = &side.archive {
                let pages: Vec<&PageRecord> = outcomes.iter().map(|o| &o.page).collect();
                a.keep(&pages).await?;
            }
            count_pages(&*state, outcomes.iter().map(|o| &o.page)).await?;
            if let Some(q) = side.recrawl.as_ref().and_then(|r| r.publish.as_ref()) {
                for e in outcomes.iter().filter_map(|o| o.event.as_ref()) {
                    q.publish(e.clone()).await?;
                }
            }
            // Last: a page marked done has its line, index rows, archive, counts and events.
            if side.once == Once::Mark {
                let marks = outcomes.iter().map(|o| (written_key(&o.page), None));
                state.admit_many(marks.collect()).await?;
            }
            if let Some(j) = &side.journal {
                let pages: Vec<(u64, &PageRecord)> = starts
                    .iter()
                    .copied()
                    .zip(outcomes.iter().map(|o| &o.page))
                    .collect();
                j.written(&pages, end, state.counters().await?, changes_end)?;
            }
            Ok::<_, IndexerError>((outcomes, starts, end))
        };
        let (outcomes, _, end) = trawl_core::queue::keep_alive(&*docs, &ids, work).await?;
        for (o, id) in outcomes.into_iter().zip(ids) {
            if let Some(r) = &side.recrawl
                && let (Some(tx), Some(e)) = (&r.notify, o.event)
            {
                // Never waits: an event the notifier's bounded channel cannot take now
                // (a receiver slower than the crawl), or a closed notifier, loses no
                // event; it is in changes.jsonl, where the notifier reads it back.
                let _ = tx.try_send(e);
            }
            docs.ack(id).await?;
        }
        leases.give_back(&*state).await?;
        if let IndexTarget::Follow(feed) = &target {
            feed.written(end);
        }
    }
    sink.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    Ok(target)
}

/// Each page compared with the earlier crawl (on a re-crawl), else as it came.
async fn compare(
    side: &Side,
    pages: impl Iterator<Item = PageRecord>,
) -> Result<Vec<changes::Outcome>, IndexerError> {
    let now = chrono::Utc::now();
    let mut out = Vec::new();
    for page in pages {
        out.push(match &side.recrawl {
            Some(r) => r.compare.classify(page, now).await?,
            None => changes::Outcome { page, event: None },
        });
    }
    Ok(out)
}

/// Writes and flushes the batch's lines and events (not those of pages `lined` says an
/// earlier delivery wrote); returns where each line starts, the file's end, and the end of
/// `changes.jsonl` when there is one.
fn write_batch(
    sink: &std::sync::Mutex<JsonlSink>,
    side: &Side,
    outcomes: &[changes::Outcome],
    lined: &[bool],
) -> Result<(Vec<u64>, u64, Option<u64>), IndexerError> {
    let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
    let mut starts = Vec::with_capacity(outcomes.len());
    for (o, done) in outcomes.iter().zip(lined) {
        // A line written by an earlier delivery: where the file ends now stands for it.
        starts.push(if *done { s.len() } else { s.write(&o.page)? });
    }
    s.flush()?;
    let changes_end = match &side.recrawl {
        Some(r) => {
            let mut c = r.changes.lock().unwrap_or_else(|e| e.into_inner());
            let fresh = outcomes.iter().zip(lined).filter(|(_, l)| !**l);
            for e in fresh.filter_map(|(o, _)| o.event.as_ref()) {
                c.write(e)?;
            }
            c.flush()?;
            Some(c.len())
        }
        None => None,
    };
    Ok((starts, s.len(), changes_end))
}

/// What the indexer service keeps for later re-crawls and, on a re-crawl, compares with.
pub struct ServiceHistory {
    /// This crawl's pages, kept for a later `--since` (none with `--no-history`).
    pub archive: Option<Arc<dyn PageArchive>>,
    /// URLs this crawl admitted only by its end-of-crawl check.
    pub unlinked: Arc<dyn Unlinked>,
    /// A re-crawl: the earlier crawl and its id.
    pub since: Option<(Arc<dyn History>, String)>,
}

/// The indexer as one stage of a cluster crawl: its own `pages-<replica>-<pid>.jsonl` in
/// `out`, appended across restarts, and with `index_uri` the LanceDB index there, cut as
/// the crawl spec says. Every written page is kept in `history.archive`; on a re-crawl each
/// page is compared first, its events go to `changes-<replica>-<pid>.jsonl` and the
/// `changed` hop.
///
/// `dead_pages` (the cluster's dead-lettered pages of this crawl, as records marked
/// `dead_lettered`) are written to the same `pages-*.jsonl` by a second loop, so a page a
/// stage gave up on still has its line.
pub async fn serve(
    ctx: StageContext,
    history: ServiceHistory,
    dead_pages: Option<Arc<dyn Queue<Doc>>>,
) -> StageResult {
    let out = &ctx.process.out;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let name = format!(
        "{}-{}",
        ctx.process.instance_name(Stage::Indexer.name()),
        std::process::id()
    );
    let path = out.join(format!("pages-{name}.jsonl"));
    let sink = Arc::new(std::sync::Mutex::new(JsonlSink::append(&path)?));
    let recrawl = match history.since {
        Some((earlier, since)) => Some(Arc::new(RecrawlOutputs {
            compare: changes::Recrawl {
                history: earlier,
                crawl: ctx.spec.crawl.clone(),
                since,
                schedule: changes::Schedule::from_settings(&ctx.spec.settings),
                unlinked: history.unlinked,
            },
            changes: std::sync::Mutex::new(JsonlSink::append(
                &out.join(format!("changes-{name}.jsonl")),
            )?),
            notify: None,
            publish: Some(ctx.hops.changed.clone()),
        })),
        None => None,
    };
    let outputs = WriterOutputs {
        recrawl,
        archive: history.archive,
        once: Once::Mark,
        ..WriterOutputs::default()
    };
    let docs = ctx.hops.docs.clone();
    let state = ctx.state.clone();
    let dead = {
        let (sink, state, stop) = (sink.clone(), state.clone(), ctx.shutdown.clone());
        async move {
            let Some(q) = dead_pages else {
                return Ok(());
            };
            // A failure here (NATS between two pulls, say) is retried in place: the
            // letters wait in their stream, and the pages loop is not cut mid-batch.
            loop {
                let (q, sink, state) = (q.clone(), sink.clone(), state.clone());
                let outputs = WriterOutputs {
                    once: Once::Check,
                    ..WriterOutputs::default()
                };
                match run_worker(q, sink, state, outputs, stop.clone()).await {
                    Ok(()) => return Ok(()),
                    Err(e) => tracing::warn!("dead-lettered pages: {e}; trying again in 5 s"),
                }
                let mut stop = stop.clone();
                if stop
                    .run_until(tokio::time::sleep(Duration::from_secs(5)))
                    .await
                    .is_none()
                {
                    return Ok::<(), IndexerError>(());
                }
            }
        }
    };
    let index = match &ctx.process.index_uri {
        Some(uri) => Some((uri, open_index(&ctx, uri).await?)),
        None => None,
    };
    let pages = async {
        match index {
            Some((uri, indexer)) => {
                tracing::info!(
                    index = %uri,
                    embed = ctx.process.embed,
                    device = indexer.embedder().map_or("none", |e| e.device_name()),
                    "indexing into LanceDB"
                );
                ctx.set_ready();
                let refresh = Duration::from_secs(60);
                run_indexing_worker(
                    docs,
                    sink.clone(),
                    state,
                    indexer,
                    refresh,
                    outputs,
                    ctx.shutdown.clone(),
                )
                .await
                .map(|s| tracing::info!(pages = s.pages, chunks = s.chunks, "index written"))
            }
            None => {
                ctx.set_ready();
                run_worker(docs, sink.clone(), state, outputs, ctx.shutdown.clone()).await
            }
        }
    };
    let r = tokio::try_join!(pages, dead).map(|_| ());
    sink.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    Ok(r?)
}

/// The index at `uri`, opened before the stage takes a page. A model that is missing or
/// does not load, or index settings that cannot work, are [fatal](StageError::fatal) (the
/// error says how to fetch the model): opened again, they would fail the same way. The
/// store's errors (a bucket away) are not.
async fn open_index(ctx: &StageContext, uri: &str) -> Result<trawl_index::Indexer, StageError> {
    let mut opts = trawl_index::IndexOptions::for_process(
        uri.to_string(),
        &ctx.spec.index,
        ctx.process.embed,
        ctx.process.model_dir.clone(),
    );
    opts.precision = ctx
        .process
        .embed_precision
        .parse()
        .map_err(StageError::fatal)?;
    trawl_index::Indexer::open(opts).await.map_err(|e| match e {
        trawl_index::IndexError::Store(_) => StageError::transient(e),
        e => StageError::fatal(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's counters are what its pages' counts add up to, in one step.
    #[tokio::test]
    async fn a_batch_is_counted_once_for_all_its_pages() {
        use trawl_core::state::{MemoryState, WorkTracker};
        let ok = |bytes| PageRecord {
            status: 200,
            text: "t".into(),
            wire_bytes: bytes,
            ..Default::default()
        };
        let failed = PageRecord {
            status: 0,
            error: Some(trawl_core::FetchFailure {
                kind: "timeout".into(),
                message: "m".into(),
            }),
            ..Default::default()
        };
        let pages = [ok(100), ok(50), failed];
        let state = MemoryState::new(10, 1, WorkTracker::default());
        count_pages(&state, &pages).await.unwrap();
        count_pages(&state, &pages[..1]).await.unwrap();
        let c = state.counters().await.unwrap();
        let get = |k: Counter| c.get(k.key().as_ref()).copied().unwrap_or(0);
        assert_eq!(get(Counter::Pages), 4);
        assert_eq!(get(Counter::PagesByStatus("2xx".into())), 3);
        assert_eq!(get(Counter::PagesByStatus("none".into())), 1);
        assert_eq!(get(Counter::PagesByError("timeout".into())), 1);
        assert_eq!(get(Counter::PagesWithText), 3);
        assert_eq!(get(Counter::WireBytes), 250);
        count_pages(&state, std::iter::empty()).await.unwrap();
        assert_eq!(state.counters().await.unwrap(), c, "no pages, no change");
    }

    #[test]
    fn status_classes() {
        assert_eq!(status_class(200), "2xx");
        assert_eq!(status_class(404), "4xx");
        assert_eq!(status_class(0), "none");
    }
}
