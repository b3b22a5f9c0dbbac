//! The embedded crawl's SimHash gate kept in a file of the crawl directory (`gate.db`),
//! so that the gate does not grow the process with the crawl: in memory it takes about
//! 0.25 KB a page, 2.5 GB at ten million pages. In the file a page costs a few rows on
//! disk; the process keeps SQLite's page cache ([`CACHE_KIB`]) and the kernel caches the
//! rest of the file outside it. A lookup there costs tens of microseconds where memory
//! takes two, so a crawl keeps its first pages in memory ([`CrawlPrints`]) and moves them
//! to the file when there are more.
//!
//! The file holds nothing the crawl store does not: it is made anew at each start and
//! filled again from the pages a resumed crawl kept (`cli/src/page_gate.rs`), so it needs
//! no journal, no sync and no format of its own to keep stable; it is removed when the
//! crawl's process lets go of it.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use trawl_dedup::SimGate;
use trawl_dedup::print_index::PrintIndex;
use trawl_dedup::print_store::{PrintStore, StoredPrint, fold};
use trawl_dedup::simhash::Banding;

use crate::{StoreError, StoreResult};

/// The gate's file in a crawl directory.
pub const GATE_FILE: &str = "gate.db";

/// SQLite's page cache for the gate, in KiB: the bound on what the gate keeps resident.
pub const CACHE_KIB: i64 = 8 * 1024;

/// Inserts between commits. Nothing is synced, so a commit only hands dirty pages to the
/// kernel; a long transaction would keep them in SQLite's cache past its bound.
const COMMIT_EVERY: u32 = 512;

const TABLES: &str = "
CREATE TABLE pages (n INTEGER PRIMARY KEY, print INTEGER NOT NULL, id TEXT NOT NULL);
CREATE TABLE exact (hash INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE ids (hash INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE bands (
    key   INTEGER NOT NULL,
    n     INTEGER NOT NULL,
    print INTEGER NOT NULL,
    PRIMARY KEY (key, n)
) WITHOUT ROWID;
";

/// The gate's prints in `gate.db`: the same buckets, order and caps as
/// [`trawl_dedup::print_index::PrintIndex`], so the verdicts are the same page for page.
pub struct GateFile {
    conn: Connection,
    path: PathBuf,
    pages: u32,
    uncommitted: u32,
    /// Bucket sizes met by the last `bucket` calls: the gate reads every bucket of a page
    /// before it stores it, so the insert need not count them again.
    sizes: Vec<(u64, u32)>,
}

/// SQLite keeps 64-bit integers signed; hashes and prints go in bit for bit.
fn signed(x: u64) -> i64 {
    x as i64
}

/// A gate's file at `path` made anew with `tables` (an earlier one, left by a stopped
/// process, is removed first), in a transaction: no journal, no sync, the page cache
/// bounded at [`CACHE_KIB`]. Shared with the MinHash gate's file (`crate::sketch_file`).
pub(crate) fn fresh(path: &Path, tables: &str) -> StoreResult<Connection> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let conn = Connection::open(path)?;
    // Rebuilt from the crawl store at each start: a crash loses nothing it needs.
    conn.pragma_update(None, "journal_mode", "OFF")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    conn.execute_batch(tables)?;
    conn.execute_batch("BEGIN")?;
    Ok(conn)
}

/// Removes a gate's file when its process lets go of it: made anew at the next start
/// anyway, so one that cannot be removed only costs disk.
pub(crate) fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        tracing::debug!(path = %path.display(), "gate file not removed: {e}");
    }
}

impl GateFile {
    /// Makes the gate's file at `path` anew (an earlier one, left by a stopped process, is
    /// removed first).
    pub fn create(path: &Path) -> StoreResult<Self> {
        let conn = fresh(path, TABLES)?;
        Ok(GateFile {
            conn,
            path: path.to_path_buf(),
            pages: 0,
            uncommitted: 0,
            sizes: Vec::new(),
        })
    }

