//! The in-process SimHash gate's storage, laid out for a crawl of millions of pages: about
//! 150 bytes a stored page plus its id, where maps of strings and vectors took ~450.
//!
//! - ids live end to end in one byte arena, found by their end offsets;
//! - a band bucket is a map entry (its newest page and its length) and a chain through the
//!   pages, one 4-byte link per page and band, instead of a vector per bucket;
//! - the maps are keyed by 64-bit hashes already, so they mix them instead of hashing
//!   them again.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::simhash::Banding;

/// For keys that are hashes or SimHash bands already: one multiply spreads their bits over
/// the word (the map takes its control bits from the top).
#[derive(Default)]
pub struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b) ^ self.0.rotate_left(8));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (x ^ self.0)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
}

type Mixed<V> = HashMap<u64, V, BuildHasherDefault<MixHasher>>;

/// No link: the end of a chain.
const END: u32 = u32::MAX;

/// Stored prints with their ids, and the band buckets over them.
pub struct PrintIndex {
    banding: Banding,
    prints: Vec<u64>,
    /// `ids[id_ends[i-1]..id_ends[i]]` is the id of page `i`.
    ids: Vec<u8>,
    id_ends: Vec<u64>,
    /// Per page and band, the page stored before it in the same bucket.
    links: Vec<u32>,
    /// Band key -> (newest page in the bucket, pages in it).
    buckets: Mixed<(u32, u32)>,
    /// Folded exact hash -> first page with it.
    exact: Mixed<u32>,
    /// Id hash -> page.
    by_id: Mixed<u32>,
}

/// The 128-bit exact hash folded to 64 bits: a false match between two pages' texts at ten
/// million pages has odds of about one in 300,000.
fn fold(exact: u128) -> u64 {
    (exact as u64) ^ ((exact >> 64) as u64)
}

impl PrintIndex {
    pub fn new(banding: Banding) -> Self {
        PrintIndex {
            banding,
            prints: Vec::new(),
            ids: Vec::new(),
            id_ends: Vec::new(),
            links: Vec::new(),
            buckets: Mixed::default(),
            exact: Mixed::default(),
            by_id: Mixed::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.prints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prints.is_empty()
    }

    pub fn print(&self, i: u32) -> u64 {
        self.prints[i as usize]
    }

    pub fn id(&self, i: u32) -> &str {
        let i = i as usize;
        let start = if i == 0 { 0 } else { self.id_ends[i - 1] } as usize;
        let bytes = &self.ids[start..self.id_ends[i] as usize];
        // Only whole `&str`s are pushed, so every stored range is UTF-8.
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    /// The page stored under `id`, if any.
    pub fn by_id(&self, id_hash: u64, id: &str) -> Option<u32> {
        self.by_id
            .get(&id_hash)
            .copied()
            .filter(|i| self.id(*i) == id)
    }

    pub fn by_exact(&self, exact: u128) -> Option<u32> {
        self.exact.get(&fold(exact)).copied()
    }

    /// The band keys of `print`: band number and band value, packed.
    pub fn keys(&self, print: u64) -> Vec<u64> {
        self.banding
            .bands(print)
            .into_iter()
            .map(|(band, value)| {
                if self.banding.count == 1 {
                    value
                } else {
                    (u64::from(band) << 32) | value
                }
            })
            .collect()
    }

    /// The pages in the bucket of `key`, oldest first.
    pub fn bucket(&self, band: usize, key: u64) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = self.buckets.get(&key).map_or(END, |(head, _)| *head);
        let bands = self.banding.count as usize;
        while at != END {
            out.push(at);
            at = self.links[at as usize * bands + band];
        }
        out.reverse();
        out
    }

    /// Stores a page; a full bucket (`max_per_bucket`) does not take it, its other bands do.
    pub fn insert(&mut self, print: u64, exact: u128, id_hash: u64, id: &str, max_per_bucket: u32) {
        let idx = self.prints.len() as u32;
        self.prints.push(print);
        self.ids.extend_from_slice(id.as_bytes());
        self.id_ends.push(self.ids.len() as u64);
        self.exact.entry(fold(exact)).or_insert(idx);
        self.by_id.insert(id_hash, idx);
        for key in self.keys(print) {
            let (head, len) = self.buckets.entry(key).or_insert((END, 0));
            if *len < max_per_bucket {
                self.links.push(*head);
                *head = idx;
                *len += 1;
            } else {
                self.links.push(END);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_back_by_id_exact_hash_and_bucket() {
        let mut ix = PrintIndex::new(Banding::for_distance(2));
        let print = 0x0123_4567_89ab_cdefu64;
        ix.insert(print, 7, 11, "http://a.test/é", 2);
        ix.insert(print ^ 1, 8, 12, "http://a.test/2", 2);
        ix.insert(print ^ 2, 9, 13, "http://a.test/3", 2);
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.id(0), "http://a.test/é");
        assert_eq!(ix.id(2), "http://a.test/3");
        assert_eq!(ix.by_id(12, "http://a.test/2"), Some(1));
        assert_eq!(ix.by_id(12, "http://a.test/other"), None);
        assert_eq!(ix.by_exact(9), Some(2));
        let keys = ix.keys(print);
        assert_eq!(keys.len(), 3);
        // Bits 0 and 1 are in band 0: the two later pages share bands 1 and 2 only, and
        // each bucket holds at most two pages, oldest first.
        assert_eq!(ix.bucket(0, keys[0]), vec![0]);
        assert_eq!(ix.bucket(1, keys[1]), vec![0, 1]);
        assert_eq!(ix.bucket(2, keys[2]), vec![0, 1]);
        assert_eq!(ix.print(2), print ^ 2);
    }
}
