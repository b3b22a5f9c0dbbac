//! The dedup gate: check a fingerprint against everything kept so far and insert it when it
//! is new, as one step.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::simhash::{Banding, Fingerprint, hamming};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateVerdict {
    /// First of its kind: kept, and now in the index.
    Kept,
    /// A copy of `of` (the id it was kept under); distance 0 for an exact copy.
    Duplicate { of: String, distance: u32 },
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The shared store failed (`trawl_cluster::redis_gate`: the Redis error's message).
    #[error("Redis: {0}")]
    Redis(String),
    #[error("gate reply: {0}")]
    Reply(String),
}

#[async_trait]
pub trait Gate: Send + Sync {
    /// Keeps `id` unless an exact copy or a fingerprint within the distance is already kept
    /// under another id. Idempotent per id: a redelivered page matches itself and is `Kept`.
    async fn check_and_insert(&self, fp: Fingerprint, id: &str) -> Result<GateVerdict, GateError>;
}

/// A match on the page's own id is a redelivery, not a copy. For every [`Gate`]
/// implementation, here and in `trawl_cluster::redis_gate`.
pub fn unless_self(v: GateVerdict, id: &str) -> GateVerdict {
    match v {
        GateVerdict::Duplicate { of, .. } if of == id => GateVerdict::Kept,
        other => other,
    }
}

#[derive(Default)]
struct Inner {
    exact: HashMap<u128, u32>,
    /// (band, band value) -> indexes into `kept`.
    bands: HashMap<(u32, u64), Vec<u32>>,
    kept: Vec<(u64, String)>,
}

/// The in-process gate of the embedded runtime. Memory: per fingerprint 8 bytes plus the id,
/// one 4-byte index per band (3 bands at the default distance), and one exact-hash entry
/// (16 + 4 bytes), plus hash-map overhead.
pub struct MemoryGate {
    inner: Mutex<Inner>,
    max_distance: u32,
    banding: Banding,
}

impl MemoryGate {
    /// `max_distance` is at most 3 (see [`Banding`]); larger values are clamped.
    pub fn new(max_distance: u32) -> Self {
        let max_distance = max_distance.min(3);
        Self {
            inner: Mutex::new(Inner::default()),
            max_distance,
            banding: Banding::for_distance(max_distance),
        }
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .kept
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same check without the async interface, for threaded callers (`trawl ingest`).
    pub fn check_and_insert_sync(&self, fp: Fingerprint, id: &str) -> GateVerdict {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&i) = inner.exact.get(&fp.exact) {
            return GateVerdict::Duplicate {
                of: inner.kept[i as usize].1.clone(),
                distance: 0,
            };
        }
        let b = self.banding.bands(fp.simhash);
        let mut best: Option<(u32, u32)> = None;
        for key in &b {
            if let Some(list) = inner.bands.get(key) {
                for &i in list {
                    let d = hamming(inner.kept[i as usize].0, fp.simhash);
                    if d <= self.max_distance && best.is_none_or(|(bd, _)| d < bd) {
                        best = Some((d, i));
                    }
                }
            }
        }
        if let Some((distance, i)) = best {
            return GateVerdict::Duplicate {
                of: inner.kept[i as usize].1.clone(),
                distance,
            };
        }
        let idx = inner.kept.len() as u32;
        inner.kept.push((fp.simhash, id.to_string()));
        inner.exact.insert(fp.exact, idx);
        for key in b {
            inner.bands.entry(key).or_default().push(idx);
        }
        GateVerdict::Kept
    }
}

#[async_trait]
impl Gate for MemoryGate {
    async fn check_and_insert(&self, fp: Fingerprint, id: &str) -> Result<GateVerdict, GateError> {
        Ok(unless_self(self.check_and_insert_sync(fp, id), id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(simhash: u64, exact: u128) -> Fingerprint {
        Fingerprint { simhash, exact }
    }

    #[tokio::test]
    async fn keeps_first_and_flags_copies_within_distance() {
        let g = MemoryGate::new(2);
        let base = 0xdead_beef_0123_4567u64;
        assert_eq!(
            g.check_and_insert(fp(base, 1), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(
            g.check_and_insert(fp(base, 1), "b").await.unwrap(),
            GateVerdict::Duplicate {
                of: "a".into(),
                distance: 0
            }
        );
        // Two bits apart, in two different bands: still found through the other bands.
        let near = base ^ (1 << 3) ^ (1 << 40);
        assert_eq!(
            g.check_and_insert(fp(near, 2), "c").await.unwrap(),
            GateVerdict::Duplicate {
                of: "a".into(),
                distance: 2
            }
        );
        let far = base ^ 0b111;
        assert_eq!(
            g.check_and_insert(fp(far, 3), "d").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(g.len(), 2);
    }

    #[tokio::test]
    async fn a_redelivered_page_is_kept_not_its_own_copy() {
        let g = MemoryGate::new(2);
        assert_eq!(
            g.check_and_insert(fp(7, 7), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(
            g.check_and_insert(fp(7, 7), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(
            g.check_and_insert(fp(7 ^ 1, 8), "a").await.unwrap(),
            GateVerdict::Kept
        );
        assert_eq!(g.len(), 1);
    }

    #[tokio::test]
    async fn distance_three_is_always_found_with_four_bands() {
        let g = MemoryGate::new(3);
        let base = 0x0f0f_f0f0_1234_abcdu64;
        g.check_and_insert(fp(base, 1), "a").await.unwrap();
        // Flip 3 bits in 3 different bands: the fourth band is equal.
        let near = base ^ (1 << 1) ^ (1 << 17) ^ (1 << 33);
        assert!(matches!(
            g.check_and_insert(fp(near, 2), "b").await.unwrap(),
            GateVerdict::Duplicate { distance: 3, .. }
        ));
    }
}
