//! The chunk-level dedup gate: a chunk whose text is already indexed (exactly, or as a
//! near-copy by SimHash) is stored once and recorded as an alias of the first.
//!
//! Unlike the page gate it forgets: re-indexing a page removes its old chunks, and a later
//! copy of their text must then be indexed again, not pointed at a row that is gone. It is
//! seeded from the table when the index is opened, so the table stays the one truth.

use rusqlite::{OptionalExtension, params};
use trawl_dedup::simhash::{Banding, Fingerprint, hamming};

use crate::IndexError;
use crate::state::{IndexState, sql};

/// Chunks of fewer words are only deduplicated exactly: a SimHash of a handful of shingles
/// says little, and two short different passages land within 2 bits too often.
pub const MIN_NEAR_WORDS: usize = 24;

/// The gate's rule; its chunks are rows of the indexer's state file (`crate::state`):
/// each stored chunk by id, by exact hash, and in one bucket per SimHash band when it is
/// long enough to be matched as a near-copy.
#[derive(Debug, Clone, Copy)]
pub struct ChunkGate {
    max_distance: u32,
    banding: Banding,
}

/// What the gate says of a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkVerdict {
    New,
    /// A copy of the chunk `of`, `distance` bits away (0: the same normalized text).
    Alias {
        of: String,
        distance: u32,
    },
}

/// A stored chunk's row in the gate, as [`ChunkGate::remove`] gives it back: what
/// [`ChunkGate::restore`] needs to put the chunk in again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateEntry {
    exact: Vec<u8>,
    simhash: i64,
    near: bool,
    total: i64,
}

/// SQLite keeps 64-bit integers signed; hashes go in bit for bit.
fn signed(x: u64) -> i64 {
    x as i64
}

impl ChunkGate {
    /// `max_distance`: the largest Hamming distance that still makes a near-copy (0..=3).
    pub fn new(max_distance: u32) -> Self {
        let max_distance = max_distance.min(3);
        Self {
            max_distance,
            banding: Banding::for_distance(max_distance),
        }
    }

