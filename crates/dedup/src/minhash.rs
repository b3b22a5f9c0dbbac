//! MinHash over word 5-grams: banded LSH finds the candidates, a b-bit sketch verifies them.
//!
//! A document's shingles (its normalized word 5-grams) are hashed once with xxh3 and then
//! by [`PERMS`] multiply-shift permutations; each permutation's minimum is one MinHash
//! value. Two uses of those values:
//!
//! - **Candidates** (LSH): the first `BANDS x ROWS` = 20 x 5 values, hashed per band. A pair
//!   with Jaccard s shares a band with probability 1 - (1 - s^5)^20: 0.9996 at s = 0.8,
//!   0.47 at s = 0.5. FineWeb's 14 x 8 gives 0.92 at 0.8; a missed candidate cannot be
//!   recovered, a needless one costs one comparison, hence the higher-recall choice.
//! - **Verification**: the lowest [`BITS`] bits of all [`PERMS`] values (Li and König's
//!   b-bit MinHash), [`SKETCH_BYTES`] bytes a document. Two values are equal with
//!   probability J, and two different ones agree on their low b bits by chance with
//!   probability 2^-b, so J = (P - 2^-b) / (1 - 2^-b) from the share P of equal groups.
//!   Its standard error is sqrt(P(1-P)/K) / (1 - 2^-b): **0.015 at J = 0.8** (K = 1024,
//!   b = 2), against 0.040 for 100 full 64-bit values, in about the same 256 bytes.
//!   [`error_at`] gives it for any J. A candidate is a copy when its estimate reaches the
//!   threshold plus [`MARGIN`] (1.3 standard errors at 0.8): the best of many candidates
//!   near the threshold is the one whose estimate erred upwards, and without the margin
//!   2% of the pages flagged on the documentation crawl were under the threshold.
//!
//! The index keeps every document it is shown, copies too (but not one whose sketch equals
//! a stored one: it adds nothing), and a copy names the document it matched, itself
//! possibly a copy: a family of pages that differ a little from one to the
//! next ends up in one group, as with datatrove's and FineWeb's clusters. Only earlier
//! documents are matched, so the links never make a cycle and each group has one first
//! document, the one kept.

use std::collections::HashMap;

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::simhash::words;
pub use crate::sketch_store::{SketchStore, best_match, check_and_insert};

/// Words per shingle.
pub const NGRAM: usize = 5;
pub const BANDS: usize = 20;
pub const ROWS: usize = 5;
/// MinHash values per document (the first `BANDS * ROWS` also make the bands).
pub const PERMS: usize = 1024;
/// Bits of each value kept in the sketch.
pub const BITS: usize = 2;
pub const SKETCH_BYTES: usize = PERMS * BITS / 8;
/// The Jaccard similarity at which two documents are near-copies, unless told otherwise.
pub const DEFAULT_THRESHOLD: f64 = 0.8;
/// What an estimate must exceed the threshold by to flag a pair (see the module's note).
pub const MARGIN: f64 = 0.02;
/// Documents a band bucket holds; later ones with the same band key are reached through
/// their other bands. Without a bound, a family of ten thousand near-identical pages (a
/// site's soft 404s, one product page per colour) would make every check walk the family.
pub const MAX_BUCKET: u32 = 64;

const _: () = assert!(BANDS * ROWS <= PERMS && 8 % BITS == 0 && BANDS <= 255);

/// Hashes word n-grams into MinHash values with fixed, seeded permutations: the same text
/// gives the same values in every process, which the shared gate relies on.
pub struct MinHasher {
    a: Vec<u64>,
    b: Vec<u64>,
    ngram: usize,
}

impl Default for MinHasher {
    fn default() -> Self {
        Self::new(NGRAM)
    }
}

/// A document's MinHash: its band keys (for candidates) and its b-bit sketch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinSketch {
    /// One key per band: the band's [`ROWS`] values hashed with the band number as seed,
    /// so equal keys in different bands never meet.
    pub bands: [u64; BANDS],
    /// [`PERMS`] groups of [`BITS`] bits, packed from the low bits of each byte.
    pub bits: Vec<u8>,
}

