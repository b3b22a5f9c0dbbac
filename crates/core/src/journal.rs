//! What the embedded runtime's crawl store hears from the stages that write the corpus.
//!
//! The cluster keeps a crawl durable with JetStream (every hop persisted) and Redis (the
//! state). The embedded runtime keeps its hops in memory and instead journals, in the order
//! they happen, the facts a resumed crawl needs: URLs seen and queued (through a state
//! wrapper), discovered batches not yet admitted (through a queue wrapper), and, from the
//! writer, the pages in `pages.jsonl` and how far the index has stored them. The trait lives
//! here so the indexer stage can report without knowing the store behind it.

use std::collections::BTreeMap;

use crate::{CoreResult, PageRecord};

pub trait Journal: Send + Sync {
    /// `pages` are in `pages.jsonl` (written and flushed), each with the offset its line
    /// starts at; `end` is the file's length after them; `counters` are the crawl's counters
    /// with these pages counted; `changes_end` the length of `changes.jsonl` after their
    /// change events, on a re-crawl.
    fn written(
        &self,
        pages: &[(u64, &PageRecord)],
        end: u64,
        counters: BTreeMap<String, i64>,
        changes_end: Option<u64>,
    ) -> CoreResult<()>;
    /// Every indexable page whose line ends at or before `end` is stored in the index.
    fn indexed(&self, end: u64) -> CoreResult<()>;
}
