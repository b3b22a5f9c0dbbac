//! What the indexer looks up for every chunk and every page, kept in a SQLite file and not
//! in memory: the chunk gate (`crate::gate`), the page map (canonical URL -> ids of its
//! chunks and aliases) and the stored chunks that aliases point at.
//!
//! In memory these took about 1.7 KB a page (171 of 348 MB of heap at 100,000 pages),
//! 17 GB at ten million. In the file a chunk costs a few rows on disk; the process keeps
//! SQLite's page cache ([`CACHE_KIB`]) and the kernel caches the rest outside it.
//!
//! The file holds nothing the index tables do not: it can always be filled from them, so
//! it needs no journal and no sync. Filling it reads every chunk of the index (100 s at
//! 3.8 M chunks), so beside a local index it is kept (`.trawl-state.db`) with a stamp
//! (`.trawl-state.json`): the tables' versions when the last writer finished, and the gate's
//! settings. The next writer takes the file as it is only when the stamp matches the
//! tables; the stamp goes before the file changes, so a writer killed mid-run leaves a
//! file that is filled again. A file locked by another writer, or an index elsewhere
//! (object storage), gets a temporary file of the process's own, unlinked as soon as it is
//! open (SQLite keeps using it through its descriptor, as it does its own temporary files).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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

const KEPT_DB: &str = ".trawl-state.db";
const KEPT_STAMP: &str = ".trawl-state.json";
const KEPT_LOCK: &str = ".trawl-state.lock";
/// Left by a writer that did not get the lock, share-locked while it runs: its commits
/// are in the tables and not in the kept file, so the holder must not stamp it.
const FOREIGN: &str = ".trawl-state.foreign";

/// What a kept state file was filled to match: the index tables' versions and the chunk
/// gate's distance (`None`: no gate, its tables empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub chunks_version: u64,
    pub aliases_version: u64,
    /// When the chunks table's version was written: a table made again after
    /// `rm -r index/*` (which leaves these hidden files) reaches the same numbers.
    pub chunks_written_ms: i64,
    pub gate: Option<u32>,
}

/// A state file kept beside its index.
struct Kept {
    dir: PathBuf,
    /// Held while the file is in use: a second writer gets a file of its own.
    _lock: File,
    /// A stamp is on disk: the next change takes it away first.
    stamped: bool,
}

/// A temporary state's hold on the kept one's marker (see [`FOREIGN`]).
struct Foreign {
    _marker: File,
}

/// The indexer's lookups, in a file of their own (see the module's text).
pub struct IndexState {
    pub(crate) conn: Connection,
    uncommitted: u32,
    kept: Option<Kept>,
    _foreign: Option<Foreign>,
}

fn io(what: &Path, e: std::io::Error) -> IndexError {
    IndexError::Store(format!("index state file {}: {e}", what.display()))
}

fn remove_if_there(path: &Path) -> Result<(), IndexError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(path, e)),
        _ => Ok(()),
    }
}

/// Removes a stamp for good: the directory synced, so a machine that stops before the
/// state file's next pages reach the disk cannot bring the stamp back with them.
fn unstamp(dir: &Path) -> Result<(), IndexError> {
    remove_if_there(&dir.join(KEPT_STAMP))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))
}

/// A file that is only locked, made when missing.
fn lock_file(path: &Path) -> Result<File, IndexError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io(path, e))
}

/// Marks the kept file as missing this process's commits, for as long as it runs.
fn mark_foreign(dir: &Path) -> Result<File, IndexError> {
    let path = dir.join(FOREIGN);
    let f = lock_file(&path)?;
    f.lock_shared().map_err(|e| io(&path, e))?;
    Ok(f)
}

