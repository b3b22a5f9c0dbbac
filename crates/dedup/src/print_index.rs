//! The in-process SimHash gate's storage, laid out for a crawl of millions of pages: about
//! 150 bytes a stored page plus its id, where maps of strings and vectors took ~450.
//!
//! - ids live end to end in one byte arena, found by their end offsets;
//! - a band bucket is a map entry (its newest page and its length) and a chain through the
//!   pages, one 4-byte link per page and band, instead of a vector per bucket;
//! - the maps are keyed by 64-bit hashes already, so they mix them instead of hashing
//!   them again.

use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::{BuildHasherDefault, Hasher};

use crate::print_store::{PrintStore, StoredPrint, fold};
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
    /// Bands a page has: its links are `bands` to a page.
    bands: usize,
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

impl PrintIndex {
    pub fn new(banding: Banding) -> Self {
        PrintIndex {
            bands: banding.count as usize,
            prints: Vec::new(),
            ids: Vec::new(),
            id_ends: Vec::new(),
            links: Vec::new(),
            buckets: Mixed::default(),
            exact: Mixed::default(),
            by_id: Mixed::default(),
        }
    }

    /// Page `i`'s print and id, for a store that takes the pages over.
    pub fn page(&self, i: u32) -> (u64, &str) {
        (self.prints[i as usize], self.id_str(i))
    }

    /// The first page of each folded exact hash ([`crate::print_store::fold`]).
    pub fn exact_entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.exact.iter().map(|(k, v)| (*k, *v))
    }

    /// The newest page of each id hash.
    pub fn id_entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.by_id.iter().map(|(k, v)| (*k, *v))
    }

    /// Every bucket's band number and key.
    pub fn bucket_keys(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let bands = self.bands;
        self.buckets
            .keys()
            .map(move |k| (if bands == 1 { 0 } else { (*k >> 32) as usize }, *k))
    }

    fn id_str(&self, i: u32) -> &str {
        let i = i as usize;
        let start = if i == 0 { 0 } else { self.id_ends[i - 1] } as usize;
        let bytes = &self.ids[start..self.id_ends[i] as usize];
        // Only whole `&str`s are pushed, so every stored range is UTF-8.
        std::str::from_utf8(bytes).unwrap_or_default()
    }
}

impl PrintStore for PrintIndex {
    type Error = Infallible;

    fn len(&self) -> usize {
        self.prints.len()
    }

    fn by_id(&mut self, id_hash: u64, id: &str) -> Result<Option<u32>, Infallible> {
        Ok(self
            .by_id
            .get(&id_hash)
            .copied()
            .filter(|i| self.id_str(*i) == id))
    }

    fn by_exact(&mut self, exact: u128) -> Result<Option<u32>, Infallible> {
        Ok(self.exact.get(&fold(exact)).copied())
    }

    fn bucket(
        &mut self,
        band: usize,
        key: u64,
        out: &mut Vec<(u32, u64)>,
    ) -> Result<(), Infallible> {
        let from = out.len();
        let mut at = self.buckets.get(&key).map_or(END, |(head, _)| *head);
        while at != END {
            out.push((at, self.prints[at as usize]));
            at = self.links[at as usize * self.bands + band];
        }
        out[from..].reverse();
        Ok(())
    }

    fn id(&mut self, page: u32) -> Result<String, Infallible> {
        Ok(self.id_str(page).to_string())
    }

    fn insert(
        &mut self,
        page: &StoredPrint<'_>,
        keys: &[u64],
        max_per_bucket: u32,
    ) -> Result<(), Infallible> {
        let idx = self.prints.len() as u32;
        self.prints.push(page.print);
        self.ids.extend_from_slice(page.id.as_bytes());
        self.id_ends.push(self.ids.len() as u64);
        self.exact.entry(fold(page.exact)).or_insert(idx);
        self.by_id.insert(page.id_hash, idx);
        for key in keys {
            let (head, len) = self.buckets.entry(*key).or_insert((END, 0));
            if *len < max_per_bucket {
                self.links.push(*head);
                *head = idx;
                *len += 1;
            } else {
                self.links.push(END);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print_store::band_keys;

    #[test]
    fn pages_come_back_by_id_exact_hash_and_bucket() {
        let banding = Banding::for_distance(2);
        let mut ix = PrintIndex::new(banding);
        let print = 0x0123_4567_89ab_cdefu64;
        let pages = [
            (print, 7, 11, "http://a.test/é"),
            (print ^ 1, 8, 12, "http://a.test/2"),
            (print ^ 2, 9, 13, "http://a.test/3"),
        ];
        for (print, exact, id_hash, id) in pages {
            let page = StoredPrint {
                print,
                exact,
                id_hash,
                id,
            };
            ix.insert(&page, &band_keys(&banding, print), 2).unwrap();
        }
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.id(0).unwrap(), "http://a.test/é");
        assert_eq!(ix.id(2).unwrap(), "http://a.test/3");
        assert_eq!(ix.by_id(12, "http://a.test/2").unwrap(), Some(1));
        assert_eq!(ix.by_id(12, "http://a.test/other").unwrap(), None);
        assert_eq!(ix.by_exact(9).unwrap(), Some(2));
        let keys = band_keys(&banding, print);
        assert_eq!(keys.len(), 3);
        let bucket = |ix: &mut PrintIndex, band: usize| {
            let mut out = Vec::new();
            ix.bucket(band, keys[band], &mut out).unwrap();
            out.into_iter().map(|(i, _)| i).collect::<Vec<_>>()
        };
        // Bits 0 and 1 are in band 0: the two later pages share bands 1 and 2 only, and
        // each bucket holds at most two pages, oldest first.
        assert_eq!(bucket(&mut ix, 0), vec![0]);
        assert_eq!(bucket(&mut ix, 1), vec![0, 1]);
        assert_eq!(bucket(&mut ix, 2), vec![0, 1]);
        let mut out = Vec::new();
        ix.bucket(2, keys[2], &mut out).unwrap();
        assert_eq!(out[1].1, print ^ 1);
    }
}