    /// Makes the file anew with the pages of `index`, as they are there: the same numbers,
    /// buckets and first pages by exact hash and id. Rows go in in key order, which is
    /// what SQLite's B-trees append fastest.
    pub fn take_over(path: &Path, index: &mut PrintIndex) -> StoreResult<Self> {
        let mut file = Self::create(path)?;
        let pages = index.len() as u32;
        {
            let conn = &file.conn;
            let mut put = conn.prepare("INSERT INTO pages (n, print, id) VALUES (?1, ?2, ?3)")?;
            for n in 0..pages {
                let (print, id) = index.page(n);
                put.execute(params![i64::from(n), signed(print), id])?;
            }
            for (table, entries) in [
                ("exact", index.exact_entries().collect::<Vec<_>>()),
                ("ids", index.id_entries().collect()),
            ] {
                let mut rows: Vec<(i64, u32)> =
                    entries.into_iter().map(|(k, n)| (signed(k), n)).collect();
                rows.sort_unstable();
                let mut put =
                    conn.prepare(&format!("INSERT INTO {table} (hash, n) VALUES (?1, ?2)"))?;
                for (hash, n) in rows {
                    put.execute(params![hash, i64::from(n)])?;
                }
            }
            let mut rows: Vec<(i64, u32, u64)> = Vec::new();
            let mut bucket = Vec::new();
            for (band, key) in index.bucket_keys().collect::<Vec<_>>() {
                bucket.clear();
                let Ok(()) = index.bucket(band, key, &mut bucket);
                rows.extend(bucket.iter().map(|(n, print)| (signed(key), *n, *print)));
            }
            rows.sort_unstable();
            let mut put = conn.prepare("INSERT INTO bands (key, n, print) VALUES (?1, ?2, ?3)")?;
            for (key, n, print) in rows {
                put.execute(params![key, i64::from(n), signed(print)])?;
            }
        }
        file.pages = pages;
        file.conn.execute_batch("COMMIT; BEGIN")?;
        Ok(file)
    }

    fn commit_now_and_then(&mut self) -> StoreResult<()> {
        self.uncommitted += 1;
        if self.uncommitted >= COMMIT_EVERY {
            self.conn.execute_batch("COMMIT; BEGIN")?;
            self.uncommitted = 0;
        }
        Ok(())
    }

    fn bucket_size(&self, key: u64) -> StoreResult<u32> {
        if let Some((_, n)) = self.sizes.iter().find(|(k, _)| *k == key) {
            return Ok(*n);
        }
        let n: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM bands WHERE key = ?1")?
            .query_row([signed(key)], |r| r.get(0))?;
        Ok(n as u32)
    }
}

impl Drop for GateFile {
    fn drop(&mut self) {
        remove(&self.path);
    }
}

impl PrintStore for GateFile {
    type Error = StoreError;

    fn len(&self) -> usize {
        self.pages as usize
    }