/// Opens a state file without journal or sync, its cache bounded; `fresh` makes the tables.
fn connect(path: &Path, fresh: bool) -> Result<Connection, IndexError> {
    let conn = Connection::open(path).map_err(sql)?;
    conn.pragma_update(None, "journal_mode", "OFF")
        .map_err(sql)?;
    conn.pragma_update(None, "synchronous", "OFF")
        .map_err(sql)?;
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
        .map_err(sql)?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)
        .map_err(sql)?;
    if fresh {
        conn.execute_batch(TABLES).map_err(sql)?;
    } else {
        // A file that is not ours, or is torn, is no state: the caller fills a new one.
        conn.query_row("SELECT count(*) FROM pages WHERE url = ''", [], |_| Ok(()))
            .map_err(sql)?;
    }
    conn.execute_batch("BEGIN").map_err(sql)?;
    Ok(conn)
}

impl IndexState {
    /// A new, empty state file in `dir` (unlinked at once; see the module's text).
    pub fn create(dir: &Path) -> Result<Self, IndexError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let file = tempfile::Builder::new()
            .prefix(".trawl-index-state-")
            .suffix(".db")
            .tempfile_in(dir)
            .map_err(|e| io(dir, e))?
            .into_temp_path();
        let conn = connect(&file, true)?;
        // Gone from the directory now, in use until the connection closes. Where a system
        // cannot unlink an open file, the path goes when it is dropped instead.
        if let Err(e) = file.close() {
            tracing::debug!("index state file not unlinked while open: {e}");
        }
        Ok(Self {
            conn,
            uncommitted: 0,
            kept: None,
            _foreign: None,
        })
    }

    /// The state file kept beside the index in `dir`. True with it when it is the file the
    /// last writer stamped as matching `stamp`; false when it is empty, to be filled from
    /// the tables (no file, no stamp or another, or another writer holding it).
    pub fn open(dir: &Path, stamp: &Stamp) -> Result<(Self, bool), IndexError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let lock_path = dir.join(KEPT_LOCK);
        let lock = lock_file(&lock_path)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                tracing::info!(
                    "another writer holds the index state in {}: this one fills its own",
                    dir.display()
                );
                let marker = mark_foreign(dir)?;
                let mut own = Self::create(dir)?;
                own._foreign = Some(Foreign { _marker: marker });
                return Ok((own, false));
            }
            Err(TryLockError::Error(e)) => return Err(io(&lock_path, e)),
        }
        let db = dir.join(KEPT_DB);
        let stamp_path = dir.join(KEPT_STAMP);
        let stamped = std::fs::read(&stamp_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Stamp>(&b).ok());
        // From here on the file may change: its stamp goes first.
        unstamp(dir)?;
        // A marker no writer holds any more is of writes the tables' versions show.
        let foreign = dir.join(FOREIGN);
        if let Ok(f) = File::open(&foreign)
            && f.try_lock().is_ok()
        {
            remove_if_there(&foreign)?;
        }
        let matching = stamped.as_ref() == Some(stamp) && db.exists();
        let conn = match matching.then(|| connect(&db, false)) {
            Some(Ok(conn)) => Some(conn),
            Some(Err(e)) => {
                tracing::warn!(
                    "index state file {} not usable, filled again: {e}",
                    db.display()
                );
                None
            }
            None => None,
        };
        let kept = conn.is_some();
        let conn = match conn {
            Some(c) => c,
            None => {
                remove_if_there(&db)?;
                connect(&db, true)?
            }
        };
        let state = Self {
            conn,
            uncommitted: 0,
            kept: Some(Kept {
                dir: dir.to_path_buf(),
                _lock: lock,
                stamped: false,
            }),
            _foreign: None,
        };
        Ok((state, kept))
    }

    /// Writes every change to the file, then `stamp` beside it: the tables are at the
    /// versions it names and the file matches them. Nothing for a temporary file.
    pub fn stamp(&mut self, stamp: &Stamp) -> Result<(), IndexError> {
        let Some(kept) = &mut self.kept else {
            return Ok(());
        };
        if kept.dir.join(FOREIGN).exists() {
            tracing::info!(
                "another writer wrote to this index: its state is filled again next time"
            );
            return Ok(());
        }
        self.conn.execute_batch("COMMIT").map_err(sql)?;
        self.uncommitted = 0;
        let db = kept.dir.join(KEPT_DB);
        // The file's pages reach the disk before a stamp that vouches for them.
        File::open(&db)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(&db, e))?;
        let path = kept.dir.join(KEPT_STAMP);
        let body = serde_json::to_vec(stamp).map_err(|e| IndexError::Store(e.to_string()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&kept.dir).map_err(|e| io(&kept.dir, e))?;
        std::io::Write::write_all(&mut tmp, &body).map_err(|e| io(&path, e))?;
        tmp.as_file().sync_all().map_err(|e| io(&path, e))?;
        tmp.persist(&path).map_err(|e| io(&path, e.error))?;
        kept.stamped = true;
        self.conn.execute_batch("BEGIN").map_err(sql)?;
        Ok(())
    }

    /// Called before the file changes: a stamp on disk no longer holds, and goes.
    pub(crate) fn dirty(&mut self) -> Result<(), IndexError> {
        if let Some(kept) = &mut self.kept
            && kept.stamped
        {
            unstamp(&kept.dir)?;
            kept.stamped = false;
        }
        Ok(())
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
        self.dirty()?;
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
        self.dirty()?;
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

    #[test]
    fn a_kept_file_is_taken_only_with_its_stamp_and_by_one_writer() {
        let dir = tempfile::tempdir().unwrap();
        let stamp = Stamp {
            chunks_version: 7,
            aliases_version: 3,
            chunks_written_ms: 1_700_000_000_000,
            gate: Some(3),
        };
        let (mut s, kept) = IndexState::open(dir.path(), &stamp).unwrap();
        assert!(!kept, "no file yet");
        s.put_page("http://t/1", &["a".to_string()]).unwrap();
        // A second writer meanwhile gets an empty file of its own and leaves this one be.
        let (other, kept) = IndexState::open(dir.path(), &stamp).unwrap();
        assert!(!kept);
        assert_eq!(other.pages().unwrap(), 0);
        drop(other);
        // Its commits are not in the kept file: the holder does not stamp it.
        s.stamp(&stamp).unwrap();
        drop(s);
        let (mut s, kept) = IndexState::open(dir.path(), &stamp).unwrap();
        assert!(!kept, "another writer wrote meanwhile");
        s.put_page("http://t/1", &["a".to_string()]).unwrap();
        s.stamp(&stamp).unwrap();
        drop(s);

        let (mut s, kept) = IndexState::open(dir.path(), &stamp).unwrap();
        assert!(kept, "stamped as matching");
        assert_eq!(s.page_len("http://t/1").unwrap(), 1);
        s.stamp(&stamp).unwrap();
        // Changed after its stamp, then gone without another (a killed writer).
        s.put_page("http://t/2", &["b".to_string()]).unwrap();
        drop(s);
        let (s, kept) = IndexState::open(dir.path(), &stamp).unwrap();
        assert!(!kept, "a change after the stamp takes it away");
        assert_eq!(s.pages().unwrap(), 0, "filled again from nothing");
        drop(s);

        let (mut s, _) = IndexState::open(dir.path(), &stamp).unwrap();
        s.stamp(&stamp).unwrap();
        drop(s);
        let moved = Stamp {
            chunks_version: 8,
            ..stamp
        };
        let (_, kept) = IndexState::open(dir.path(), &moved).unwrap();
        assert!(!kept, "tables written since by someone else");
        let (mut s, _) = IndexState::open(dir.path(), &stamp).unwrap();
        s.stamp(&stamp).unwrap();
        drop(s);
        let remade = Stamp {
            chunks_written_ms: stamp.chunks_written_ms + 1,
            ..stamp
        };
        let (_, kept) = IndexState::open(dir.path(), &remade).unwrap();
        assert!(!kept, "a table made again at the same version");
        let (_, kept) = IndexState::open(dir.path(), &stamp).unwrap();
        assert!(!kept, "a stamp is good for one opening");
    }
}
