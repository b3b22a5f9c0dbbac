//! The tables of `crawl.db` and opening them.
//!
//! WAL mode with `synchronous = NORMAL`: a commit is one append to the log, a killed
//! process loses nothing committed, and a power cut loses at most the last commits, never
//! the file's consistency. The `sqlite3` command reads the file while a crawl runs.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use crate::{StoreError, StoreResult};

/// Bumped when a table changes; a store of another version is refused, not misread.
pub const SCHEMA_VERSION: i64 = 1;

/// What a row of `urls` stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum UrlState {
    /// Admitted and waiting for (or in) its fetch.
    Queued = 0,
    /// Its line is in `pages.jsonl`.
    Written = 1,
    /// In the seen-set only: a redirect target, or a URL a budget turned away.
    Seen = 2,
    /// Admitted, then dropped by a full frontier (`max_queued`): never fetched, and not
    /// fetched on resume either.
    Dropped = 3,
}

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS urls (
    url            TEXT PRIMARY KEY,
    state          INTEGER NOT NULL,
    depth          INTEGER,
    kind           TEXT,
    priority       INTEGER,
    status         INTEGER,
    final_url      TEXT,
    error          TEXT,
    etag           TEXT,
    last_modified  TEXT,
    payload_digest TEXT,
    text_hash      TEXT,
    simhash        TEXT,
    duplicate_of   TEXT,
    fetched_at     TEXT,
    changed_at     TEXT,
    interval_s     INTEGER,
    next_due       TEXT,
    fails          INTEGER NOT NULL DEFAULT 0,
    warc_record_id TEXT,
    warc_date      TEXT,
    page_offset    INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (
    id    INTEGER PRIMARY KEY,
    batch TEXT NOT NULL
);
";

/// Opens (creating when missing) the store at `path` with its tables.
pub fn open(path: &Path) -> StoreResult<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // The journal thread writes while `trawl status`-like readers may look.
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch(TABLES)?;
    match get(&conn, "schema_version")? {
        None => set(&conn, "schema_version", &SCHEMA_VERSION.to_string())?,
        Some(v) if v == SCHEMA_VERSION.to_string() => {}
        Some(v) => {
            return Err(StoreError::Invalid(format!(
                "{} has schema version {v}; this trawl reads version {SCHEMA_VERSION}",
                path.display()
            )));
        }
    }
    Ok(conn)
}

pub fn get(conn: &Connection, key: &str) -> StoreResult<Option<String>> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()?)
}

pub fn set(conn: &Connection, key: &str, value: &str) -> StoreResult<()> {
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

/// A numeric meta value (0 when absent).
pub fn get_u64(conn: &Connection, key: &str) -> StoreResult<u64> {
    match get(conn, key)? {
        None => Ok(0),
        Some(v) => v
            .parse()
            .map_err(|_| StoreError::Invalid(format!("meta {key} = {v:?} is not a number"))),
    }
}

/// Meta keys.
pub mod keys {
    /// The crawl spec (JSON), as the crawl was started or last resumed.
    pub const SPEC: &str = "spec";
    /// `running` until the crawl finishes, then `finished`.
    pub const STATUS: &str = "status";
    pub const STARTED_AT: &str = "started_at";
    /// How many times the crawl was started (1 + resumes).
    pub const RUNS: &str = "runs";
    /// `pages.jsonl` is consistent with the store up to this byte.
    pub const PAGES_OFFSET: &str = "pages_offset";
    /// Every indexable line of `pages.jsonl` before this byte is in the index.
    pub const INDEX_OFFSET: &str = "index_offset";
    /// The crawl's counters (JSON object), as of `pages_offset`.
    pub const COUNTERS: &str = "counters";
    /// `changes.jsonl` is consistent with the store up to this byte (a re-crawl's).
    pub const CHANGES_OFFSET: &str = "changes_offset";
    /// The directory of the crawl this one is compared with (`--since`).
    pub const SINCE: &str = "since";
    /// Where the crawl's index is (a re-crawl updates its earlier crawl's in place).
    pub const INDEX_URI: &str = "index_uri";
}

pub const RUNNING: &str = "running";
pub const FINISHED: &str = "finished";
