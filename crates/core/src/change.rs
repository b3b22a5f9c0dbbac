//! How a re-crawled page compares with the earlier crawl: on its record ([`PageChange`])
//! and as a change event ([`ChangeEvent`], a line of `changes.jsonl`, a webhook's body).

use serde::{Deserialize, Serialize};

/// How a page compares with the earlier crawl.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeStatus {
    New,
    Same,
    Changed,
    Removed,
}

impl ChangeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeStatus::New => "new",
            ChangeStatus::Same => "same",
            ChangeStatus::Changed => "changed",
            ChangeStatus::Removed => "removed",
        }
    }
}

/// A re-crawled page's comparison, on its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageChange {
    pub status: ChangeStatus,
    /// Why: `not_modified` (304), `same_payload`, `same_text`, `not_found`, `gone`,
    /// `unreachable`, `fetch_failed` (kept, counted toward removal), `robots`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Hamming distance between the SimHashes, for a changed page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<u32>,
    /// Whether a page of this crawl links to it (false: found only by the end-of-crawl
    /// check of the earlier crawl's URLs).
    pub linked: bool,
    /// When the text last changed.
    pub changed_at: String,
    /// The adaptive revisit interval after this fetch, and when the page is due again.
    pub interval_s: u64,
    pub next_due: String,
    /// Consecutive failed fetches.
    #[serde(default, skip_serializing_if = "crate::message::is_zero")]
    pub fails: u32,
    /// For a removed page: the canonical URL whose index rows went with it (absent when
    /// they belong to another page), so a resumed crawl removes the same rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unindexed: Option<String>,
}

/// A page's fingerprints at one fetch, as an event shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Snapshot {
    pub fetched_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simhash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

/// The Markdown diff of a changed page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TextChange {
    /// `unified`.
    pub format: String,
    /// Lines added and removed.
    pub added: usize,
    pub removed: usize,
    pub hunks: usize,
    /// The heading paths (`Guide › Install › Linux`) of the changed sections.
    pub headings: Vec<String>,
    /// The unified diff, cut at the cap.
    pub text: String,
    pub truncated: bool,
}

/// One new, changed or removed page: a line of `changes.jsonl`, one webhook delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeEvent {
    pub v: u16,
    /// Stable for the same change of the same page: receivers dedupe on it.
    pub id: String,
    /// `page.new`, `page.changed` or `page.removed`.
    #[serde(rename = "type")]
    pub kind: String,
    pub crawl: String,
    /// The crawl this one was compared with.
    pub since: String,
    pub at: String,
    pub url: String,
    pub final_url: String,
    pub status: ChangeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub http_status: u16,
    pub linked: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Snapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Snapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<TextChange>,
}
