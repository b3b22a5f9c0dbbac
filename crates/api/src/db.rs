//! `serve.db` in the server's data directory (SQLite, WAL): the jobs, so that they outlive
//! a restart, and the last scrape of each URL per key and tag, for change tracking.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rusqlite::{Connection, OptionalExtension, params};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS extracts (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    data TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS snapshots (
    owner TEXT NOT NULL,
    url TEXT NOT NULL,
    tag TEXT NOT NULL,
    markdown TEXT NOT NULL,
    status INTEGER NOT NULL,
    scraped_at TEXT NOT NULL,
    PRIMARY KEY (owner, url, tag)
);
";

/// A job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub id: String,
    /// `crawl` or `batch`.
    pub kind: String,
    /// Who started it (a digest of the API key; empty without keys).
    pub owner: String,
    /// The request body as received.
    pub request: String,
    /// `scraping`, `completed`, `failed` or `cancelled`.
    pub status: String,
    pub error: Option<String>,
    pub created_at: String,
    pub finished_at: Option<String>,
}

/// The last scrape of a URL.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub markdown: String,
    pub status: u16,
    pub scraped_at: String,
}

/// An extract job as stored (`/v2/extract`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractRow {
    pub id: String,
    pub owner: String,
    pub request: String,
    /// `processing`, `completed` or `failed`.
    pub status: String,
    /// The answer, JSON.
    pub data: Option<String>,
    pub error: Option<String>,
    pub created_at: String,
}

#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
}

impl Db {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)
            .with_context(|| format!("creating the tables of {}", path.display()))?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// `f` in one transaction, committed when it returns `Ok`.
    pub(crate) fn with_tx<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> anyhow::Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let tx = conn.transaction().context("serve.db")?;
        let out = f(&tx).context("serve.db")?;
        tx.commit().context("serve.db")?;
        Ok(out)
    }

    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> anyhow::Result<T> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&conn).context("serve.db")
    }

    pub fn insert_extract(&self, id: &str, owner: &str, request: &str) -> anyhow::Result<()> {
        let now = chrono::Utc::now().to_rfc3339();
        self.with(|c| {
            c.execute(
                "INSERT INTO extracts (id, owner, request, status, created_at)
                 VALUES (?1, ?2, ?3, 'processing', ?4)",
                params![id, owner, request, now],
            )
            .map(|_| ())
        })
    }

    pub fn finish_extract(
        &self,
        id: &str,
        data: Option<&str>,
        error: Option<&str>,
    ) -> anyhow::Result<()> {
        let now = chrono::Utc::now().to_rfc3339();
        let status = if error.is_some() {
            "failed"
        } else {
            "completed"
        };
        self.with(|c| {
            c.execute(
                "UPDATE extracts SET status = ?2, data = ?3, error = ?4, finished_at = ?5
                 WHERE id = ?1",
                params![id, status, data, error, now],
            )
            .map(|_| ())
        })
    }

    fn extract_rows(&self, filter: &str, arg: &str) -> anyhow::Result<Vec<ExtractRow>> {
        let sql = format!(
            "SELECT id, owner, request, status, data, error, created_at FROM extracts WHERE {filter}"
        );
        self.with(|c| {
            let mut st = c.prepare(&sql)?;
            let rows = st.query_map(params![arg], |r| {
                Ok(ExtractRow {
                    id: r.get(0)?,
                    owner: r.get(1)?,
                    request: r.get(2)?,
                    status: r.get(3)?,
                    data: r.get(4)?,
                    error: r.get(5)?,
                    created_at: r.get(6)?,
                })
            })?;
            rows.collect()
        })
    }

    pub fn extract(&self, id: &str) -> anyhow::Result<Option<ExtractRow>> {
        Ok(self.extract_rows("id = ?1", id)?.into_iter().next())
    }

    /// Forgets the finished extracts created before `cutoff` (RFC 3339); how many.
    pub fn forget_extracts(&self, cutoff: &str) -> anyhow::Result<usize> {
        self.with(|c| {
            c.execute(
                "DELETE FROM extracts WHERE status != 'processing' AND created_at < ?1",
                params![cutoff],
            )
        })
    }

    /// Extracts a stop left running: they run again at start-up.
    pub fn unfinished_extracts(&self) -> anyhow::Result<Vec<ExtractRow>> {
        self.extract_rows("status = ?1", "processing")
    }

    pub fn insert_job(&self, j: &JobRow) -> anyhow::Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO jobs (id, kind, owner, request, status, error, created_at, finished_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    j.id,
                    j.kind,
                    j.owner,
                    j.request,
                    j.status,
                    j.error,
                    j.created_at,
                    j.finished_at
                ],
            )
            .map(|_| ())
        })
    }

    /// Ends a job; a job already ended keeps its first end (a cancel and a finish race).
    pub fn finish_job(&self, id: &str, status: &str, error: Option<&str>) -> anyhow::Result<bool> {
        let now = chrono::Utc::now().to_rfc3339();
        self.with(|c| {
            c.execute(
                "UPDATE jobs SET status = ?2, error = ?3, finished_at = ?4
                 WHERE id = ?1 AND status = 'scraping'",
                params![id, status, error, now],
            )
            .map(|n| n > 0)
        })
    }

    pub fn job(&self, id: &str) -> anyhow::Result<Option<JobRow>> {
        self.with(|c| {
            c.query_row(
                "SELECT id, kind, owner, request, status, error, created_at, finished_at
                 FROM jobs WHERE id = ?1",
                params![id],
                row,
            )
            .optional()
        })
    }

    /// Jobs still running (or waiting) when the server stopped, oldest first.
    pub fn unfinished_jobs(&self) -> anyhow::Result<Vec<JobRow>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, kind, owner, request, status, error, created_at, finished_at
                 FROM jobs WHERE status = 'scraping' ORDER BY created_at",
            )?;
            st.query_map([], row)?.collect()
        })
    }

    /// When a job of `owner` last completed.
    pub fn last_completed(&self, owner: &str) -> anyhow::Result<Option<String>> {
        self.with(|c| {
            c.query_row(
                "SELECT MAX(finished_at) FROM jobs WHERE owner = ?1 AND status = 'completed'",
                params![owner],
                |r| r.get(0),
            )
        })
    }

    /// The newest `limit` jobs of `owner`, newest first.
    pub fn jobs_of(&self, owner: &str, limit: usize) -> anyhow::Result<Vec<JobRow>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, kind, owner, request, status, error, created_at, finished_at
                 FROM jobs WHERE owner = ?1 ORDER BY created_at DESC LIMIT ?2",
            )?;
            st.query_map(params![owner, limit as i64], row)?.collect()
        })
    }

    /// The URL's last scrape.
    pub fn snapshot(&self, owner: &str, url: &str, tag: &str) -> anyhow::Result<Option<Snapshot>> {
        self.with(|c| read_snapshot(c, owner, url, tag))
    }

    /// Stores `s` as the URL's last scrape and answers the one it replaces, in one
    /// transaction.
    pub fn swap_snapshot(
        &self,
        owner: &str,
        url: &str,
        tag: &str,
        s: &Snapshot,
    ) -> anyhow::Result<Option<Snapshot>> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let tx = conn.transaction().context("serve.db")?;
        let before = read_snapshot(&tx, owner, url, tag).context("serve.db")?;
        tx.execute(
            "INSERT OR REPLACE INTO snapshots (owner, url, tag, markdown, status, scraped_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![owner, url, tag, s.markdown, s.status, s.scraped_at],
        )
        .context("serve.db")?;
        tx.commit().context("serve.db")?;
        Ok(before)
    }
}

