//! The embedded crawl's index tasks: the index itself, following `pages.jsonl` behind the
//! writer ([`trawl_indexer::follow`]), and, while its vectors are being computed, the
//! full-text preview beside it ([`trawl_index::preview`]), which keeps up with the crawl
//! and is removed once the index is whole.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinHandle;
use trawl_index::{IndexOptions, IndexStats};
use trawl_indexer::IndexerError;
use trawl_indexer::follow::{IndexFeed, IndexProgress, follow_pages};
use trawl_store::journal::Journal;
use trawl_store::resume::Resume;

/// How often the preview's new pages are made searchable: each refresh writes a LanceDB
/// version and updates the full-text index, so not after every page.
const PREVIEW_REFRESH: Duration = Duration::from_secs(10);

/// The index task's handle: its stats once it has read `pages.jsonl` through.
pub(crate) type IndexJoin = JoinHandle<Result<IndexStats, IndexerError>>;

/// The index task following `pages.jsonl`, and the preview's.
pub(crate) struct IndexTask {
    pub feed: IndexFeed,
    pub task: IndexJoin,
    pub progress: Arc<IndexProgress>,
    pub preview: Option<Preview>,
}

/// The full-text preview's task and directory.
pub(crate) struct Preview {
    dir: PathBuf,
    task: IndexJoin,
}

/// Opens the index and starts its task where the index stands: a resumed crawl's pages
/// written but not yet indexed at the stop are read again from the file. An index that
/// embeds, in a local directory and not shared with an earlier crawl (a re-crawl updates
/// that one's index), gets a preview, built again from the whole file.
pub(crate) async fn start_index(
    o: &IndexOptions,
    pages: &Path,
    shared_index: bool,
    resume: Option<&Resume>,
    journal: &Journal,
) -> anyhow::Result<IndexTask> {
    let ix = trawl_index::Indexer::open(o.clone())
        .await
        .with_context(|| format!("opening the index at {}", o.uri))?;
    let (from, written) = resume.map_or((0, 0), |r| (r.index_offset, r.pages_offset));
    let (feed, rx) = IndexFeed::new(written);
    let progress = Arc::new(IndexProgress::default());
    let preview = match trawl_index::preview::preview_uri(&o.uri) {
        Some(uri) if o.embed && !shared_index => {
            Some(start_preview(o, uri, pages, rx.clone()).await?)
        }
        _ => None,
    };
    let j: Arc<dyn trawl_core::journal::Journal> = Arc::new(journal.clone());
    let task = tokio::spawn(follow_pages(
        ix,
        pages.to_path_buf(),
        from,
        rx,
        Some(j),
        progress.clone(),
        None,
    ));
    Ok(IndexTask {
        feed,
        task,
        progress,
        preview,
    })
}

async fn start_preview(
    o: &IndexOptions,
    uri: String,
    pages: &Path,
    rx: tokio::sync::watch::Receiver<u64>,
) -> anyhow::Result<Preview> {
    let dir = PathBuf::from(&uri);
    // A stopped crawl's preview is rebuilt: it never recorded how far it was.
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", dir.display()));
        }
        _ => {}
    }
    let opts = IndexOptions {
        uri,
        embed: false,
        model_dir: None,
        ..o.clone()
    };
    let ix = trawl_index::Indexer::open(opts)
        .await
        .with_context(|| format!("opening the full-text preview at {}", dir.display()))?;
    let task = tokio::spawn(follow_pages(
        ix,
        pages.to_path_buf(),
        0,
        rx,
        None,
        Arc::new(IndexProgress::default()),
        Some(PREVIEW_REFRESH),
    ));
    Ok(Preview { dir, task })
}

impl Preview {
    /// Waits for the preview to read the file through; removes it when the index it stood
    /// in for is whole (`index_done`), else leaves it for searches until the crawl resumes.
    pub async fn close(self, index_done: bool) {
        match self.task.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the full-text preview stopped"),
            Err(e) => tracing::warn!(error = %e, "the full-text preview's task panicked"),
        }
        if index_done && let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(error = %e, dir = %self.dir.display(), "removing the full-text preview");
        }
    }
}