impl MinHasher {
    pub fn new(ngram: usize) -> Self {
        // (a * x + b) mod 2^64 >> 32 over 32-bit x, with 64-bit a and b: Dietzfelbinger's
        // multiply-add-shift, 2-universal into 32 bits. (With a 32-bit multiplier the product
        // never wraps and every permutation keeps the order of x: no MinHash at all.)
        let a = (0..PERMS)
            .map(|i| xxh3_64(format!("minhash-a{i}").as_bytes()) | 1)
            .collect();
        let b = (0..PERMS)
            .map(|i| xxh3_64(format!("minhash-b{i}").as_bytes()))
            .collect();
        Self {
            a,
            b,
            ngram: ngram.max(1),
        }
    }

    /// The shingle hashes of `words` (each distinct n-gram once, sorted): the set whose
    /// Jaccard similarity the sketch estimates. A text shorter than n words is one shingle.
    pub fn shingles_of(&self, words: &[String]) -> Vec<u64> {
        let mut out: Vec<u64> = if words.is_empty() {
            Vec::new()
        } else if words.len() < self.ngram {
            vec![xxh3_64(words.join(" ").as_bytes())]
        } else {
            let mut buf = String::new();
            words
                .windows(self.ngram)
                .map(|g| {
                    buf.clear();
                    for (i, w) in g.iter().enumerate() {
                        if i > 0 {
                            buf.push(' ');
                        }
                        buf.push_str(w);
                    }
                    xxh3_64(buf.as_bytes())
                })
                .collect()
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// [`Self::shingles_of`] the normalized words of `text`.
    pub fn shingles(&self, text: &str) -> Vec<u64> {
        self.shingles_of(&words(text))
    }

    /// The [`PERMS`] MinHash values of a shingle set (all `u32::MAX` for an empty one).
    pub fn values(&self, shingles: &[u64]) -> Vec<u32> {
        let mut sig = vec![u32::MAX; PERMS];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe { fold_avx2(&mut sig, &self.a, &self.b, shingles) };
            return sig;
        }
        fold(&mut sig, &self.a, &self.b, shingles);
        sig
    }

    /// The sketch of a shingle set.
    pub fn sketch_of(&self, shingles: &[u64]) -> MinSketch {
        let values = self.values(shingles);
        let mut bands = [0u64; BANDS];
        let mut row = [0u8; ROWS * 4];
        for (band, key) in bands.iter_mut().enumerate() {
            for (r, v) in values[band * ROWS..(band + 1) * ROWS].iter().enumerate() {
                row[r * 4..r * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
            *key = xxh3_64_with_seed(&row, band as u64);
        }
        let mut bits = vec![0u8; SKETCH_BYTES];
        let per_byte = 8 / BITS;
        let mask = (1u32 << BITS) - 1;
        for (i, v) in values.iter().enumerate() {
            bits[i / per_byte] |= ((v & mask) as u8) << ((i % per_byte) * BITS);
        }
        MinSketch { bands, bits }
    }

    /// The sketch of `text`'s normalized words.
    pub fn sketch(&self, text: &str) -> MinSketch {
        self.sketch_of(&self.shingles(text))
    }
}

/// Each permutation's minimum over the shingles. The 64-bit product is split so that it
/// vectorizes: a * x mod 2^64 = a_lo * x + (a_hi * x mod 2^32) << 32 for 32-bit x, a
/// 32 x 32 -> 64-bit product and a 32-bit one per lane.
#[inline(always)]
fn fold(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    for &s in shingles {
        let x = (s ^ (s >> 32)) & 0xffff_ffff;
        for ((slot, a), b) in sig.iter_mut().zip(a).zip(b) {
            let lo = (a & 0xffff_ffff) * x;
            let hi = ((a >> 32) as u32).wrapping_mul(x as u32) as u64;
            let h = (lo.wrapping_add(hi << 32).wrapping_add(*b) >> 32) as u32;
            *slot = (*slot).min(h);
        }
    }
}

/// [`fold`] compiled for AVX2 (x86-64's baseline has no unsigned 32-bit vector minimum):
/// several times faster, chosen at run time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn fold_avx2(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    fold(sig, a, b, shingles)
}

/// Groups of [`BITS`] bits that differ in a byte of XORed sketches, for every byte value:
/// the table the Redis script counts with, and the one this side uses.
pub fn mismatch_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mask = (1u32 << BITS) - 1;
    for (x, slot) in t.iter_mut().enumerate() {
        *slot = (0..8 / BITS)
            .filter(|g| (x as u32 >> (g * BITS)) & mask != 0)
            .count() as u8;
    }
    t
}

static MISMATCH: std::sync::LazyLock<[u8; 256]> = std::sync::LazyLock::new(mismatch_table);

/// Equal groups of two sketches, or `None` as soon as fewer than `need` can be equal (the
/// comparison stops there: a candidate far below the threshold costs a few bytes).
pub fn matches_at_least(a: &[u8], b: &[u8], need: u32) -> Option<u32> {
    let allowed = (PERMS as u32).saturating_sub(need);
    let mut mismatches = 0u32;
    for (ca, cb) in a.chunks(32).zip(b.chunks(32)) {
        for (x, y) in ca.iter().zip(cb) {
            mismatches += MISMATCH[(x ^ y) as usize] as u32;
        }
        if mismatches > allowed {
            return None;
        }
    }
    Some(PERMS as u32 - mismatches)
}

/// The Jaccard estimate for `matches` equal groups of [`PERMS`].
pub fn estimate(matches: u32) -> f64 {
    let chance = 1.0 / (1u32 << BITS) as f64;
    let p = matches as f64 / PERMS as f64;
    ((p - chance) / (1.0 - chance)).clamp(0.0, 1.0)
}

/// The fewest equal groups whose estimate reaches `threshold`.
pub fn matches_needed(threshold: f64) -> u32 {
    let chance = 1.0 / (1u32 << BITS) as f64;
    let p = threshold.clamp(0.0, 1.0) * (1.0 - chance) + chance;
    // The smallest count whose estimate is at least the threshold, with a tolerance for the
    // rounding of the product (a count exactly at the threshold qualifies).
    (p * PERMS as f64 - 1e-9).ceil().max(0.0) as u32
}

/// The standard error of the estimate at true similarity `j`.
pub fn error_at(j: f64) -> f64 {
    let chance = 1.0 / (1u32 << BITS) as f64;
    let p = j * (1.0 - chance) + chance;
    (p * (1.0 - p) / PERMS as f64).sqrt() / (1.0 - chance)
}

/// The estimated Jaccard similarity of two sketches.
pub fn similarity(a: &MinSketch, b: &MinSketch) -> f64 {
    estimate(matches_at_least(&a.bits, &b.bits, 0).unwrap_or(0))
}

/// Exact Jaccard similarity of two sorted, deduplicated shingle sets.
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - inter;
    if union == 0 {
        1.0
    } else {
        inter as f64 / union as f64
    }
}

