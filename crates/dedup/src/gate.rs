//! The dedup gate: check a fingerprint against everything kept so far and insert it when it
//! is new, as one step.

use std::sync::Mutex;

use async_trait::async_trait;

use crate::minhash::{LshIndex, MARGIN, MinHasher, MinSketch, matches_needed};
use crate::print_index::PrintIndex;
use crate::print_store::{PrintStore, StoredPrint, band_keys};
use crate::simhash::{Banding, Fingerprint, hamming};
use crate::sketch_store::SketchStore;
use xxhash_rust::xxh3::xxh3_64;

#[derive(Debug, Clone, PartialEq)]
pub enum GateVerdict {
    /// First of its kind: kept.
    Kept,
    /// A copy of `of` (an earlier page, itself kept or a copy) by SimHash; distance 0 for
    /// an exact copy.
    Duplicate { of: String, distance: u32 },
    /// A near-copy of `of` by MinHash: `similarity` is the estimated Jaccard similarity of
    /// their word 5-grams.
    Similar { of: String, similarity: f32 },
}

impl GateVerdict {
    /// The id of the page this one copies, if it is a copy.
    pub fn original(&self) -> Option<&str> {
        match self {
            GateVerdict::Kept => None,
            GateVerdict::Duplicate { of, .. } | GateVerdict::Similar { of, .. } => Some(of),
        }
    }
}

/// Which fingerprint a page gate compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateMethod {
    /// 64-bit SimHash within a Hamming distance (and the exact hash).
    SimHash,
    /// MinHash-LSH candidates over word 5-grams, verified by the b-bit sketch.
    MinHash,
}

/// What a gate is shown of a page: its fingerprint always, its MinHash sketch when the gate
/// compares those ([`Gate::method`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GatePage {
    pub fp: Fingerprint,
    pub minhash: Option<MinSketch>,
}

impl From<Fingerprint> for GatePage {
    fn from(fp: Fingerprint) -> Self {
        GatePage { fp, minhash: None }
    }
}

