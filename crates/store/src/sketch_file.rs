//! The embedded crawl's MinHash gate kept in a file of the crawl directory (`gate.db`, as
//! the SimHash gate's: a crawl runs one of them), so the gate does not grow the process
//! with the crawl: in memory a page costs about 1.2 KB at its peak (its 256-byte sketch,
//! its band entries and its id; `examples/gate_cost.rs`), 12 GB at ten million pages. In
//! the file it costs rows on disk; the process keeps SQLite's page cache
//! ([`crate::gate_file::CACHE_KIB`]) and the kernel caches the rest. A check is one query
//! over the page's 20 buckets.
//!
//! Like `gate_file`, the file holds nothing the crawl store does not: it is made anew at
//! each start and filled again from the pages a resumed crawl kept, with no journal and no
//! sync.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use trawl_dedup::MinGate;
use trawl_dedup::minhash::{BANDS, LshIndex, MAX_BUCKET, MinSketch, SKETCH_BYTES};
use trawl_dedup::sketch_store::SketchStore;

use crate::{StoreError, StoreResult};

/// Inserts between commits (see `gate_file`).
const COMMIT_EVERY: u32 = 512;

const TABLES: &str = "
CREATE TABLE docs (n INTEGER PRIMARY KEY, sketch BLOB NOT NULL, id TEXT NOT NULL);
CREATE TABLE ids (hash INTEGER PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE buckets (key INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (key, n))
    WITHOUT ROWID;
";

/// One query for a page's candidates: the documents of its 20 buckets with their sketches.
fn candidates_sql() -> String {
    let keys: Vec<String> = (1..=BANDS).map(|i| format!("?{i}")).collect();
    format!(
        "SELECT b.key, b.n, d.sketch FROM buckets b JOIN docs d ON d.n = b.n
         WHERE b.key IN ({})",
        keys.join(", ")
    )
}

/// SQLite keeps 64-bit integers signed; hashes go in bit for bit.
fn signed(x: u64) -> i64 {
    x as i64
}

/// The MinHash gate's documents in a file: the same numbers and buckets as
/// [`LshIndex`], so the verdicts are the same page for page.
pub struct SketchFile {
    conn: Connection,
    path: PathBuf,
    docs: u32,
    uncommitted: u32,
    /// Bucket sizes seen by the last `candidates` call: the gate asks for a page's
    /// candidates before it stores it, so the insert need not count them again.
    sizes: Vec<(u64, u32)>,
    sql: String,
}

impl SketchFile {
    /// Makes the file at `path` anew (one left by a stopped process is removed first).
    pub fn create(path: &Path) -> StoreResult<Self> {
        let conn = crate::gate_file::fresh(path, TABLES)?;
        Ok(SketchFile {
            conn,
            path: path.to_path_buf(),
            docs: 0,
            uncommitted: 0,
            sizes: Vec::new(),
            sql: candidates_sql(),
        })
    }

    /// Makes the file anew with the documents of `index`, as they are there: the same
    /// numbers, buckets and newest document per id. Rows go in in key order.
    pub fn take_over(path: &Path, index: &LshIndex) -> StoreResult<Self> {
        let mut file = Self::create(path)?;
        {
            let conn = &file.conn;
            let mut put = conn.prepare("INSERT INTO docs (n, sketch, id) VALUES (?1, ?2, ?3)")?;
            for (n, bits, id) in index.documents() {
                put.execute(params![i64::from(n), bits, id])?;
            }
            let mut rows: Vec<(i64, u32)> =
                index.id_entries().map(|(h, n)| (signed(h), n)).collect();
            rows.sort_unstable();
            let mut put = conn.prepare("INSERT INTO ids (hash, n) VALUES (?1, ?2)")?;
            for (hash, n) in rows {
                put.execute(params![hash, i64::from(n)])?;
            }
            let mut rows: Vec<(i64, u32)> = index
                .buckets()
                .flat_map(|(key, docs)| docs.into_iter().map(move |n| (signed(key), n)))
                .collect();
            rows.sort_unstable();
            let mut put = conn.prepare("INSERT INTO buckets (key, n) VALUES (?1, ?2)")?;
            for (key, n) in rows {
                put.execute(params![key, i64::from(n)])?;
            }
        }
        file.docs = index.len() as u32;
        file.conn.execute_batch("COMMIT; BEGIN")?;
        Ok(file)
    }

    fn bucket_size(&self, key: u64) -> StoreResult<u32> {
        if let Some((_, n)) = self.sizes.iter().find(|(k, _)| *k == key) {
            return Ok(*n);
        }
        let n: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM buckets WHERE key = ?1")?
            .query_row([signed(key)], |r| r.get(0))?;
        Ok(n as u32)
    }
}

impl Drop for SketchFile {
    fn drop(&mut self) {
        crate::gate_file::remove(&self.path);
    }
}

impl SketchStore for SketchFile {
    type Error = StoreError;

    fn len(&self) -> usize {
        self.docs as usize
    }

    fn by_id(&mut self, id_hash: u64, id: &str) -> StoreResult<Option<u32>> {
        let found: Option<(i64, String)> = self
            .conn
            .prepare_cached(
                "SELECT ids.n, docs.id FROM ids JOIN docs ON docs.n = ids.n WHERE ids.hash = ?1",
            )?
            .query_row([signed(id_hash)], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(found
            .filter(|(_, stored)| stored == id)
            .map(|(n, _)| n as u32))
    }

    fn candidates(
        &mut self,
        bands: &[u64; BANDS],
        f: &mut dyn FnMut(u32, &[u8]),
    ) -> StoreResult<()> {
        self.sizes.clear();
        self.sizes.extend(bands.iter().map(|k| (*k, 0)));
        let mut stmt = self.conn.prepare_cached(&self.sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(bands.iter().map(|k| signed(*k))))?;
        while let Some(row) = rows.next()? {
            let key = row.get::<_, i64>(0)? as u64;
            let doc = row.get::<_, i64>(1)? as u32;
            let bits = row
                .get_ref(2)?
                .as_blob()
                .map_err(|e| StoreError::Invalid(format!("gate sketch: {e}")))?;
            if bits.len() != SKETCH_BYTES {
                return Err(StoreError::Invalid(format!(
                    "gate sketch of {} bytes",
                    bits.len()
                )));
            }
            if let Some(s) = self.sizes.iter_mut().find(|(k, _)| *k == key) {
                s.1 += 1;
            }
            f(doc, bits);
        }
        Ok(())
    }

    fn id(&mut self, doc: u32) -> StoreResult<String> {
        Ok(self
            .conn
            .prepare_cached("SELECT id FROM docs WHERE n = ?1")?
            .query_row([i64::from(doc)], |r| r.get(0))?)
    }

    fn insert(&mut self, sk: &MinSketch, id_hash: u64, id: &str) -> StoreResult<()> {
        let n = i64::from(self.docs);
        self.conn
            .prepare_cached("INSERT INTO docs (n, sketch, id) VALUES (?1, ?2, ?3)")?
            .execute(params![n, &sk.bits, id])?;
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO ids (hash, n) VALUES (?1, ?2)")?
            .execute(params![signed(id_hash), n])?;
        // A key met twice among a page's bands counts once a band, as the memory index does.
        let mut seen: Vec<u64> = Vec::with_capacity(BANDS);
        for key in sk.bands {
            let size = self.bucket_size(key)? + seen.iter().filter(|k| **k == key).count() as u32;
            seen.push(key);
            if size < MAX_BUCKET {
                self.conn
                    .prepare_cached("INSERT OR IGNORE INTO buckets (key, n) VALUES (?1, ?2)")?
                    .execute(params![signed(key), n])?;
            }
        }
        self.sizes.clear();
        self.docs += 1;
        self.uncommitted += 1;
        if self.uncommitted >= COMMIT_EVERY {
            self.conn.execute_batch("COMMIT; BEGIN")?;
            self.uncommitted = 0;
        }
        Ok(())
    }
}

/// The embedded crawl's MinHash store: its first `in_memory` pages in memory (about
/// 1.2 KB each), then all of them in `gate.db`.
pub struct CrawlSketches {
    tier: Tier,
    in_memory: usize,
    path: PathBuf,
}

enum Tier {
    Memory(LshIndex),
    File(SketchFile),
}

impl CrawlSketches {
    pub fn new(path: &Path, threshold: f64, in_memory: usize) -> Self {
        CrawlSketches {
            tier: Tier::Memory(LshIndex::new(threshold)),
            in_memory,
            path: path.to_path_buf(),
        }
    }

    /// The MinHash gate of `threshold` over a new store: the embedded crawl's.
    pub fn gate(path: &Path, threshold: f64, in_memory: usize) -> MinGate<CrawlSketches> {
        MinGate::with_store(Self::new(path, threshold, in_memory), threshold)
    }
}

impl SketchStore for CrawlSketches {
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

    fn candidates(
        &mut self,
        bands: &[u64; BANDS],
        f: &mut dyn FnMut(u32, &[u8]),
    ) -> StoreResult<()> {
        match &mut self.tier {
            Tier::Memory(ix) => {
                let Ok(()) = ix.candidates(bands, f);
                Ok(())
            }
            Tier::File(file) => file.candidates(bands, f),
        }
    }

    fn id(&mut self, doc: u32) -> StoreResult<String> {
        match &mut self.tier {
            Tier::Memory(ix) => Ok(ix.id(doc).unwrap_or_else(|e| match e {})),
            Tier::File(f) => f.id(doc),
        }
    }

    fn insert(&mut self, sk: &MinSketch, id_hash: u64, id: &str) -> StoreResult<()> {
        if let Tier::Memory(ix) = &self.tier
            && ix.len() >= self.in_memory
        {
            let started = std::time::Instant::now();
            let file = SketchFile::take_over(&self.path, ix)?;
            tracing::info!(
                pages = file.len(),
                secs = started.elapsed().as_secs_f64(),
                path = %self.path.display(),
                "the MinHash gate moved to its file"
            );
            self.tier = Tier::File(file);
        }
        match &mut self.tier {
            Tier::Memory(ix) => {
                let Ok(()) = SketchStore::insert(ix, sk, id_hash, id);
                Ok(())
            }
            Tier::File(f) => f.insert(sk, id_hash, id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_dedup::minhash::MinHasher;
    use trawl_dedup::{GateVerdict, MemoryMinGate};

    /// Pages of families that drift a word or two from page to page, exact copies, ids
    /// shown twice and pages of their own: every branch of the rule.
    fn pages(n: usize) -> Vec<(String, String)> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out: Vec<(String, String)> = Vec::new();
        for i in 0..n {
            let r = next();
            let text = match (r % 5, out.len()) {
                (0 | 1, k) if k > 0 => {
                    let base = &out[(next() as usize) % k].0;
                    let mut words: Vec<String> = base.split(' ').map(String::from).collect();
                    let at = (next() as usize) % words.len();
                    words[at] = format!("changed{i}");
                    words.join(" ")
                }
                (2, k) if k > 0 => out[(next() as usize) % k].0.clone(),
                _ => (0..60)
                    .map(|w| format!("w{}", next() % 5_000 + w))
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            let id = if r % 11 == 3 && i > 0 {
                out[(next() as usize) % out.len()].1.clone()
            } else {
                format!("http://h{}.test/p/{i}", r % 13)
            };
            out.push((text, id));
        }
        out
    }

    #[test]
    fn the_file_gate_gives_the_memory_gates_verdicts_page_for_page() {
        let dir = tempfile::tempdir().unwrap();
        let hasher = MinHasher::default();
        let memory = MemoryMinGate::new(0.8);
        let file = MinGate::with_store(SketchFile::create(&dir.path().join("f.db")).unwrap(), 0.8);
        // Moves to its file after 700 pages, in the middle of the families.
        let tiered = CrawlSketches::gate(&dir.path().join("t.db"), 0.8, 700);
        let (mut similar, mut kept) = (0, 0);
        for (text, id) in pages(2_000) {
            let sk = hasher.sketch(&text);
            let want = memory.check_and_insert_sync(&sk, &id);
            assert_eq!(file.try_check_and_insert(&sk, &id).unwrap(), want, "{id}");
            assert_eq!(tiered.try_check_and_insert(&sk, &id).unwrap(), want, "{id}");
            match want {
                GateVerdict::Kept => kept += 1,
                _ => similar += 1,
            }
        }
        assert!(
            similar > 500 && kept > 500,
            "{similar} similar, {kept} kept"
        );
        assert_eq!(file.len(), memory.len());
        assert_eq!(tiered.len(), memory.len());
        assert!(
            dir.path().join("t.db").exists(),
            "the tiered gate moved to its file"
        );
    }
}