const NONE: u32 = u32::MAX;

/// Band buckets over the documents shown, in memory: each bucket a linked list through
/// `next` (newest first, [`MAX_BUCKET`] long at most), the sketches in one array. The
/// embedded crawl's first pages and the export's dedup; past a bound the crawl moves it to
/// a file (`trawl_store::sketch_file`) that answers the same, through [`SketchStore`].
#[derive(Default)]
pub struct LshIndex {
    /// Band key -> (newest document, documents in the bucket, band number).
    heads: HashMap<u64, (u32, u16, u8)>,
    /// Id hash -> the newest document stored under it.
    by_id: HashMap<u64, u32>,
    next: Vec<[u32; BANDS]>,
    sketches: Vec<u8>,
    ids: Vec<String>,
    need: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    pub id: String,
    pub similarity: f64,
}

impl SketchStore for LshIndex {
    type Error = std::convert::Infallible;

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn by_id(&mut self, id_hash: u64, id: &str) -> Result<Option<u32>, Self::Error> {
        Ok(self
            .by_id
            .get(&id_hash)
            .copied()
            .filter(|doc| self.ids[*doc as usize] == id))
    }

    fn candidates(
        &mut self,
        bands: &[u64; BANDS],
        f: &mut dyn FnMut(u32, &[u8]),
    ) -> Result<(), Self::Error> {
        for (band, key) in bands.iter().enumerate() {
            let mut at = self.heads.get(key).map_or(NONE, |(head, _, _)| *head);
            while at != NONE {
                let doc = at;
                at = self.next[doc as usize][band];
                let start = doc as usize * SKETCH_BYTES;
                f(doc, &self.sketches[start..start + SKETCH_BYTES]);
            }
        }
        Ok(())
    }

    fn id(&mut self, doc: u32) -> Result<String, Self::Error> {
        Ok(self.ids[doc as usize].clone())
    }

    fn insert(&mut self, sk: &MinSketch, id_hash: u64, id: &str) -> Result<(), Self::Error> {
        let doc = self.ids.len() as u32;
        let mut links = [NONE; BANDS];
        for (band, key) in sk.bands.iter().enumerate() {
            let (head, count, _) = self.heads.entry(*key).or_insert((NONE, 0, band as u8));
            if u32::from(*count) < MAX_BUCKET {
                links[band] = *head;
                *head = doc;
                *count += 1;
            }
        }
        self.next.push(links);
        self.sketches.extend_from_slice(&sk.bits);
        self.by_id.insert(id_hash, doc);
        self.ids.push(id.to_string());
        Ok(())
    }
}

