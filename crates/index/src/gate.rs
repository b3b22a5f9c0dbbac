//! The chunk-level dedup gate: a chunk whose text is already indexed (exactly, or as a
//! near-copy by SimHash) is stored once and recorded as an alias of the first.
//!
//! Unlike the page gate it forgets: re-indexing a page removes its old chunks, and a later
//! copy of their text must then be indexed again, not pointed at a row that is gone. It is
//! seeded from the table when the index is opened, so the table stays the one truth.

use std::collections::HashMap;

use trawl_dedup::simhash::{Banding, Fingerprint, hamming};

/// Chunks of fewer words are only deduplicated exactly: a SimHash of a handful of shingles
/// says little, and two short different passages land within 2 bits too often.
pub const MIN_NEAR_WORDS: usize = 24;

struct Entry {
    id: String,
    fp: Fingerprint,
    near: bool,
    /// Chunks in the stored chunk's page: a copy from a page with fewer is the chunk's
    /// better home (it is more of that page).
    total: u32,
}

pub struct ChunkGate {
    max_distance: u32,
    banding: Banding,
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    by_id: HashMap<String, u32>,
    exact: HashMap<u128, u32>,
    bands: HashMap<(u32, u64), Vec<u32>>,
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

impl ChunkGate {
    /// `max_distance`: the largest Hamming distance that still makes a near-copy (0..=3).
    pub fn new(max_distance: u32) -> Self {
        let max_distance = max_distance.min(3);
        Self {
            max_distance,
            banding: Banding::for_distance(max_distance),
            slots: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::new(),
            exact: HashMap::new(),
            bands: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn check(&self, fp: &Fingerprint, words: usize) -> ChunkVerdict {
        if let Some(&s) = self.exact.get(&fp.exact)
            && let Some(e) = &self.slots[s as usize]
        {
            return ChunkVerdict::Alias {
                of: e.id.clone(),
                distance: 0,
            };
        }
        if words < MIN_NEAR_WORDS {
            return ChunkVerdict::New;
        }
        let mut best: Option<(u32, &Entry)> = None;
        for key in self.banding.bands(fp.simhash) {
            for &s in self.bands.get(&key).into_iter().flatten() {
                let Some(e) = &self.slots[s as usize] else {
                    continue;
                };
                let d = hamming(e.fp.simhash, fp.simhash);
                if d <= self.max_distance && best.is_none_or(|(bd, _)| d < bd) {
                    best = Some((d, e));
                }
            }
        }
        match best {
            Some((d, e)) => ChunkVerdict::Alias {
                of: e.id.clone(),
                distance: d,
            },
            None => ChunkVerdict::New,
        }
    }

    /// Chunks in the page of the stored chunk `id`.
    pub fn total(&self, id: &str) -> Option<u32> {
        let slot = *self.by_id.get(id)?;
        self.slots[slot as usize].as_ref().map(|e| e.total)
    }

    /// Records a stored chunk of a page of `total` chunks (idempotent per id).
    pub fn insert(&mut self, id: &str, fp: Fingerprint, words: usize, total: u32) {
        if self.by_id.contains_key(id) {
            return;
        }
        let near = words >= MIN_NEAR_WORDS;
        let entry = Entry {
            id: id.to_string(),
            fp,
            near,
            total,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(entry);
                s
            }
            None => {
                self.slots.push(Some(entry));
                (self.slots.len() - 1) as u32
            }
        };
        self.by_id.insert(id.to_string(), slot);
        self.exact.entry(fp.exact).or_insert(slot);
        if near {
            for key in self.banding.bands(fp.simhash) {
                self.bands.entry(key).or_default().push(slot);
            }
        }
    }

    /// Forgets a chunk that left the table.
    pub fn remove(&mut self, id: &str) {
        let Some(slot) = self.by_id.remove(id) else {
            return;
        };
        let Some(e) = self.slots[slot as usize].take() else {
            return;
        };
        if self.exact.get(&e.fp.exact) == Some(&slot) {
            self.exact.remove(&e.fp.exact);
        }
        if e.near {
            for key in self.banding.bands(e.fp.simhash) {
                if let Some(v) = self.bands.get_mut(&key) {
                    v.retain(|&s| s != slot);
                    if v.is_empty() {
                        self.bands.remove(&key);
                    }
                }
            }
        }
        self.free.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_dedup::simhash::fingerprint;

    fn words(n: usize, salt: &str) -> String {
        (0..n).map(|i| format!("w{i}{salt} ")).collect()
    }

    #[test]
    fn exact_near_and_forgotten() {
        let mut g = ChunkGate::new(2);
        let a = words(60, "");
        let fa = fingerprint(&a);
        assert_eq!(g.check(&fa, 60), ChunkVerdict::New);
        g.insert("a", fa, 60, 1);
        assert_eq!(g.total("a"), Some(1));
        // Same words, other punctuation and case: exact after normalization.
        let a2 = a.to_uppercase().replace(' ', ", ");
        assert_eq!(
            g.check(&fingerprint(&a2), 60),
            ChunkVerdict::Alias {
                of: "a".into(),
                distance: 0
            }
        );
        // One word changed at the end of 60: a near-copy within 2 bits.
        let near = format!("{} changed", &a[..a.len() - 5]);
        let fnear = fingerprint(&near);
        let d = hamming(fnear.simhash, fa.simhash);
        if d <= 2 {
            assert_eq!(
                g.check(&fnear, 60),
                ChunkVerdict::Alias {
                    of: "a".into(),
                    distance: d
                }
            );
        }
        // Unrelated text is new.
        assert_eq!(
            g.check(&fingerprint(&words(60, "x")), 60),
            ChunkVerdict::New
        );
        g.remove("a");
        assert_eq!(g.check(&fa, 60), ChunkVerdict::New);
        assert!(g.is_empty());
    }

    #[test]
    fn short_chunks_are_only_exact() {
        let mut g = ChunkGate::new(3);
        let f = Fingerprint {
            simhash: 0xffff,
            exact: 1,
        };
        g.insert("s", f, 5, 1);
        let near = Fingerprint {
            simhash: 0xfffe,
            exact: 2,
        };
        assert_eq!(g.check(&near, 5), ChunkVerdict::New);
        assert_eq!(
            g.check(&near, 100),
            ChunkVerdict::New,
            "a short stored chunk is not banded"
        );
        assert_eq!(
            g.check(
                &Fingerprint {
                    simhash: 0,
                    exact: 1
                },
                5
            ),
            ChunkVerdict::Alias {
                of: "s".into(),
                distance: 0
            }
        );
    }
}
