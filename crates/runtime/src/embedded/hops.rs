//! The embedded crawl's in-memory hops between the stages, bounded in messages and bytes.

use std::sync::Arc;

use trawl_core::pipeline::Hops;
use trawl_core::queue::{MemoryQueue, Queue};
use trawl_core::state::WorkTracker;
use trawl_core::{Doc, FetchJob, Fetched, RefineJob};
use trawl_store::durable::JournaledQueue;
use trawl_store::journal::Journal;

/// The in-memory hops, kept concrete for their lengths and for closing them. The
/// discovered hop is journaled: its batches survive a kill until the frontier has them.
pub(super) struct MemoryHops {
    pub(super) discovered: Arc<JournaledQueue>,
    pub(super) fetch: Arc<MemoryQueue<FetchJob>>,
    pub(super) fetched: Arc<MemoryQueue<Fetched>>,
    pub(super) docs: Arc<MemoryQueue<Doc>>,
    pub(super) render: Arc<MemoryQueue<Fetched>>,
    pub(super) refine: Arc<MemoryQueue<RefineJob>>,
}

/// The bodies waiting for extraction, at most: pages are cut at the 8 MiB extraction reads
/// (sitemaps at 50 MiB), so 256 messages could otherwise hold gigabytes.
const FETCHED_BYTES: usize = 256 << 20;
/// The text and Markdown of records waiting for the writer, at most.
const DOCS_BYTES: usize = 128 << 20;

impl MemoryHops {
    pub(super) fn new(
        concurrency: usize,
        tracker: &WorkTracker,
        journal: &Journal,
        first_id: u64,
    ) -> Self {
        MemoryHops {
            discovered: Arc::new(JournaledQueue::new(
                MemoryQueue::new(4096, tracker.clone()),
                journal.clone(),
                first_id,
            )),
            fetch: Arc::new(MemoryQueue::new(concurrency * 2, tracker.clone())),
            fetched: Arc::new(MemoryQueue::with_byte_budget(
                256,
                FETCHED_BYTES,
                |f: &Fetched| f.body.len(),
                tracker.clone(),
            )),
            // Pages for the browser wait here, a few at a time: the extractors slow down
            // to the renderer's pace rather than hold many bodies.
            render: Arc::new(MemoryQueue::with_byte_budget(
                32,
                FETCHED_BYTES / 4,
                |f: &Fetched| f.body.len(),
                tracker.clone(),
            )),
            docs: Arc::new(MemoryQueue::with_byte_budget(
                1024,
                DOCS_BYTES,
                |d: &Doc| {
                    d.page.text.len()
                        + d.page.markdown.as_ref().map_or(0, String::len)
                        + d.page.raw_html.as_ref().map_or(0, String::len)
                },
                tracker.clone(),
            )),
            // Pages for the refiner (`--refine`): a model is slower than the crawl, which
            // waits for it rather than hold the markup of many pages.
            refine: Arc::new(MemoryQueue::with_byte_budget(
                64,
                FETCHED_BYTES / 4,
                |j: &RefineJob| j.html.len(),
                tracker.clone(),
            )),
        }
    }

    pub(super) fn hops(&self) -> Hops {
        Hops {
            discovered: self.discovered.clone(),
            fetch: self.fetch.clone(),
            fetched: self.fetched.clone(),
            docs: self.docs.clone(),
            render: self.render.clone(),
            changed: Arc::new(trawl_core::queue::Unconnected(
                trawl_core::pipeline::Hop::Changed,
            )),
            refine: self.refine.clone(),
        }
    }

    /// Pages fetched and not yet written.
    pub(super) async fn pages_in_output(&self) -> usize {
        self.fetched.len().await.unwrap_or(0)
            + self.render.len().await.unwrap_or(0)
            + self.docs.len().await.unwrap_or(0)
            + self.refine.len().await.unwrap_or(0)
    }

    pub(super) fn close(&self) {
        self.discovered.close();
        self.fetch.close();
        self.fetched.close();
        self.render.close();
        self.docs.close();
        self.refine.close();
    }
}
