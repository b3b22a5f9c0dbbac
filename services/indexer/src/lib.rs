//! The indexer stage: the end of the pipeline, where documents become the corpus.
//!
//! It writes every record to `pages.jsonl`, keeps the report's per-page counters, and hands
//! pages to the knowledge base (`trawl-index`: chunks, embeddings, LanceDB).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_core::{CoreError, Doc, PageRecord};

/// Counter names in shared state.
pub mod counters {
    pub const PAGES: &str = "pages.total";
    pub const STATUS_PREFIX: &str = "pages.status.";
    pub const ERROR_PREFIX: &str = "pages.error.";
    pub const REDIRECTED: &str = "pages.redirected";
    pub const REDIRECT_HOPS: &str = "pages.redirect_hops";
    pub const WITH_TEXT: &str = "pages.with_text";
    pub const BYTES: &str = "pages.wire_bytes";
    pub const DUP_EXACT: &str = "pages.duplicate.exact";
    pub const DUP_NEAR: &str = "pages.duplicate.near";
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
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

/// The embedded runtime's index task: pages from the writer go into the knowledge base;
/// when the channel closes, what is queued is written and the search indexes are built.
/// Logs its progress every 10 seconds.
pub async fn run_index(
    mut indexer: trawl_index::Indexer,
    mut pages: mpsc::Receiver<PageRecord>,
) -> Result<trawl_index::IndexStats, IndexError> {
    let mut last = std::time::Instant::now();
    while let Some(p) = pages.recv().await {
        indexer.add_page(&p).await?;
        if last.elapsed() >= Duration::from_secs(10) {
            let s = indexer.stats();
            tracing::info!(
                pages = s.pages,
                chunks = s.chunks,
                aliases = s.aliases_exact + s.aliases_near,
                queued = pages.len(),
                "indexing"
            );
            last = std::time::Instant::now();
        }
    }
    tracing::info!("index: writing the last chunks and building the search indexes");
    Ok(indexer.finish().await?)
}

/// `pages.jsonl`: one JSON object per line, appended as documents arrive.
pub struct JsonlSink {
    out: BufWriter<File>,
}

impl JsonlSink {
    /// Opens `path` for appending (created if missing): a restarted writer keeps what the
    /// file already holds.
    pub fn append(path: &Path) -> Result<Self, IndexError> {
        Ok(Self {
            out: BufWriter::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
        })
    }

    pub fn create(path: &Path) -> Result<Self, IndexError> {
        Ok(Self {
            out: BufWriter::new(File::create(path)?),
        })
    }

    pub fn write(&mut self, page: &PageRecord) -> Result<(), IndexError> {
        serde_json::to_writer(&mut self.out, page)?;
        self.out.write_all(b"\n")?;
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), IndexError> {
        self.out.flush()?;
        Ok(())
    }
}

/// `2xx`, `3xx`, ...; `none` when no response came.
pub fn status_class(status: u16) -> String {
    match status {
        100..=599 => format!("{}xx", status / 100),
        _ => "none".to_string(),
    }
}

/// Adds one page to the report's counters.
pub async fn count_page(state: &dyn State, page: &PageRecord) -> Result<(), CoreError> {
    state.incr(counters::PAGES, 1).await?;
    state
        .incr(
            &format!("{}{}", counters::STATUS_PREFIX, status_class(page.status)),
            1,
        )
        .await?;
    if let Some(e) = &page.error {
        state
            .incr(&format!("{}{}", counters::ERROR_PREFIX, e.kind), 1)
            .await?;
    }
    if page.redirects.len() > 1 {
        state.incr(counters::REDIRECTED, 1).await?;
        state
            .incr(counters::REDIRECT_HOPS, page.redirects.len() as i64 - 1)
            .await?;
    }
    if !page.text.is_empty() {
        state.incr(counters::WITH_TEXT, 1).await?;
    }
    match page.distance {
        Some(0) => {
            state.incr(counters::DUP_EXACT, 1).await?;
        }
        Some(_) => {
            state.incr(counters::DUP_NEAR, 1).await?;
        }
        None => {}
    }
    state.incr(counters::BYTES, page.wire_bytes as i64).await?;
    Ok(())
}

/// Writes documents as they come. One writer per output file. With `index`, each page is
/// also handed to the index task before its message is acked (a full channel slows the
/// crawl down to the embedding speed instead of piling pages up in memory).
pub async fn run_worker(
    docs: Arc<dyn Queue<Doc>>,
    sink: Arc<std::sync::Mutex<JsonlSink>>,
    state: Arc<dyn State>,
    index: Option<mpsc::Sender<PageRecord>>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), IndexError> {
    loop {
        if *stop.borrow() {
            break;
        }
        let batch = tokio::select! {
            b = docs.pull(64, Duration::from_millis(200)) => b?,
            _ = stop.changed() => continue,
        };
        if batch.is_empty() {
            continue;
        }
        // Written and flushed before any ack: a process killed after the ack must not take
        // buffered pages with it (a kill between flush and ack writes a page twice; the
        // page's id makes that copy easy to drop downstream).
        {
            let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
            for d in &batch {
                s.write(&d.msg.page)?;
            }
            s.flush()?;
        }
        for d in batch {
            count_page(&*state, &d.msg.page).await?;
            if let Some(tx) = &index
                && trawl_index::indexer::wants(&d.msg.page)
            {
                tx.send(d.msg.page)
                    .await
                    .map_err(|_| IndexError::IndexStopped)?;
            }
            docs.ack(d.id).await?;
        }
    }
    sink.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    Ok(())
}

/// The indexer service's loop: each batch is written to `pages.jsonl` and into the index
/// (embedded, stored) before any of it is acked, so a replica killed mid-batch loses
/// nothing: the batch comes again and its pages replace what was half written. The
/// full-text index is refreshed every `refresh` and when the worker stops.
pub async fn run_indexing_worker(
    docs: Arc<dyn Queue<Doc>>,
    sink: Arc<std::sync::Mutex<JsonlSink>>,
    state: Arc<dyn State>,
    mut indexer: trawl_index::Indexer,
    refresh: Duration,
    mut stop: watch::Receiver<bool>,
) -> Result<trawl_index::IndexStats, IndexError> {
    let mut last_refresh = std::time::Instant::now();
    let mut dirty = false;
    loop {
        if *stop.borrow() {
            break;
        }
        let batch = tokio::select! {
            b = docs.pull(64, Duration::from_millis(500)) => b?,
            _ = stop.changed() => continue,
        };
        if batch.is_empty() {
            if dirty && last_refresh.elapsed() >= refresh {
                indexer.finish().await?;
                dirty = false;
                last_refresh = std::time::Instant::now();
            }
            continue;
        }
        {
            let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
            for d in &batch {
                s.write(&d.msg.page)?;
            }
            s.flush()?;
        }
        for d in &batch {
            indexer.add_page(&d.msg.page).await?;
        }
        indexer.flush().await?;
        dirty = true;
        for d in batch {
            count_page(&*state, &d.msg.page).await?;
            docs.ack(d.id).await?;
        }
    }
    sink.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    Ok(indexer.finish().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classes() {
        assert_eq!(status_class(200), "2xx");
        assert_eq!(status_class(404), "4xx");
        assert_eq!(status_class(0), "none");
    }
}
