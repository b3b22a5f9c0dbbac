//! Where a MinHash gate keeps its sketches: in memory ([`crate::minhash::LshIndex`]) or, for
//! crawls of millions of pages, in a file of the crawl's (`trawl_store::sketch_file`). The
//! gate's rule is written once over this interface, so every store gives the same verdict
//! page for page.

use std::collections::HashSet;

use crate::minhash::{BANDS, Match, MinSketch, PERMS, estimate, matches_at_least};

/// Documents are numbered from 0 in the order they were stored.
pub trait SketchStore: Send {
    /// Why a store could not answer (a file store's I/O; the memory store never fails).
    type Error: std::fmt::Display;

    /// Documents stored.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest document stored under `id` (found by its hash, confirmed by the id).
    fn by_id(&mut self, id_hash: u64, id: &str) -> Result<Option<u32>, Self::Error>;

    /// Calls `f` with every document in the buckets of `bands` and its sketch's bits; a
    /// document in several of them may come more than once.
    fn candidates(
        &mut self,
        bands: &[u64; BANDS],
        f: &mut dyn FnMut(u32, &[u8]),
    ) -> Result<(), Self::Error>;

    /// The id document `doc` was stored under.
    fn id(&mut self, doc: u32) -> Result<String, Self::Error>;

    /// Stores a document as the next one, in the buckets of its bands; a bucket that holds
    /// [`crate::minhash::MAX_BUCKET`] documents already does not take it.
    fn insert(&mut self, sk: &MinSketch, id_hash: u64, id: &str) -> Result<(), Self::Error>;
}

/// The stored document `sk` copies best (most matching sketch groups, at least `need`; the
/// earliest among equals), among those before `before` when given.
pub fn best_match<S: SketchStore + ?Sized>(
    store: &mut S,
    need: u32,
    sk: &MinSketch,
    before: Option<u32>,
) -> Result<Option<Match>, S::Error> {
    let mut checked = HashSet::new();
    let mut best: Option<(u32, u32)> = None;
    store.candidates(&sk.bands, &mut |doc, bits| {
        if before.is_some_and(|b| doc >= b) || !checked.insert(doc) {
            return;
        }
        if let Some(m) = matches_at_least(&sk.bits, bits, need) {
            best = match best {
                Some((bd, bm)) if bm > m || (bm == m && bd < doc) => best,
                _ => Some((doc, m)),
            };
        }
    })?;
    match best {
        None => Ok(None),
        Some((doc, m)) => Ok(Some(Match {
            id: store.id(doc)?,
            similarity: estimate(m),
        })),
    }
}

/// The gate's rule: `sk` under `id` is a near-copy of the best earlier document it matches
/// (a redelivered `id` is matched only against what came before its first showing, so it
/// gets its first verdict again). Every new document is stored, copies too, so a family
/// that drifts a little from page to page stays one group; one that equals its match bit
/// for bit is not (it would add nothing).
pub fn check_and_insert<S: SketchStore + ?Sized>(
    store: &mut S,
    need: u32,
    sk: &MinSketch,
    id: &str,
) -> Result<Option<Match>, S::Error> {
    let id_hash = crate::gate::id_hash(id);
    let own = store.by_id(id_hash, id)?;
    let best = best_match(store, need, sk, own)?;
    let exact = best
        .as_ref()
        .is_some_and(|m| m.similarity >= estimate(PERMS as u32));
    if own.is_none() && !exact {
        store.insert(sk, id_hash, id)?;
    }
    Ok(best)
}
