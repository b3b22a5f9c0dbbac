//! What the indexer looks up for every chunk and every page, kept in a SQLite file and not
//! in memory: the chunk gate (`crate::gate`), the page map (canonical URL -> ids of its
//! chunks and aliases) and the stored chunks that aliases point at.
//!
//! In memory these took about 1.7 KB a page (171 of 348 MB of heap at 100,000 pages),
//! 17 GB at ten million. In the file a chunk costs a few rows on disk; the process keeps
//! SQLite's page cache ([`CACHE_KIB`]) and the kernel caches the rest outside it.
//!
//! The file holds nothing the index tables do not: it is filled from them when the
//! indexer opens, so it needs no journal and no sync. It is unlinked as soon as it is
//! open (SQLite keeps using it through its descriptor, as it does its own temporary
//! files), so a process that is killed leaves nothing behind.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use crate::IndexError;

/// SQLite's page cache for the state, in KiB: the bound on what the state keeps resident.
pub const CACHE_KIB: i64 = 16 * 1024;

/// Changes between commits. Nothing is synced, so a commit only hands dirty pages to the
/// kernel; a long transaction would keep them in SQLite's cache past its bound.
const COMMIT_EVERY: u32 = 2048;

const TABLES: &str = "
CREATE TABLE chunks (
    n       INTEGER PRIMARY KEY,
    id      TEXT NOT NULL UNIQUE,
    exact   BLOB NOT NULL,
    simhash INTEGER NOT NULL,
    near    INTEGER NOT NULL,
    total   INTEGER NOT NULL
);
CREATE INDEX chunks_exact ON chunks (exact);
CREATE TABLE bands (
    band    INTEGER NOT NULL,
    key     INTEGER NOT NULL,
    n       INTEGER NOT NULL,
    simhash INTEGER NOT NULL,
    PRIMARY KEY (band, key, n)
) WITHOUT ROWID;
CREATE TABLE pages (url TEXT PRIMARY KEY, ids TEXT NOT NULL);
CREATE TABLE targets (id TEXT PRIMARY KEY) WITHOUT ROWID;
";

/// Ids of one page, as the `pages` table keeps them.
const ID_SEP: &str = "\n";

pub(crate) fn sql(e: rusqlite::Error) -> IndexError {
    IndexError::Store(format!("index state file: {e}"))
}

/// The indexer's lookups, in a file of their own (see the module's text).
pub struct IndexState {
    pub(crate) conn: Connection,
    uncommitted: u32,
}