impl GatePage {
    /// The page as `method` needs it: the fingerprint of `text`, and its sketch for MinHash.
    pub fn of(text: &str, method: GateMethod) -> Self {
        let words = crate::simhash::words(text);
        let fp = crate::simhash::fingerprint_words(&words);
        let minhash = (method == GateMethod::MinHash).then(|| {
            static HASHER: std::sync::LazyLock<MinHasher> =
                std::sync::LazyLock::new(MinHasher::default);
            HASHER.sketch_of(&HASHER.shingles_of(&words))
        });
        GatePage { fp, minhash }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The shared store failed (`trawl_cluster::redis_gate`: the Redis error's message).
    #[error("Redis: {0}")]
    Redis(String),
    #[error("gate reply: {0}")]
    Reply(String),
    /// The gate's own store failed (a file gate's disk).
    #[error("gate store: {0}")]
    Store(String),
    /// A MinHash gate was shown a page without its sketch.
    #[error("the MinHash gate needs the page's sketch")]
    NoSketch,
}

#[async_trait]
pub trait Gate: Send + Sync {
    /// What the gate compares, so callers make the page's sketch only when it is needed.
    fn method(&self) -> GateMethod {
        GateMethod::SimHash
    }

    /// Keeps `id` unless a page near enough was shown before it under another id, and
    /// remembers it. Idempotent per id: a redelivered page gets its first verdict.
    async fn check_and_insert(&self, page: &GatePage, id: &str) -> Result<GateVerdict, GateError>;
}

/// The hash a gate knows a page's id by (both runtimes: a redelivery is found by it).
pub fn id_hash(id: &str) -> u64 {
    xxh3_64(id.as_bytes())
}

/// Prints a SimHash band bucket holds; later ones with the same band value are reached
/// through their other bands. Random prints put about 5 in a 21-bit band at 10 million
/// pages; a family of thousands of pages a bit or two apart would fill one without bound.
pub const MAX_PRINTS_PER_BUCKET: usize = 256;

/// The SimHash gate of one process, over a [`PrintStore`]: in memory ([`MemoryGate`]) or
/// in a file (`trawl_store::gate_file`, the embedded crawl's). Every page with a
/// fingerprint of its own is stored, copies too (a page whose print is already stored, an
/// exact copy among them, adds nothing), so a family of pages a few bits apart from one to
/// the next forms one group: a copy names the stored page nearest to it, itself possibly a
/// copy, and only pages stored before it, so the links never make a cycle. On the
/// documentation crawl this finds twice the near-copy pairs at the same precision as
/// storing the kept pages only (`bench/dedup`).
pub struct SimGate<S> {
    inner: Mutex<S>,
    banding: Banding,
    max_distance: u32,
}

/// The SimHash gate in memory: about 150 bytes a page plus its id (see [`PrintIndex`]).
pub type MemoryGate = SimGate<PrintIndex>;

impl MemoryGate {
    /// `max_distance` is at most 3 (see [`Banding`]); larger values are clamped.
    pub fn new(max_distance: u32) -> Self {
        let banding = Banding::for_distance(max_distance.min(3));
        SimGate::with_store(PrintIndex::new(banding), max_distance)
    }

    /// The same check without the async interface, for threaded callers and restores.
    pub fn check_and_insert_sync(&self, fp: Fingerprint, id: &str) -> GateVerdict {
        let Ok(v) = self.check(fp, id, true);
        v
    }

    /// The same rule with no regard to ids, for `trawl ingest`, where a record id seen
    /// again (one archive read twice) is a copy, not a redelivery.
    pub fn match_and_insert_sync(&self, fp: Fingerprint, id: &str) -> GateVerdict {
        let Ok(v) = self.check(fp, id, false);
        v
    }
}

impl<S: PrintStore> SimGate<S> {
    /// A gate over `store`, which must be empty or hold pages banded for the same
    /// distance. `max_distance` is at most 3; larger values are clamped.
    pub fn with_store(store: S, max_distance: u32) -> Self {
        let max_distance = max_distance.min(3);
        Self {
            inner: Mutex::new(store),
            banding: Banding::for_distance(max_distance),
            max_distance,
        }
    }

    /// Pages stored.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The check without the async interface, for threaded callers and restores; an error
    /// is the store's.
    pub fn try_check_and_insert(&self, fp: Fingerprint, id: &str) -> Result<GateVerdict, S::Error> {
        self.check(fp, id, true)
    }

    /// Ingest's rule (see [`MemoryGate::match_and_insert_sync`]); an error is the store's.
    pub fn try_match_and_insert(&self, fp: Fingerprint, id: &str) -> Result<GateVerdict, S::Error> {
        self.check(fp, id, false)
    }

    /// The same rule as `trawl_cluster::redis_gate`, candidate for candidate: an exact copy
    /// of another page names it; otherwise the nearest stored page within the distance,
    /// the first met (band by band, oldest first) among equals. A page shown again (a
    /// redelivery) is known by its id and matched only against the pages stored before it,
    /// so it gets its first answer even if its text changed.
    fn check(&self, fp: Fingerprint, id: &str, by_id: bool) -> Result<GateVerdict, S::Error> {
        let mut ix = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let id_hash = id_hash(id);
        let own = if by_id { ix.by_id(id_hash, id)? } else { None };
        let earlier = |i: u32| own.is_none_or(|o| i < o);
        if let Some(i) = ix.by_exact(fp.exact)?
            && earlier(i)
        {
            let of = ix.id(i)?;
            if !by_id || of != id {
                return Ok(GateVerdict::Duplicate { of, distance: 0 });
            }
        }
        let keys = band_keys(&self.banding, fp.simhash);
        let mut cands: Vec<(u32, u32)> = Vec::new();
        let mut bucket = Vec::new();
        for (band, key) in keys.iter().enumerate() {
            bucket.clear();
            ix.bucket(band, *key, &mut bucket)?;
            for &(i, print) in &bucket {
                let d = hamming(print, fp.simhash);
                if d <= self.max_distance && !cands.iter().any(|(_, c)| *c == i) {
                    cands.push((d, i));
                }
            }
        }
        // A candidate's id is read only where it may be the page's own (a file store
        // reads it from disk); the winner's is read once, below.
        let mut best: Option<(u32, u32)> = None;
        for &(d, i) in &cands {
            if earlier(i) && best.is_none_or(|(bd, _)| d < bd) && (!by_id || ix.id(i)? != id) {
                best = Some((d, i));
            }
        }
        // Not stored: a redelivery, or a print already stored. A full bucket takes no more
        // prints; the page stays known by its id and exact hash.
        if own.is_none() && !cands.iter().any(|(d, _)| *d == 0) {
            let page = StoredPrint {
                print: fp.simhash,
                exact: fp.exact,
                id_hash,
                id,
            };
            ix.insert(&page, &keys, MAX_PRINTS_PER_BUCKET as u32)?;
        }
        Ok(match best {
            Some((distance, i)) => GateVerdict::Duplicate {
                of: ix.id(i)?,
                distance,
            },
            None => GateVerdict::Kept,
        })
    }
}

#[async_trait]
impl<S: PrintStore + 'static> Gate for SimGate<S> {
    async fn check_and_insert(&self, page: &GatePage, id: &str) -> Result<GateVerdict, GateError> {
        self.check(page.fp, id, true)
            .map_err(|e| GateError::Store(e.to_string()))
    }
}

/// The MinHash gate of the embedded runtime over a [`SketchStore`]: every page shown is
/// stored (copies too: a copy may name a copy, see [`crate::minhash`]). In memory
/// ([`MemoryMinGate`]) a page costs its sketch ([`crate::minhash::SKETCH_BYTES`]), 4 bytes
/// and up to one map entry per band, and its id; the embedded crawl moves its store to a
/// file past a bound (`trawl_store::sketch_file::CrawlSketches`).
pub struct MinGate<S> {
    store: Mutex<S>,
    need: u32,
}

/// The MinHash gate with its sketches in memory.
pub type MemoryMinGate = MinGate<LshIndex>;

impl MinGate<LshIndex> {
    /// Near-copies are pages whose estimated word 5-gram Jaccard similarity with an earlier
    /// page reaches `threshold` (plus [`crate::minhash::MARGIN`]).
    pub fn new(threshold: f64) -> Self {
        Self::with_store(LshIndex::new(threshold), threshold)
    }
}

impl<S: SketchStore> MinGate<S> {
    pub fn with_store(store: S, threshold: f64) -> Self {
        MinGate {
            store: Mutex::new(store),
            need: matches_needed((threshold + MARGIN).min(1.0)),
        }
    }