    /// Chunks stored.
    pub fn len(&self, state: &IndexState) -> Result<usize, IndexError> {
        let n: i64 = state
            .conn
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))
            .map_err(sql)?;
        Ok(n as usize)
    }

    pub fn check(
        &self,
        state: &IndexState,
        fp: &Fingerprint,
        words: usize,
    ) -> Result<ChunkVerdict, IndexError> {
        let conn = &state.conn;
        let exact: Option<String> = conn
            .prepare_cached("SELECT id FROM chunks WHERE exact = ?1 ORDER BY n LIMIT 1")
            .map_err(sql)?
            .query_row([fp.exact.to_be_bytes()], |r| r.get(0))
            .optional()
            .map_err(sql)?;
        if let Some(of) = exact {
            return Ok(ChunkVerdict::Alias { of, distance: 0 });
        }
        if words < MIN_NEAR_WORDS {
            return Ok(ChunkVerdict::New);
        }
        // The nearest, and of equally near ones the first met band by band, stored first.
        let mut best: Option<(u32, i64)> = None;
        let mut bucket = conn
            .prepare_cached("SELECT n, simhash FROM bands WHERE band = ?1 AND key = ?2 ORDER BY n")
            .map_err(sql)?;
        for (band, key) in self.banding.bands(fp.simhash) {
            let rows = bucket
                .query_map(params![band, signed(key)], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64))
                })
                .map_err(sql)?;
            for row in rows {
                let (n, simhash) = row.map_err(sql)?;
                let d = hamming(simhash, fp.simhash);
                if d <= self.max_distance && best.is_none_or(|(bd, _)| d < bd) {
                    best = Some((d, n));
                }
            }
        }
        let Some((distance, n)) = best else {
            return Ok(ChunkVerdict::New);
        };
        let of: String = conn
            .prepare_cached("SELECT id FROM chunks WHERE n = ?1")
            .map_err(sql)?
            .query_row([n], |r| r.get(0))
            .map_err(sql)?;
        Ok(ChunkVerdict::Alias { of, distance })
    }

    /// Chunks in the page of the stored chunk `id`.
    pub fn total(&self, state: &IndexState, id: &str) -> Result<Option<u32>, IndexError> {
        state
            .conn
            .prepare_cached("SELECT total FROM chunks WHERE id = ?1")
            .map_err(sql)?
            .query_row([id], |r| r.get::<_, i64>(0))
            .optional()
            .map(|t| t.map(|t| t as u32))
            .map_err(sql)
    }

    /// Records a stored chunk of a page of `total` chunks (idempotent per id).
    pub fn insert(
        &self,
        state: &mut IndexState,
        id: &str,
        fp: Fingerprint,
        words: usize,
        total: u32,
    ) -> Result<(), IndexError> {
        let entry = GateEntry {
            exact: fp.exact.to_be_bytes().to_vec(),
            simhash: signed(fp.simhash),
            near: words >= MIN_NEAR_WORDS,
            total: i64::from(total),
        };
        self.restore(state, id, &entry)
    }

    /// Puts back a chunk [`Self::remove`] took out (idempotent per id).
    pub fn restore(
        &self,
        state: &mut IndexState,
        id: &str,
        entry: &GateEntry,
    ) -> Result<(), IndexError> {
        state.dirty()?;
        let conn = &state.conn;
        let added = conn
            .prepare_cached(
                "INSERT OR IGNORE INTO chunks (id, exact, simhash, near, total)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(sql)?
            .execute(params![
                id,
                entry.exact,
                entry.simhash,
                entry.near,
                entry.total
            ])
            .map_err(sql)?;
        if added == 0 {
            return Ok(());
        }
        if entry.near {
            let n = conn.last_insert_rowid();
            let mut put = conn
                .prepare_cached("INSERT INTO bands (band, key, n, simhash) VALUES (?1, ?2, ?3, ?4)")
                .map_err(sql)?;
            for (band, key) in self.banding.bands(entry.simhash as u64) {
                put.execute(params![band, signed(key), n, entry.simhash])
                    .map_err(sql)?;
            }
        }
        state.changed()
    }

    /// Forgets a chunk that left the table (or is leaving it); what it was, when the gate
    /// had it.
    pub fn remove(
        &self,
        state: &mut IndexState,
        id: &str,
    ) -> Result<Option<GateEntry>, IndexError> {
        state.dirty()?;
        let conn = &state.conn;
        let gone: Option<(i64, GateEntry)> = conn
            .prepare_cached(
                "DELETE FROM chunks WHERE id = ?1 RETURNING n, exact, simhash, near, total",
            )
            .map_err(sql)?
            .query_row([id], |r| {
                let entry = GateEntry {
                    exact: r.get(1)?,
                    simhash: r.get(2)?,
                    near: r.get(3)?,
                    total: r.get(4)?,
                };
                Ok((r.get(0)?, entry))
            })
            .optional()
            .map_err(sql)?;
        let Some((n, entry)) = gone else {
            return Ok(None);
        };
        if entry.near {
            let mut del = conn
                .prepare_cached("DELETE FROM bands WHERE band = ?1 AND key = ?2 AND n = ?3")
                .map_err(sql)?;
            for (band, key) in self.banding.bands(entry.simhash as u64) {
                del.execute(params![band, signed(key), n]).map_err(sql)?;
            }
        }
        state.changed()?;
        Ok(Some(entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_dedup::simhash::fingerprint;

    fn state() -> (tempfile::TempDir, IndexState) {
        let dir = tempfile::tempdir().unwrap();
        let s = IndexState::create(dir.path()).unwrap();
        (dir, s)
    }

    fn words(n: usize, salt: &str) -> String {
        (0..n).map(|i| format!("w{i}{salt} ")).collect()
    }

    fn alias(of: &str, distance: u32) -> ChunkVerdict {
        ChunkVerdict::Alias {
            of: of.into(),
            distance,
        }
    }

    #[test]
    fn exact_near_and_forgotten() {
        let g = ChunkGate::new(2);
        let (_dir, mut s) = state();
        let a = words(60, "");
        let fa = fingerprint(&a);
        assert_eq!(g.check(&s, &fa, 60).unwrap(), ChunkVerdict::New);
        g.insert(&mut s, "a", fa, 60, 1).unwrap();
        g.insert(&mut s, "a", fa, 60, 9).unwrap();
        assert_eq!(g.total(&s, "a").unwrap(), Some(1), "insert is once per id");
        // Same words, other punctuation and case: exact after normalization.
        let a2 = a.to_uppercase().replace(' ', ", ");
        assert_eq!(g.check(&s, &fingerprint(&a2), 60).unwrap(), alias("a", 0));
        // One word changed at the end of 60: a near-copy within 2 bits.
        let near = format!("{} changed", &a[..a.len() - 5]);
        let fnear = fingerprint(&near);
        let d = hamming(fnear.simhash, fa.simhash);
        if d <= 2 {
            assert_eq!(g.check(&s, &fnear, 60).unwrap(), alias("a", d));
        }
        // Unrelated text is new.
        let fx = fingerprint(&words(60, "x"));
        assert_eq!(g.check(&s, &fx, 60).unwrap(), ChunkVerdict::New);
        g.remove(&mut s, "a").unwrap();
        g.remove(&mut s, "a").unwrap();
        assert_eq!(g.check(&s, &fa, 60).unwrap(), ChunkVerdict::New);
        assert_eq!(g.total(&s, "a").unwrap(), None);
        assert_eq!(g.len(&s).unwrap(), 0);
    }

    #[test]
    fn the_nearest_stored_chunk_is_named_and_a_removed_one_leaves_its_buckets() {
        let g = ChunkGate::new(3);
        let (_dir, mut s) = state();
        let base = 0x0123_4567_89ab_cdefu64;
        let print = |simhash: u64, exact: u128| Fingerprint { simhash, exact };
        g.insert(&mut s, "three", print(base ^ 0b111, 1), 50, 4)
            .unwrap();
        g.insert(&mut s, "one", print(base ^ 0b1, 2), 50, 4)
            .unwrap();
        g.insert(&mut s, "far", print(!base, 3), 50, 4).unwrap();
        assert_eq!(g.check(&s, &print(base, 9), 50).unwrap(), alias("one", 1));
        g.remove(&mut s, "one").unwrap();
        assert_eq!(g.check(&s, &print(base, 9), 50).unwrap(), alias("three", 3));
        g.remove(&mut s, "three").unwrap();
        assert_eq!(g.check(&s, &print(base, 9), 50).unwrap(), ChunkVerdict::New);
        let left: i64 = s
            .conn
            .query_row("SELECT count(*) FROM bands", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 4, "only the remaining chunk's four bands");
        // Removed rows leave nothing that a later chunk could be mistaken for.
        g.insert(&mut s, "new", print(base ^ 0b11, 4), 50, 4)
            .unwrap();
        assert_eq!(g.check(&s, &print(base, 9), 50).unwrap(), alias("new", 2));
        assert_eq!(g.len(&s).unwrap(), 2);
    }

    #[test]
    fn short_chunks_are_only_exact() {
        let g = ChunkGate::new(3);
        let (_dir, mut s) = state();
        let f = Fingerprint {
            simhash: 0xffff,
            exact: 1,
        };
        g.insert(&mut s, "s", f, 5, 1).unwrap();
        let near = Fingerprint {
            simhash: 0xfffe,
            exact: 2,
        };
        assert_eq!(g.check(&s, &near, 5).unwrap(), ChunkVerdict::New);
        assert_eq!(
            g.check(&s, &near, 100).unwrap(),
            ChunkVerdict::New,
            "a short stored chunk is not banded"
        );
        let same = Fingerprint {
            simhash: 0,
            exact: 1,
        };
        assert_eq!(g.check(&s, &same, 5).unwrap(), alias("s", 0));
    }
}
