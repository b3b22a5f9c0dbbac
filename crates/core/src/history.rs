//! What a re-crawl knows of an earlier crawl of the same site, and how a page compares
//! with it. The embedded runtime reads it from the earlier crawl's directory
//! (`trawl-store`); the fetcher asks it for validators, the writer for the fingerprints
//! and the earlier record.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use crate::change::{ChangeStatus, PageChange};
use crate::{CoreResult, PageRecord, ResponseFacts, UrlKind};

/// The earlier crawl's facts about one URL.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
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
}

#[async_trait]
pub trait History: Send + Sync {
    async fn prior(&self, url: &str) -> CoreResult<Option<Prior>>;
    /// The record the earlier crawl wrote for `url`.
    async fn previous(&self, url: &str) -> CoreResult<Option<PageRecord>>;
    /// Every URL of the earlier crawl that gave a page, with its depth and kind: the ones
    /// this crawl does not reach are fetched again at its end.
    async fn known(&self) -> CoreResult<Vec<(String, u32, UrlKind)>>;
}
