//! The embedded runtime's index task: it follows `pages.jsonl` instead of taking pages
//! from the writer, so the crawl never waits on the embedder. The writer only says how far
//! the file is whole ([`IndexFeed`]); the task reads the lines from where the index stands,
//! one at a time, and the backlog lives in the file, not in memory. A crawl finishes at
//! crawling speed and indexing goes on behind it, its progress in [`IndexProgress`].

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use trawl_core::PageRecord;
use trawl_core::journal::Journal;

use crate::{IndexItem, IndexerError};

/// The writer's side: how far `pages.jsonl` is written and flushed.
#[derive(Clone)]
pub struct IndexFeed(Arc<watch::Sender<u64>>);

impl IndexFeed {
    /// A feed whose file is whole up to `written`, and the task's end of it.
    pub fn new(written: u64) -> (IndexFeed, watch::Receiver<u64>) {
        let (tx, rx) = watch::channel(written);
        (IndexFeed(Arc::new(tx)), rx)
    }

    /// The file is whole up to `end`.
    pub fn written(&self, end: u64) {
        self.0.send_if_modified(|at| {
            let moved = end > *at;
            *at = (*at).max(end);
            moved
        });
    }
}

/// How far the index task is, for the progress display.
#[derive(Debug, Default)]
pub struct IndexProgress {
    /// Bytes of `pages.jsonl` written, and stored in the index.
    pub written: AtomicU64,
    pub indexed: AtomicU64,
    /// Where the task started (a resumed crawl's index was that far already).
    pub from: AtomicU64,
    pub pages: AtomicU64,
    pub chunks: AtomicU64,
    /// The recent rate of chunks stored, for the ETA.
    rate: std::sync::Mutex<ChunkRate>,
}

/// Chunks stored a second over about the last two minutes. The first pages (a model warming
/// up, pages whose chunks are all repeats and need no vector) say little about the rest;
/// the embedder stores its chunks in batches and the index pauses while it writes, so a
/// shorter window (a log line every 10 s sees none, or two) swings the ETA by several times
/// from one line to the next.
#[derive(Debug, Default)]
struct ChunkRate {
    /// (when, chunks stored then), oldest first; the oldest is the window's start.
    samples: std::collections::VecDeque<(Duration, u64)>,
}

impl ChunkRate {
    const WINDOW: Duration = Duration::from_secs(120);

    fn sample(&mut self, elapsed: Duration, chunks: u64) -> Option<f64> {
        self.samples.push_back((elapsed, chunks));
        // The start is the newest sample at least a window old (or the oldest there is).
        while self
            .samples
            .get(1)
            .is_some_and(|(at, _)| elapsed.saturating_sub(*at) >= Self::WINDOW)
        {
            self.samples.pop_front();
        }
        // With one reading, the rate since the start (no chunks at time zero).
        let (at, then) = match self.samples.len() {
            1 => (Duration::ZERO, 0),
            _ => *self.samples.front()?,
        };
        let dt = elapsed.saturating_sub(at).as_secs_f64();
        (dt >= 1.0).then(|| chunks.saturating_sub(then) as f64 / dt)
    }
}

impl IndexProgress {
    /// One line on the index: pages and chunks stored, the backlog, and once the rate is
    /// known, when it will be through. The ETA counts chunks, the embedder's unit of work:
    /// the bytes of `pages.jsonl` left, at the chunks a byte so far, over the recent rate.
    pub fn line(&self, elapsed: Duration) -> String {
        let written = self.written.load(Ordering::Relaxed);
        let indexed = self.indexed.load(Ordering::Relaxed);
        let from = self.from.load(Ordering::Relaxed);
        let chunks = self.chunks.load(Ordering::Relaxed);
        let pages = self.pages.load(Ordering::Relaxed);
        let secs = elapsed.as_secs_f64().max(0.001);
        let left = written.saturating_sub(indexed);
        let done = indexed.saturating_sub(from);
        let pct = if written > from {
            100.0 * done as f64 / (written - from) as f64
        } else {
            100.0
        };
        let rate = self
            .rate
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sample(elapsed, chunks);
        let eta = match rate {
            _ if left == 0 => "caught up".to_string(),
            Some(r) if r > 0.0 && done > 0 && chunks > 0 => {
                let chunks_left = left as f64 * chunks as f64 / done as f64;
                format!("ETA {}", clock(Duration::from_secs_f64(chunks_left / r)))
            }
            _ => "ETA unknown".to_string(),
        };
        format!(
            "index: {pages} pages · {chunks} chunks ({:.1} chunks/s) · {pct:.0}% of pages.jsonl · {eta}",
            rate.unwrap_or(chunks as f64 / secs)
        )
    }
}