    fn by_id(&mut self, id_hash: u64, id: &str) -> StoreResult<Option<u32>> {
        let found: Option<(i64, String)> = self
            .conn
            .prepare_cached(
                "SELECT ids.n, pages.id FROM ids JOIN pages ON pages.n = ids.n
                 WHERE ids.hash = ?1",
            )?
            .query_row([signed(id_hash)], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(found
            .filter(|(_, stored)| stored == id)
            .map(|(n, _)| n as u32))
    }

    fn by_exact(&mut self, exact: u128) -> StoreResult<Option<u32>> {
        let n: Option<i64> = self
            .conn
            .prepare_cached("SELECT n FROM exact WHERE hash = ?1")?
            .query_row([signed(fold(exact))], |r| r.get(0))
            .optional()?;
        Ok(n.map(|n| n as u32))
    }

    fn bucket(&mut self, band: usize, key: u64, out: &mut Vec<(u32, u64)>) -> StoreResult<()> {
        if band == 0 {
            self.sizes.clear();
        }
        let from = out.len();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT n, print FROM bands WHERE key = ?1 ORDER BY n")?;
        let rows = stmt.query_map([signed(key)], |r| {
            Ok((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u64))
        })?;
        for row in rows {
            out.push(row?);
        }
        self.sizes.push((key, (out.len() - from) as u32));
        Ok(())
    }

    fn id(&mut self, page: u32) -> StoreResult<String> {
        Ok(self
            .conn
            .prepare_cached("SELECT id FROM pages WHERE n = ?1")?
            .query_row([i64::from(page)], |r| r.get(0))?)
    }

    fn insert(
        &mut self,
        page: &StoredPrint<'_>,
        keys: &[u64],
        max_per_bucket: u32,
    ) -> StoreResult<()> {
        let n = i64::from(self.pages);
        let print = signed(page.print);
        self.conn
            .prepare_cached("INSERT INTO pages (n, print, id) VALUES (?1, ?2, ?3)")?
            .execute(params![n, print, page.id])?;
        self.conn
            .prepare_cached("INSERT OR IGNORE INTO exact (hash, n) VALUES (?1, ?2)")?
            .execute(params![signed(fold(page.exact)), n])?;
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO ids (hash, n) VALUES (?1, ?2)")?
            .execute(params![signed(page.id_hash), n])?;
        for key in keys {
            if self.bucket_size(*key)? < max_per_bucket {
                self.conn
                    .prepare_cached("INSERT INTO bands (key, n, print) VALUES (?1, ?2, ?3)")?
                    .execute(params![signed(*key), n, print])?;
            }
        }
        self.sizes.clear();
        self.pages += 1;
        self.commit_now_and_then()
    }
}

/// The embedded crawl's gate store: its first `in_memory` pages in memory (about 0.25 KB
/// each), then all of them in `gate.db`, so a small crawl gates at memory speed and a
/// large one stays within a bound.
pub struct CrawlPrints {
    tier: Tier,
    in_memory: usize,
    path: PathBuf,
}

enum Tier {
    Memory(PrintIndex),
    File(GateFile),
}

impl CrawlPrints {
    /// For a gate of `max_distance` (banded as `trawl_dedup::SimGate` bands it); the file,
    /// when it comes to that, at `path`.
    pub fn new(path: &Path, max_distance: u32, in_memory: usize) -> Self {
        let banding = Banding::for_distance(max_distance.min(3));
        CrawlPrints {
            tier: Tier::Memory(PrintIndex::new(banding)),
            in_memory,
            path: path.to_path_buf(),
        }
    }

    /// The SimHash gate of `max_distance` over a new store: the embedded crawl's and
    /// `trawl ingest`'s.
    pub fn gate(path: &Path, max_distance: u32, in_memory: usize) -> SimGate<CrawlPrints> {
        SimGate::with_store(Self::new(path, max_distance, in_memory), max_distance)
    }
}

impl PrintStore for CrawlPrints {
    type Error = StoreError;

    fn len(&self) -> usize {
        match &self.tier {
            Tier::Memory(ix) => ix.len(),
            Tier::File(f) => f.len(),
        }
    }

    fn by_id(&mut self, id_hash: u64, id: &str) -> StoreResult<Option<u32>> {
        match &mut self.tier {
            Tier::Memory(ix) => Ok(ix.by_id(id_hash, id).unwrap_or_else(|e| match e {})),
            Tier::File(f) => f.by_id(id_hash, id),
        }
    }

    fn by_exact(&mut self, exact: u128) -> StoreResult<Option<u32>> {
        match &mut self.tier {
            Tier::Memory(ix) => Ok(ix.by_exact(exact).unwrap_or_else(|e| match e {})),
            Tier::File(f) => f.by_exact(exact),
        }
    }

    fn bucket(&mut self, band: usize, key: u64, out: &mut Vec<(u32, u64)>) -> StoreResult<()> {
        match &mut self.tier {
            Tier::Memory(ix) => {
                let Ok(()) = ix.bucket(band, key, out);
                Ok(())
            }
            Tier::File(f) => f.bucket(band, key, out),
        }
    }

    fn id(&mut self, page: u32) -> StoreResult<String> {
        match &mut self.tier {
            Tier::Memory(ix) => Ok(ix.id(page).unwrap_or_else(|e| match e {})),
            Tier::File(f) => f.id(page),
        }
    }