impl LshIndex {
    /// An index that calls a candidate a near-copy when its estimated Jaccard similarity
    /// reaches `threshold` plus [`MARGIN`].
    pub fn new(threshold: f64) -> Self {
        Self {
            need: matches_needed((threshold + MARGIN).min(1.0)),
            ..Self::default()
        }
    }

    /// The best earlier document `sk` nearly copies, without storing it.
    pub fn query(&mut self, sk: &MinSketch) -> Option<Match> {
        let need = self.need;
        let Ok(best) = best_match(self, need, sk, None);
        best
    }

    /// Stores `sk` under `id` (band buckets that are full do not take it).
    pub fn insert(&mut self, sk: &MinSketch, id: &str) {
        let Ok(()) = SketchStore::insert(self, sk, crate::gate::id_hash(id), id);
    }

    /// Matches `sk` against every document stored, then stores it unless it equals its
    /// match bit for bit (it would add nothing): the export's rule, where every row is new.
    pub fn match_and_insert(&mut self, sk: &MinSketch, id: &str) -> Option<Match> {
        let need = self.need;
        let Ok(best) = best_match(self, need, sk, None);
        if best.as_ref().is_none_or(|m| m.similarity < 1.0) {
            self.insert(sk, id);
        }
        best
    }

    /// The gate's rule (see [`check_and_insert`]).
    pub fn check_and_insert(&mut self, sk: &MinSketch, id: &str) -> Option<Match> {
        let need = self.need;
        let Ok(m) = check_and_insert(self, need, sk, id);
        m
    }