/// Writes the chunks gathered so far and brings the full-text index up to date.
async fn make_searchable(indexer: &mut trawl_index::Indexer) -> Result<(), IndexerError> {
    indexer.flush().await?;
    // No row count reaches usize::MAX: only the full-text index is built here.
    indexer.store().build_indexes(usize::MAX).await?;
    Ok(())
}

/// `1h02m`, `3m10s`, `42s`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Indexes the lines of `path` from `from` on, as the feed says they are written, until the
/// writer is gone and the file is read through; then writes the last chunks and builds the
/// search indexes. With a journal, reports how far the index stands whenever nothing added
/// is unwritten. With `refresh`, what was added is written and made searchable (the
/// full-text index brought up to date) at least that often while the task runs: the
/// preview index ([`trawl_index::preview`]) does this; the vector index waits for its end.
pub async fn follow_pages(
    mut indexer: trawl_index::Indexer,
    path: PathBuf,
    from: u64,
    mut written: watch::Receiver<u64>,
    journal: Option<Arc<dyn Journal>>,
    progress: Arc<IndexProgress>,
    refresh: Option<Duration>,
) -> Result<trawl_index::IndexStats, IndexerError> {
    progress.from.store(from, Ordering::Relaxed);
    progress.indexed.store(from, Ordering::Relaxed);
    let mut reader = BufReader::new(std::fs::File::open(&path)?);
    reader.seek(SeekFrom::Start(from))?;
    let mut at = from;
    let mut line = Vec::new();
    let mut reported = None;
    let mut refreshed = Instant::now();
    let mut unsearchable = false;
    loop {
        let end = *written.borrow_and_update();
        progress.written.store(end, Ordering::Relaxed);
        while at < end {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 || line.last() != Some(&b'\n') {
                return Err(IndexerError::Io(std::io::Error::other(format!(
                    "{}: ends at byte {} before the {end} written",
                    path.display(),
                    at + n as u64
                ))));
            }
            at += n as u64;
            let page: PageRecord = serde_json::from_slice(&line)?;
            unsearchable = true;
            match IndexItem::of_line(page, at) {
                Some(IndexItem::Add(page, _)) => {
                    indexer.add_page(&page).await?;
                }
                Some(IndexItem::Remove(canonical, _)) => {
                    indexer.remove_page(&canonical)?;
                }
                None => {}
            }
            let s = indexer.stats();
            progress.pages.store(s.pages, Ordering::Relaxed);
            progress.chunks.store(s.chunks, Ordering::Relaxed);
            progress.indexed.store(at, Ordering::Relaxed);
            // What the writer has added since this pass began: without it the display
            // reads a pass over half the file as the whole, "99%, 15 s left", then jumps.
            progress
                .written
                .store((*written.borrow()).max(end), Ordering::Relaxed);
            if let Some(j) = &journal
                && indexer.is_flushed()
            {
                j.indexed(at)?;
                reported = Some(at);
            }
            if refresh.is_some_and(|r| unsearchable && refreshed.elapsed() >= r) {
                make_searchable(&mut indexer).await?;
                (refreshed, unsearchable) = (Instant::now(), false);
            }
        }
        let changed = match refresh {
            // Caught up with pages not yet searchable: wait for more only until they are due.
            Some(r) if unsearchable => {
                let due = r.saturating_sub(refreshed.elapsed());
                match tokio::time::timeout(due, written.changed()).await {
                    Ok(c) => c,
                    Err(_) => {
                        make_searchable(&mut indexer).await?;
                        (refreshed, unsearchable) = (Instant::now(), false);
                        continue;
                    }
                }
            }
            _ => written.changed().await,
        };
        if changed.is_err() {
            // The writer is gone: whatever it sent last is the whole file.
            if *written.borrow() <= at {
                break;
            }
        }
    }
    tracing::debug!("index: writing the last chunks and building the search indexes");
    let stats = indexer.finish().await?;
    progress.pages.store(stats.pages, Ordering::Relaxed);
    progress.chunks.store(stats.chunks, Ordering::Relaxed);
    if let Some(j) = &journal
        && reported != Some(at)
    {
        j.indexed(at)?;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fast start (pages whose chunks needed no vector) then a steady embedder: the ETA
    /// follows the recent rate, not the rate since the start.
    #[test]
    fn the_eta_follows_the_recent_chunk_rate() {
        let p = IndexProgress::default();
        let set = |written: u64, indexed: u64, chunks: u64| {
            p.written.store(written, Ordering::Relaxed);
            p.indexed.store(indexed, Ordering::Relaxed);
            p.chunks.store(chunks, Ordering::Relaxed);
        };
        // First second: 1,000 chunks (1 MB of pages) stored.
        set(2_000_000, 1_000_000, 1_000);
        p.line(Duration::from_secs(1));
        // Then 10 chunks a second (10 KB of pages) for a minute, pages.jsonl growing.
        let mut line = String::new();
        for s in 2..=60u64 {
            let indexed = 1_000_000 + (s - 1) * 10_000;
            set(2_000_000 + s * 10_000, indexed, 1_000 + (s - 1) * 10);
            line = p.line(Duration::from_secs(s));
        }
        // 1.01 MB left at a chunk a KB: about 1,010 chunks at 10 a second, 101 s. The rate
        // since the start (1,590 chunks in 60 s) would say 38 s.
        let eta = line.rsplit("ETA ").next().unwrap();
        let (m, s) = eta.trim_end_matches('s').split_once('m').expect("minutes");
        let secs: u64 = m.parse::<u64>().unwrap() * 60 + s.parse::<u64>().unwrap();
        assert!((70..=110).contains(&secs), "{line}");
    }

    /// The embedder stores its chunks in batches: a line every 10 s sees none, or two. The
    /// ETA stays put from one line to the next rather than jumping with each batch.
    #[test]
    fn batches_of_chunks_do_not_swing_the_eta() {
        let mut rate = ChunkRate::default();
        let mut seen = Vec::new();
        for step in 0..=30u64 {
            // 4,000 chunks every other 10 s: 200 a second on average.
            let chunks = step.div_ceil(2) * 4_000;
            if let Some(r) = rate.sample(Duration::from_secs(step * 10), chunks)
                && step >= 6
            {
                seen.push(r);
            }
        }
        let (lo, hi) = seen
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        assert!(lo >= 150.0 && hi <= 250.0, "{seen:?}");
    }

    /// Waits at most `max` for the index to pass `offset`.
    async fn wait_indexed(progress: &IndexProgress, offset: u64, max: Duration) -> bool {
        let start = Instant::now();
        while progress.indexed.load(Ordering::Relaxed) < offset {
            if start.elapsed() >= max {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    fn page(i: usize) -> PageRecord {
        PageRecord {
            url: format!("http://a.test/{i}"),
            final_url: format!("http://a.test/{i}"),
            status: 200,
            title: Some(format!("Page {i}")),
            text: format!("Page number {i} is about the river otter{i} and its habits. ").repeat(8),
            ..Default::default()
        }
    }

    type Task = tokio::task::JoinHandle<Result<trawl_index::IndexStats, IndexerError>>;

    /// A text-only index at `dir/name` and its task following `dir/pages.jsonl` from the
    /// start: the file's writer, the index's URI, the feed, the progress and the task.
    async fn follow(
        dir: &std::path::Path,
        name: &str,
        refresh: Option<Duration>,
    ) -> (
        crate::JsonlSink,
        String,
        IndexFeed,
        Arc<IndexProgress>,
        Task,
    ) {
        let path = dir.join("pages.jsonl");
        let sink = crate::JsonlSink::create(&path).unwrap();
        let uri = dir.join(name).to_string_lossy().to_string();
        let mut opts = trawl_index::IndexOptions::new(uri.clone());
        opts.embed = false;
        let ix = trawl_index::Indexer::open(opts).await.unwrap();
        let (feed, rx) = IndexFeed::new(0);
        let progress = Arc::new(IndexProgress::default());
        let task = tokio::spawn(follow_pages(
            ix,
            path,
            0,
            rx,
            None,
            progress.clone(),
            refresh,
        ));
        (sink, uri, feed, progress, task)
    }

    /// The task reads what the writer says is written, as it is written, never past it,
    /// and reads the file through once the writer is gone; the pages are then searchable.
    #[tokio::test]
    async fn the_task_follows_the_file_and_reads_it_through() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, uri, feed, progress, task) = follow(dir.path(), "index", None).await;
        for batch in 0..3 {
            for i in 0..10 {
                sink.write(&page(batch * 10 + i)).unwrap();
            }
            sink.flush().unwrap();
            feed.written(sink.len());
        }
        let through = sink.len();
        assert!(wait_indexed(&progress, through, Duration::from_secs(60)).await);
        // Written but not announced (a batch the writer has not finished): not read.
        sink.write(&page(30)).unwrap();
        sink.flush().unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(progress.indexed.load(Ordering::Relaxed), through);
        feed.written(sink.len());
        drop(feed);
        let stats = task.await.unwrap().unwrap();
        assert_eq!(stats.pages, 31);
        assert_eq!(progress.indexed.load(Ordering::Relaxed), sink.len());
        assert!(progress.line(Duration::from_secs(1)).ends_with("caught up"));
        let store = trawl_index::Store::open_existing(&uri).await.unwrap();
        let hits = trawl_index::search(&store, None, "otter30", 3, trawl_index::Mode::Text)
            .await
            .unwrap();
        assert_eq!(
            hits.first().map(|h| h.url.as_str()),
            Some("http://a.test/30")
        );
    }

    /// With a refresh period the pages are searchable while the task still runs: the
    /// preview index answers full-text queries before the crawl (and its vectors) are done.
    #[tokio::test]
    async fn a_refreshed_task_is_searchable_before_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let refresh = Some(Duration::from_millis(100));
        let (mut sink, uri, feed, _progress, task) =
            follow(dir.path(), "index-preview", refresh).await;
        // Opened for each query, as `trawl search` does.
        let find = async |word: &str| {
            let store = trawl_index::Store::open_existing(&uri).await.unwrap();
            let hits = trawl_index::search(&store, None, word, 3, trawl_index::Mode::Text).await;
            hits.ok()
                .and_then(|h| h.first().map(|h| h.url.clone()))
                .unwrap_or_default()
        };
        for round in 0..2 {
            for i in 0..5 {
                sink.write(&page(round * 5 + i)).unwrap();
            }
            sink.flush().unwrap();
            feed.written(sink.len());
            let want = format!("http://a.test/{}", round * 5 + 4);
            let start = Instant::now();
            while find(&format!("otter{}", round * 5 + 4)).await != want {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "round {round}: not searchable while the task runs"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(!task.is_finished());
        }
        drop(feed);
        assert_eq!(task.await.unwrap().unwrap().pages, 10);
    }

    #[test]
    fn clocks_read_as_people_write_them() {
        assert_eq!(clock(Duration::from_secs(42)), "42s");
        assert_eq!(clock(Duration::from_secs(190)), "3m10s");
        assert_eq!(clock(Duration::from_secs(3720)), "1h02m");
    }

    #[test]
    fn the_line_says_how_far_and_when_through() {
        let p = IndexProgress::default();
        p.written.store(1000, Ordering::Relaxed);
        p.indexed.store(250, Ordering::Relaxed);
        p.pages.store(5, Ordering::Relaxed);
        p.chunks.store(40, Ordering::Relaxed);
        // 250 bytes in 10 s: the 750 left take 30 s.
        let l = p.line(Duration::from_secs(10));
        assert!(l.contains("5 pages · 40 chunks (4.0 chunks/s)"), "{l}");
        assert!(l.contains("25% of pages.jsonl · ETA 30s"), "{l}");
        p.indexed.store(1000, Ordering::Relaxed);
        assert!(p.line(Duration::from_secs(10)).ends_with("caught up"));
    }
}