    fn insert(
        &mut self,
        page: &StoredPrint<'_>,
        keys: &[u64],
        max_per_bucket: u32,
    ) -> StoreResult<()> {
        if let Tier::Memory(ix) = &mut self.tier
            && ix.len() >= self.in_memory
        {
            let started = std::time::Instant::now();
            let file = GateFile::take_over(&self.path, ix)?;
            tracing::info!(
                pages = file.len(),
                secs = started.elapsed().as_secs_f64(),
                path = %self.path.display(),
                "the dedup gate moved to its file"
            );
            self.tier = Tier::File(file);
        }
        match &mut self.tier {
            Tier::Memory(ix) => {
                let Ok(()) = ix.insert(page, keys, max_per_bucket);
                Ok(())
            }
            Tier::File(f) => f.insert(page, keys, max_per_bucket),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_dedup::{Fingerprint, GateVerdict, MemoryGate};

    /// A small deterministic generator: families of prints a few bits apart, exact copies
    /// and ids shown twice, so every branch of the rule is met.
    fn pages(n: u64) -> Vec<(Fingerprint, String)> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out: Vec<(Fingerprint, String)> = Vec::new();
        for i in 0..n {
            let r = next();
            let fp = match (r % 7, out.len()) {
                (0 | 1, k) if k > 0 => {
                    let (base, _) = out[(next() as usize) % k];
                    let flips = (next() % 4) as u32;
                    let mut s = base.simhash;
                    for _ in 0..flips {
                        s ^= 1 << (next() % 64);
                    }
                    Fingerprint {
                        simhash: s,
                        exact: u128::from(next()),
                    }
                }
                (2, k) if k > 0 => out[(next() as usize) % k].0,
                _ => Fingerprint {
                    simhash: next(),
                    exact: u128::from(next()),
                },
            };
            let id = if r % 11 == 3 && i > 0 {
                out[(next() as usize) % out.len()].1.clone()
            } else {
                format!("http://h{}.test/p/{i}", r % 13)
            };
            out.push((fp, id));
        }
        out
    }

    #[test]
    fn the_file_gate_gives_the_memory_gates_verdicts_page_for_page() {
        let dir = tempfile::tempdir().unwrap();
        for distance in [0, 2, 3] {
            let path = dir.path().join(GATE_FILE);
            let file = SimGate::with_store(GateFile::create(&path).unwrap(), distance);
            // Moves to its file after 2,500 pages, in the middle of the families.
            let tiered_path = dir.path().join("tiered.db");
            let tiered = CrawlPrints::gate(&tiered_path, distance, 2_500);
            let memory = MemoryGate::new(distance);
            let mut copies = 0;
            for (fp, id) in pages(6_000) {
                let want = memory.check_and_insert_sync(fp, &id);
                let got = file.try_check_and_insert(fp, &id).unwrap();
                assert_eq!(got, want, "distance {distance}, page {id}");
                let got = tiered.try_check_and_insert(fp, &id).unwrap();
                assert_eq!(got, want, "distance {distance}, page {id}, tiered");
                copies += usize::from(want != GateVerdict::Kept);
            }
            assert_eq!(file.len(), memory.len());
            assert_eq!(tiered.len(), memory.len());
            assert!(copies > 1_000, "the pages exercise copies: {copies}");
            assert!(path.exists() && tiered_path.exists());
            drop(file);
            drop(tiered);
            assert!(!path.exists(), "the file goes with the gate");
            assert!(!tiered_path.exists());
        }
    }

    #[test]
    fn a_full_bucket_takes_no_more_pages_in_the_file_either() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(GATE_FILE);
        let mut file = GateFile::create(&path).unwrap();
        let mut memory = trawl_dedup::print_index::PrintIndex::new(
            trawl_dedup::simhash::Banding::for_distance(0),
        );
        for i in 0..5u64 {
            let id = format!("p{i}");
            let page = StoredPrint {
                print: 42,
                exact: u128::from(i),
                id_hash: i,
                id: &id,
            };
            file.insert(&page, &[42], 3).unwrap();
            memory.insert(&page, &[42], 3).unwrap();
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        file.bucket(0, 42, &mut a).unwrap();
        memory.bucket(0, 42, &mut b).unwrap();
        assert_eq!(a, vec![(0, 42), (1, 42), (2, 42)]);
        assert_eq!(a, b);
        assert_eq!(file.len(), 5);
        assert_eq!(file.id(4).unwrap(), "p4");
    }

    #[test]
    fn an_earlier_file_is_made_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(GATE_FILE);
        std::fs::write(&path, b"left by a killed crawl").unwrap();
        let gate = SimGate::with_store(GateFile::create(&path).unwrap(), 2);
        let fp = Fingerprint {
            simhash: 7,
            exact: 7,
        };
        assert_eq!(
            gate.try_check_and_insert(fp, "a").unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(gate.len(), 1);
    }
}
