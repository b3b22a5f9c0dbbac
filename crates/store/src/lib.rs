//! The embedded runtime's crawl store: the state of one crawl in `crawl.db` (SQLite, WAL
//! mode) in its output directory, so that a crawl killed at any moment resumes where its
//! outputs end.
//!
//! - [`schema`]: the tables (`urls`: per URL what the crawl knows and whether it is queued,
//!   written or only seen; `pending`: discovered batches not yet admitted; `meta`: the spec,
//!   counters and how far `pages.jsonl` and the index are consistent) and opening them.
//! - [`journal`]: the writer thread. Stages report through a [`journal::Journal`] handle
//!   in the order things happen; the thread applies the reports in that order, in one
//!   transaction every 100 ms, so what is on disk is always a prefix of what happened.
//! - [`durable`]: the in-memory state and discovered hop of the embedded runtime, wrapped
//!   to report to the journal.
//! - [`resume`]: what a resumed crawl reads back.
//! - [`gate_file`]: the SimHash gate's prints in `gate.db`, a file of the crawl made anew
//!   at each start, so the gate does not grow the process with the crawl.
//! - [`history`]: an earlier crawl's directory, as what a re-crawl compares with.
//! - [`dir`]: what an output directory holds, before anything is written to it.

pub mod dir;
pub mod durable;
pub mod gate_file;
pub mod history;
pub mod journal;
pub mod resume;
pub mod schema;
pub mod sketch_file;

/// The store's file in a crawl directory.
pub const DB_FILE: &str = "crawl.db";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("crawl store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("crawl store: {0}")]
    Io(#[from] std::io::Error),
    #[error("crawl store: a stored value is not valid: {0}")]
    Json(#[from] serde_json::Error),
    #[error("crawl store: {0}")]
    Invalid(String),
    #[error("crawl store: the writer stopped: {0}")]
    Stopped(String),
}

pub type StoreResult<T> = Result<T, StoreError>;