fn read_snapshot(
    c: &Connection,
    owner: &str,
    url: &str,
    tag: &str,
) -> rusqlite::Result<Option<Snapshot>> {
    c.query_row(
        "SELECT markdown, status, scraped_at FROM snapshots
         WHERE owner = ?1 AND url = ?2 AND tag = ?3",
        params![owner, url, tag],
        |r| {
            Ok(Snapshot {
                markdown: r.get(0)?,
                status: r.get(1)?,
                scraped_at: r.get(2)?,
            })
        },
    )
    .optional()
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRow> {
    Ok(JobRow {
        id: r.get(0)?,
        kind: r.get(1)?,
        owner: r.get(2)?,
        request: r.get(3)?,
        status: r.get(4)?,
        error: r.get(5)?,
        created_at: r.get(6)?,
        finished_at: r.get(7)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_and_snapshots_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.db");
        let job = JobRow {
            id: "j1".into(),
            kind: "crawl".into(),
            owner: String::new(),
            request: "{}".into(),
            status: "scraping".into(),
            error: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            finished_at: None,
        };
        {
            let db = Db::open(&path).unwrap();
            db.insert_job(&job).unwrap();
            let s = Snapshot {
                markdown: "m".into(),
                status: 200,
                scraped_at: "t".into(),
            };
            assert!(db.swap_snapshot("", "http://h/", "", &s).unwrap().is_none());
        }
        let db = Db::open(&path).unwrap();
        assert_eq!(db.unfinished_jobs().unwrap(), vec![job]);
        assert!(db.finish_job("j1", "cancelled", None).unwrap());
        // The first end stays.
        assert!(!db.finish_job("j1", "completed", None).unwrap());
        assert_eq!(db.job("j1").unwrap().unwrap().status, "cancelled");
        assert!(db.unfinished_jobs().unwrap().is_empty());
        assert_eq!(
            db.snapshot("", "http://h/", "").unwrap().unwrap().status,
            200
        );
        assert!(db.snapshot("other", "http://h/", "").unwrap().is_none());
    }
}