    pub fn len(&self) -> usize {
        self.store.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The check without the async interface, for threaded callers and restores.
    pub fn try_check_and_insert(&self, sk: &MinSketch, id: &str) -> Result<GateVerdict, S::Error> {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        Ok(
            match crate::sketch_store::check_and_insert(&mut *store, self.need, sk, id)? {
                None => GateVerdict::Kept,
                Some(m) => GateVerdict::Similar {
                    of: m.id,
                    similarity: m.similarity as f32,
                },
            },
        )
    }
}

impl MinGate<LshIndex> {
    /// The memory gate's check, which cannot fail.
    pub fn check_and_insert_sync(&self, sk: &MinSketch, id: &str) -> GateVerdict {
        let Ok(v) = self.try_check_and_insert(sk, id);
        v
    }
}

#[async_trait]
impl<S: SketchStore + 'static> Gate for MinGate<S> {
    fn method(&self) -> GateMethod {
        GateMethod::MinHash
    }

    async fn check_and_insert(&self, page: &GatePage, id: &str) -> Result<GateVerdict, GateError> {
        let sk = page.minhash.as_ref().ok_or(GateError::NoSketch)?;
        // A file store's lookups are blocking I/O, like the SimHash file gate's.
        self.try_check_and_insert(sk, id)
            .map_err(|e| GateError::Store(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(simhash: u64, exact: u128) -> GatePage {
        Fingerprint { simhash, exact }.into()
    }

    #[tokio::test]
    async fn keeps_first_and_flags_copies_within_distance() {
        let g = MemoryGate::new(2);
        let base = 0xdead_beef_0123_4567u64;
        assert_eq!(
            g.check_and_insert(&fp(base, 1), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(
            g.check_and_insert(&fp(base, 1), "b").await.unwrap(),
            GateVerdict::Duplicate {
                of: "a".into(),
                distance: 0
            }
        );
        // Two bits apart, in two different bands: still found through the other bands.
        let near = base ^ (1 << 3) ^ (1 << 40);
        assert_eq!(
            g.check_and_insert(&fp(near, 2), "c").await.unwrap(),
            GateVerdict::Duplicate {
                of: "a".into(),
                distance: 2
            }
        );
        let far = base ^ 0b111;
        assert_eq!(
            g.check_and_insert(&fp(far, 3), "d").await.unwrap(),
            GateVerdict::Kept
        );
        // Stored: a, the near copy c (a print of its own), d; not the exact copy b.
        assert_eq!(g.len(), 3);
    }

    #[tokio::test]
    async fn a_redelivered_page_is_kept_not_its_own_copy() {
        let g = MemoryGate::new(2);
        assert_eq!(
            g.check_and_insert(&fp(7, 7), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(
            g.check_and_insert(&fp(7, 7), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(
            g.check_and_insert(&fp(7 ^ 1, 8), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(g.len(), 1);
    }

    #[tokio::test]
    async fn distance_three_is_always_found_with_four_bands() {
        let g = MemoryGate::new(3);
        let base = 0x0f0f_f0f0_1234_abcdu64;
        g.check_and_insert(&fp(base, 1), "a").await.unwrap();
        // Flip 3 bits in 3 different bands: the fourth band is equal.
        let near = base ^ (1 << 1) ^ (1 << 17) ^ (1 << 33);
        assert!(matches!(
            g.check_and_insert(&fp(near, 2), "b").await.unwrap(),
            GateVerdict::Duplicate { distance: 3, .. }
        ));
    }
}

#[cfg(test)]
mod min_tests {
    use super::*;

    fn page(text: &str) -> GatePage {
        GatePage::of(text, GateMethod::MinHash)
    }

    fn words(n: usize, tag: &str) -> String {
        (0..n).map(|i| format!("{tag}{i} ")).collect()
    }

    #[tokio::test]
    async fn the_minhash_gate_keeps_the_first_and_names_it_for_copies() {
        let g = MemoryMinGate::new(0.8);
        let base = words(200, "a");
        let near = words(196, "a") + &words(4, "b");
        assert_eq!(
            g.check_and_insert(&page(&base), "one").await.unwrap(),
            GateVerdict::Kept
        );
        match g.check_and_insert(&page(&near), "two").await.unwrap() {
            GateVerdict::Similar { of, similarity } => {
                assert_eq!(of, "one");
                assert!(similarity > 0.85 && similarity <= 1.0, "{similarity}");
            }
            other => panic!("{other:?}"),
        }
        // Redelivered: itself, not a copy of anything.
        assert_eq!(
            g.check_and_insert(&page(&base), "one").await.unwrap(),
            GateVerdict::Kept
        );
        let other = words(200, "c");
        assert_eq!(
            g.check_and_insert(&page(&other), "three").await.unwrap(),
            GateVerdict::Kept
        );
        // Every page is indexed, the copy too.
        assert_eq!(g.len(), 3);
        // A SimHash page (no sketch) is refused, not kept.
        let fp: GatePage = page(&base).fp.into();
        assert!(matches!(
            g.check_and_insert(&fp, "four").await,
            Err(GateError::NoSketch)
        ));
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    fn fp(simhash: u64, exact: u128) -> Fingerprint {
        Fingerprint { simhash, exact }
    }

    #[test]
    fn a_family_a_few_bits_apart_chains_to_earlier_pages() {
        let g = MemoryGate::new(2);
        let a = 0x1234_5678_9abc_def0u64;
        let b = a ^ 0b11; // 2 from a
        let c = b ^ 0b1100; // 2 from b, 4 from a
        assert_eq!(g.check_and_insert_sync(fp(a, 1), "a"), GateVerdict::Kept);
        let vb = g.check_and_insert_sync(fp(b, 2), "b");
        assert_eq!(
            vb,
            GateVerdict::Duplicate {
                of: "a".into(),
                distance: 2
            }
        );
        let vc = g.check_and_insert_sync(fp(c, 3), "c");
        assert_eq!(
            vc,
            GateVerdict::Duplicate {
                of: "b".into(),
                distance: 2
            }
        );
        // Shown again, each gets its first answer (b is not matched to the later c).
        assert_eq!(g.check_and_insert_sync(fp(b, 2), "b"), vb);
        assert_eq!(g.check_and_insert_sync(fp(c, 3), "c"), vc);
        assert_eq!(g.check_and_insert_sync(fp(a, 1), "a"), GateVerdict::Kept);
        assert_eq!(g.len(), 3);
        // A redelivery whose text changed (a replica's boilerplate lines differ) is known
        // by its id: a's new print is within reach of b and c only, still it is kept.
        assert_eq!(
            g.check_and_insert_sync(fp(c ^ 1, 9), "a"),
            GateVerdict::Kept
        );
        assert_eq!(g.len(), 3);
        // Ingest's rule: a record id seen again is a copy (one archive read twice).
        assert_eq!(
            g.match_and_insert_sync(fp(a, 1), "a"),
            GateVerdict::Duplicate {
                of: "a".into(),
                distance: 0
            }
        );
        // An exact copy of the copy names it, and is not stored.
        let vd = g.check_and_insert_sync(fp(c, 3), "d");
        assert_eq!(
            vd,
            GateVerdict::Duplicate {
                of: "c".into(),
                distance: 0
            }
        );
        assert_eq!(g.len(), 3);
    }
}
