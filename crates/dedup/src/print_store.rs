//! Where a SimHash gate keeps its prints: in memory ([`crate::print_index::PrintIndex`]) or,
//! for crawls of millions of pages, in a file of the crawl's (`trawl_store::gate_file`).
//! The gate's rule ([`crate::gate::SimGate`]) is written once over this interface, so every
//! store gives the same verdict page for page.

use crate::simhash::Banding;

/// A page as a gate stores it.
#[derive(Debug, Clone, Copy)]
pub struct StoredPrint<'a> {
    pub print: u64,
    pub exact: u128,
    pub id_hash: u64,
    pub id: &'a str,
}

/// Pages are numbered from 0 in the order they were stored; a bucket lists them oldest
/// first, which is what makes the first match among equals the same in every store.
pub trait PrintStore: Send {
    /// Why a store could not answer (a file store's I/O; the memory store never fails).
    type Error: std::fmt::Display;

    /// Pages stored.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest page stored under `id` (found by its hash, confirmed by the id itself).
    fn by_id(&mut self, id_hash: u64, id: &str) -> Result<Option<u32>, Self::Error>;

    /// The first page stored with the exact hash `exact`.
    fn by_exact(&mut self, exact: u128) -> Result<Option<u32>, Self::Error>;

    /// Appends to `out` the pages in the bucket of `key` (band number `band`), with their
    /// prints, oldest first.
    fn bucket(
        &mut self,
        band: usize,
        key: u64,
        out: &mut Vec<(u32, u64)>,
    ) -> Result<(), Self::Error>;

    /// The id page `page` was stored under.
    fn id(&mut self, page: u32) -> Result<String, Self::Error>;

    /// Stores a page as the next one, in the buckets of `keys` (one per band, in band
    /// order); a bucket that already holds `max_per_bucket` pages does not take it.
    fn insert(
        &mut self,
        page: &StoredPrint<'_>,
        keys: &[u64],
        max_per_bucket: u32,
    ) -> Result<(), Self::Error>;
}

/// The band keys of `print`, one per band in band order: band number and band value
/// packed, so the buckets of all bands share one map or table.
pub fn band_keys(banding: &Banding, print: u64) -> Vec<u64> {
    banding
        .bands(print)
        .into_iter()
        .map(|(band, value)| {
            if banding.count == 1 {
                value
            } else {
                (u64::from(band) << 32) | value
            }
        })
        .collect()
}

/// The 128-bit exact hash folded to 64 bits: a false match between two pages' texts at ten
/// million pages has odds of about one in 300,000.
pub fn fold(exact: u128) -> u64 {
    (exact as u64) ^ ((exact >> 64) as u64)
}
