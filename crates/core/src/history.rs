//! What a re-crawl knows of an earlier crawl of the same site, and how a page compares
//! with it. The embedded runtime reads it from the earlier crawl's directory
//! (`trawl-store`); the fetcher asks it for validators, the writer for the fingerprints
//! and the earlier record.

use std::collections::HashSet;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use crate::change::{ChangeStatus, PageChange};
use crate::{CoreResult, PageRecord, ResponseFacts, UrlKind};

/// The earlier crawl's facts about one URL (kept across crawls in Redis: every field
/// defaults, so facts written by an older version still read).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Prior {
    pub status: u16,
    pub final_url: String,
    pub facts: ResponseFacts,
    pub text_hash: Option<String>,
    pub simhash: Option<String>,
    pub fetched_at: String,
    /// When the page last changed (its first fetch, if never since).
    pub changed_at: Option<String>,
    pub interval_s: Option<u64>,
    /// When the adaptive revisit interval makes the page due again (RFC 3339).
    pub next_due: Option<String>,
    /// Consecutive failed fetches (5xx, timeouts) before this crawl.
    pub fails: u32,
    pub depth: u32,
    pub kind: UrlKind,
    /// Whether the earlier crawl wrote a record that can be carried forward.
    pub has_record: bool,
}

impl Prior {
    /// The earlier fetch gave the page (a 2xx, or a 304 of one).
    pub fn was_ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// What a written record tells a later crawl (the embedded store keeps the same facts
    /// as columns of `crawl.db`).
    pub fn of(p: &PageRecord) -> Prior {
        let change = p.change.as_ref();
        Prior {
            status: p.status,
            final_url: p.final_url.clone(),
            facts: ResponseFacts {
                revisit: None,
                ..p.facts.clone()
            },
            text_hash: p.text_hash.clone(),
            simhash: p.simhash.clone(),
            fetched_at: p.fetched_at.clone(),
            changed_at: change.map(|c| c.changed_at.clone()),
            interval_s: change.map(|c| c.interval_s),
            next_due: change.map(|c| c.next_due.clone()),
            fails: change.map_or(0, |c| c.fails),
            depth: p.depth,
            kind: p.kind,
            has_record: true,
        }
    }
}

#[async_trait]
pub trait History: Send + Sync {
    async fn prior(&self, url: &str) -> CoreResult<Option<Prior>>;
    /// The record the earlier crawl wrote for `url`.
    async fn previous(&self, url: &str) -> CoreResult<Option<PageRecord>>;
    /// The URLs of the earlier crawl that gave a page, with their depth and kind, a page
    /// at a time from `cursor` (none: the first page): the ones this crawl does not reach
    /// are fetched again at its end. Paged, so that the check of ten million URLs never
    /// holds them all; a URL may come twice (the seen-set admits it once).
    async fn known(&self, cursor: Option<String>) -> CoreResult<KnownPage>;
}

/// A page of [`History::known`].
#[derive(Debug, Default)]
pub struct KnownPage {
    pub urls: Vec<(String, u32, UrlKind)>,
    /// Where the next page starts; none after the last.
    pub next: Option<String>,
}

/// Where a cluster crawl keeps each written page for a later re-crawl to compare with
/// (the embedded runtime's journal keeps the same in `crawl.db` and `pages.jsonl`).
#[async_trait]
pub trait PageArchive: Send + Sync {
    async fn keep(&self, pages: &[&PageRecord]) -> CoreResult<()>;
}

/// The URLs a re-crawl admitted only by its end-of-crawl check of the earlier crawl's
/// URLs: no page of this crawl links to them.
#[async_trait]
pub trait Unlinked: Send + Sync {
    async fn add(&self, urls: &[String]) -> CoreResult<()>;
    async fn contains(&self, url: &str) -> CoreResult<bool>;
    /// Whether the end-of-crawl check has run to its end.
    async fn checked(&self) -> CoreResult<bool>;
    /// The end-of-crawl check has run to its end: it is not run again (a check cut short
    /// runs again in full; its URLs already admitted are dropped as seen).
    async fn mark_checked(&self) -> CoreResult<()>;
}

/// [`Unlinked`] in memory, for the embedded runtime.
#[derive(Default)]
pub struct MemoryUnlinked(Mutex<HashSet<String>>, std::sync::atomic::AtomicBool);

#[async_trait]
impl Unlinked for MemoryUnlinked {
    async fn checked(&self) -> CoreResult<bool> {
        Ok(self.1.load(std::sync::atomic::Ordering::SeqCst))
    }

    async fn mark_checked(&self) -> CoreResult<()> {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    async fn add(&self, urls: &[String]) -> CoreResult<()> {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        set.extend(urls.iter().cloned());
        Ok(())
    }

    async fn contains(&self, url: &str) -> CoreResult<bool> {
        Ok(self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(url))
    }
}