impl IndexState {
    /// A new, empty state file in `dir` (unlinked at once; see the module's text).
    pub fn create(dir: &Path) -> Result<Self, IndexError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| IndexError::Store(format!("{}: {e}", dir.display())))?;
        let file = tempfile::Builder::new()
            .prefix(".trawl-index-state-")
            .suffix(".db")
            .tempfile_in(dir)
            .map_err(|e| IndexError::Store(format!("index state file in {}: {e}", dir.display())))?
            .into_temp_path();
        let conn = Connection::open(&file).map_err(sql)?;
        // Gone from the directory now, in use until the connection closes. Where a system
        // cannot unlink an open file, the path goes when it is dropped instead.
        if let Err(e) = file.close() {
            tracing::debug!("index state file not unlinked while open: {e}");
        }
        conn.pragma_update(None, "journal_mode", "OFF")
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "OFF")
            .map_err(sql)?;
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(sql)?;
        conn.pragma_update(None, "cache_size", -CACHE_KIB)
            .map_err(sql)?;
        conn.execute_batch(TABLES).map_err(sql)?;
        conn.execute_batch("BEGIN").map_err(sql)?;
        Ok(Self {
            conn,
            uncommitted: 0,
        })
    }

    /// Counts a change, and commits once enough are waiting.
    pub(crate) fn changed(&mut self) -> Result<(), IndexError> {
        self.uncommitted += 1;
        if self.uncommitted >= COMMIT_EVERY {
            self.conn.execute_batch("COMMIT; BEGIN").map_err(sql)?;
            self.uncommitted = 0;
        }
        Ok(())
    }

    /// Runs one write, counted towards the next commit when it changed a row.
    fn write(&mut self, stmt: &str, p: impl rusqlite::Params) -> Result<(), IndexError> {
        let n = self
            .conn
            .prepare_cached(stmt)
            .map_err(sql)?
            .execute(p)
            .map_err(sql)?;
        if n > 0 {
            self.changed()?;
        }
        Ok(())
    }

    /// Takes the page indexed under `url` out of the map: the ids of its chunks and
    /// aliases, or `None` when it is not there.
    pub fn take_page(&mut self, url: &str) -> Result<Option<Vec<String>>, IndexError> {
        let ids: Option<String> = self
            .conn
            .prepare_cached("DELETE FROM pages WHERE url = ?1 RETURNING ids")
            .map_err(sql)?
            .query_row([url], |r| r.get(0))
            .optional()
            .map_err(sql)?;
        if ids.is_some() {
            self.changed()?;
        }
        Ok(ids.map(|s| s.split(ID_SEP).map(str::to_string).collect()))
    }

    /// Records the ids of the page indexed under `url` (in place of any it had).
    pub fn put_page(&mut self, url: &str, ids: &[String]) -> Result<(), IndexError> {
        self.write(
            "INSERT OR REPLACE INTO pages (url, ids) VALUES (?1, ?2)",
            params![url, ids.join(ID_SEP)],
        )
    }

    /// Adds one id to the page indexed under `url` (filling the map from the tables).
    pub fn add_to_page(&mut self, url: &str, id: &str) -> Result<(), IndexError> {
        self.write(
            "INSERT INTO pages (url, ids) VALUES (?1, ?2)
             ON CONFLICT (url) DO UPDATE SET ids = ids || char(10) || excluded.ids",
            params![url, id],
        )
    }

    /// Chunks and aliases of the page indexed under `url` (0 when it is not there).
    pub fn page_len(&self, url: &str) -> Result<usize, IndexError> {
        let ids: Option<String> = self
            .conn
            .prepare_cached("SELECT ids FROM pages WHERE url = ?1")
            .map_err(sql)?
            .query_row([url], |r| r.get(0))
            .optional()
            .map_err(sql)?;
        Ok(ids.map_or(0, |s| s.split(ID_SEP).count()))
    }

    /// Pages in the map.
    pub fn pages(&self) -> Result<usize, IndexError> {
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM pages", [], |r| r.get(0))
            .map_err(sql)?;
        Ok(n as usize)
    }

    /// Records that an alias points at the stored chunk `id`.
    pub fn add_target(&mut self, id: &str) -> Result<(), IndexError> {
        self.write("INSERT OR IGNORE INTO targets (id) VALUES (?1)", [id])
    }

    /// Whether some alias may point at the stored chunk `id` (a target is forgotten only
    /// with [`IndexState::remove_target`], so this can say yes for one that went).
    pub fn is_target(&self, id: &str) -> Result<bool, IndexError> {
        self.conn
            .prepare_cached("SELECT 1 FROM targets WHERE id = ?1")
            .map_err(sql)?
            .exists([id])
            .map_err(sql)
    }

    pub fn remove_target(&mut self, id: &str) -> Result<(), IndexError> {
        self.write("DELETE FROM targets WHERE id = ?1", [id])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_targets_round_trip_and_leave_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = IndexState::create(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the state file is unlinked while open"
        );
        let ids = vec!["a".to_string(), "b".to_string()];
        s.put_page("http://t/1", &ids).unwrap();
        s.add_to_page("http://t/2", "c").unwrap();
        s.add_to_page("http://t/2", "d").unwrap();
        assert_eq!(s.page_len("http://t/2").unwrap(), 2);
        assert_eq!(s.pages().unwrap(), 2);
        assert_eq!(s.take_page("http://t/1").unwrap(), Some(ids));
        assert_eq!(s.take_page("http://t/1").unwrap(), None);
        assert_eq!(s.page_len("http://t/1").unwrap(), 0);
        assert_eq!(
            s.take_page("http://t/2").unwrap(),
            Some(vec!["c".to_string(), "d".to_string()])
        );
        s.add_target("x").unwrap();
        s.add_target("x").unwrap();
        assert!(s.is_target("x").unwrap());
        s.remove_target("x").unwrap();
        assert!(!s.is_target("x").unwrap());
        // Past a commit, the rows are all still there.
        for i in 0..(COMMIT_EVERY + 10) {
            s.put_page(&format!("http://t/p{i}"), &[format!("{i}")])
                .unwrap();
        }
        assert_eq!(s.pages().unwrap(), COMMIT_EVERY as usize + 10);
        assert_eq!(s.page_len("http://t/p7").unwrap(), 1);
    }
}