    /// Documents stored, in the order they were, with their sketches: for a file store
    /// taking the index over.
    pub fn documents(&self) -> impl Iterator<Item = (u32, &[u8], &str)> + '_ {
        self.ids.iter().enumerate().map(|(doc, id)| {
            let start = doc * SKETCH_BYTES;
            (
                doc as u32,
                &self.sketches[start..start + SKETCH_BYTES],
                id.as_str(),
            )
        })
    }

    /// Every bucket's key and documents, oldest first: what a file store must hold to
    /// answer as this index does.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, Vec<u32>)> + '_ {
        self.heads.iter().map(|(key, (head, _, band))| {
            let mut docs = Vec::new();
            let mut at = *head;
            while at != NONE {
                docs.push(at);
                at = self.next[at as usize][*band as usize];
            }
            docs.reverse();
            (*key, docs)
        })
    }

    /// Id hashes with the newest document stored under each.
    pub fn id_entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.by_id.iter().map(|(h, d)| (*h, *d))
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize, tag: &str) -> String {
        (0..n)
            .map(|i| format!("{tag}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn estimate_tracks_exact_jaccard() {
        let h = MinHasher::default();
        let a = text(400, "word");
        for keep in [400usize, 380, 360, 320, 250] {
            let b = text(keep, "word") + " " + &text(400 - keep, "other");
            let exact = jaccard(&h.shingles(&a), &h.shingles(&b));
            let est = similarity(&h.sketch(&a), &h.sketch(&b));
            // Four standard errors: a failure here is a broken estimator, not bad luck.
            assert!(
                (exact - est).abs() < 4.0 * error_at(exact) + 1e-9,
                "exact {exact} estimate {est}"
            );
        }
    }

    #[test]
    fn the_vector_path_computes_the_same_values() {
        let h = MinHasher::default();
        let shingles = h.shingles(&text(300, "v"));
        let mut plain = vec![u32::MAX; PERMS];
        fold(&mut plain, &h.a, &h.b, &shingles);
        assert_eq!(h.values(&shingles), plain);
        // The split product is the 64-bit one.
        let x = (shingles[0] ^ (shingles[0] >> 32)) & 0xffff_ffff;
        for (a, b) in h.a.iter().zip(&h.b).take(16) {
            let mut one = [u32::MAX];
            fold(&mut one, &[*a], &[*b], &[shingles[0]]);
            assert_eq!(one[0], (a.wrapping_mul(x).wrapping_add(*b) >> 32) as u32);
        }
        assert!(plain.iter().all(|v| *v < u32::MAX));
    }

    #[test]
    fn thresholds_and_counts_agree() {
        for t in [0.0, 0.5, 0.8, 0.9, 1.0] {
            let need = matches_needed(t);
            assert!(estimate(need) >= t - 1e-12, "{t}: {need}");
            // (At 0 every count qualifies: the estimate is clamped at 0.)
            if t > 0.0 {
                assert!(estimate(need - 1) < t, "{t}: {need}");
            }
        }
        // P = 0.8 * 3/4 + 1/4 = 0.85 of 1024 groups: 870.4, so 871.
        assert_eq!(matches_needed(0.8), 871);
        assert!((error_at(0.8) - 0.0149).abs() < 0.001, "{}", error_at(0.8));
    }

    #[test]
    fn the_comparison_stops_only_below_the_need() {
        let h = MinHasher::default();
        let (a, b) = (h.sketch(&text(300, "x")), h.sketch(&text(300, "y")));
        let all = matches_at_least(&a.bits, &b.bits, 0).unwrap();
        assert_eq!(matches_at_least(&a.bits, &b.bits, all), Some(all));
        assert_eq!(matches_at_least(&a.bits, &b.bits, all + 1), None);
        assert_eq!(
            matches_at_least(&a.bits, &a.bits, PERMS as u32),
            Some(PERMS as u32)
        );
    }

    #[test]
    fn the_index_keeps_the_first_and_matches_copies() {
        let h = MinHasher::default();
        let mut idx = LshIndex::new(0.8);
        let base = text(300, "w");
        let near = text(290, "w") + " " + &text(10, "z");
        assert!(idx.check_and_insert(&h.sketch(&base), "a").is_none());
        let m = idx
            .check_and_insert(&h.sketch(&near), "b")
            .expect("a near copy");
        assert_eq!(m.id, "a");
        assert!(m.similarity > 0.85, "{m:?}");
        assert!(
            idx.check_and_insert(&h.sketch(&text(300, "v")), "c")
                .is_none()
        );
        // Copies are indexed too.
        assert_eq!(idx.len(), 3);
        // Shown again, each gets its first answer and is not indexed twice, even with
        // another text: "a" now reads as "b".
        assert!(idx.check_and_insert(&h.sketch(&base), "a").is_none());
        assert!(idx.check_and_insert(&h.sketch(&near), "a").is_none());
        assert_eq!(idx.check_and_insert(&h.sketch(&near), "b").unwrap().id, "a");
        assert_eq!(idx.len(), 3);
        // Short texts: one shingle each, equal or not.
        assert!(idx.check_and_insert(&h.sketch("two words"), "d").is_none());
        assert_eq!(
            idx.check_and_insert(&h.sketch("Two, words!"), "e")
                .unwrap()
                .id,
            "d"
        );
        // An equal sketch is not stored again.
        assert_eq!(idx.len(), 4);
        assert!(h.shingles("").is_empty());
    }

    #[test]
    fn a_huge_family_keeps_buckets_bounded_and_still_matches() {
        let h = MinHasher::default();
        let mut idx = LshIndex::new(0.8);
        let base: Vec<String> = (0..300).map(|i| format!("w{i}")).collect();
        for n in 0..400 {
            let mut words = base.clone();
            words[150] = format!("n{n}");
            let m = idx.check_and_insert(&h.sketch(&words.join(" ")), &format!("p{n}"));
            assert_eq!(m.is_none(), n == 0, "page {n}");
        }
        assert!(
            idx.heads
                .values()
                .all(|(_, count, _)| u32::from(*count) <= MAX_BUCKET)
        );
    }

    #[test]
    fn a_family_that_drifts_is_one_group_linked_to_earlier_pages() {
        // Each page changes 3 words of the one before: neighbours are near-copies, the
        // ends of the chain are not.
        let h = MinHasher::default();
        let mut idx = LshIndex::new(0.8);
        let mut words: Vec<String> = (0..400).map(|i| format!("w{i}")).collect();
        let mut named = Vec::new();
        for step in 0..12 {
            for k in 0..3 {
                words[(step * 31 + k * 127) % 400] = format!("s{step}k{k}");
            }
            let m = idx.check_and_insert(&h.sketch(&words.join(" ")), &format!("p{step}"));
            named.push(m.map(|m| m.id));
        }
        assert_eq!(named[0], None);
        for (step, of) in named.iter().enumerate().skip(1) {
            let of = of.as_deref().expect("each page copies an earlier one");
            let n: usize = of[1..].parse().unwrap();
            assert!(n < step, "p{step} names p{n}");
        }
    }
}
