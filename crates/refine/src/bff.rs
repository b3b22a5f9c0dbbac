//! BFF-style n-gram dedup for a refined corpus (DCLM's `bff`, as ReScraper ran it: 13-grams,
//! threshold 0.8): documents in order; one whose n-grams are mostly in a Bloom filter of the
//! earlier ones is a near-copy and dropped, the others add theirs. Memory is the filter's,
//! fixed up front for the expected number of n-grams at the chosen false-positive rate.

use xxhash_rust::xxh3::xxh3_64_with_seed;

pub struct Bloom {
    bits: Vec<u64>,
    m: u64,
    k: u32,
}

impl Bloom {
    /// A filter for `n` items at false-positive rate `p`.
    pub fn new(n: u64, p: f64) -> Bloom {
        let n = n.max(1) as f64;
        let p = p.clamp(1e-9, 0.5);
        let m = (-(n * p.ln()) / (std::f64::consts::LN_2.powi(2)))
            .ceil()
            .max(64.0) as u64;
        let k = ((m as f64 / n) * std::f64::consts::LN_2)
            .round()
            .clamp(1.0, 16.0) as u32;
        Bloom {
            bits: vec![0; m.div_ceil(64) as usize],
            m,
            k,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bits.len() * 8
    }

    fn positions(&self, h: u64) -> impl Iterator<Item = u64> + '_ {
        // Kirsch-Mitzenmacher: k positions from two hashes.
        let h2 = xxh3_64_with_seed(&h.to_le_bytes(), 0x9e37) | 1;
        (0..u64::from(self.k)).map(move |i| h.wrapping_add(i.wrapping_mul(h2)) % self.m)
    }

    pub fn contains(&self, h: u64) -> bool {
        self.positions(h)
            .all(|b| self.bits[(b / 64) as usize] & (1 << (b % 64)) != 0)
    }

    pub fn insert(&mut self, h: u64) {
        let ps: Vec<u64> = self.positions(h).collect();
        for b in ps {
            self.bits[(b / 64) as usize] |= 1 << (b % 64);
        }
    }
}

/// Lower-cased word tokens (Unicode alphanumerics), BFF's unit.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

pub struct NgramDedup {
    bloom: Bloom,
    n: usize,
    threshold: f64,
}

impl NgramDedup {
    pub fn new(n: usize, threshold: f64, expected_ngrams: u64, fp_rate: f64) -> NgramDedup {
        NgramDedup {
            bloom: Bloom::new(expected_ngrams, fp_rate),
            n: n.max(1),
            threshold,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bloom.bytes()
    }

    /// The share of the document's n-grams seen before; the document's own are added when it
    /// stays (under the threshold). A document shorter than n words counts as one n-gram.
    pub fn check(&mut self, text: &str) -> (f64, bool) {
        let w = words(text);
        if w.is_empty() {
            return (0.0, true);
        }
        let hashes: Vec<u64> = if w.len() < self.n {
            vec![xxh3_64_with_seed(w.join(" ").as_bytes(), 13)]
        } else {
            w.windows(self.n)
                .map(|g| xxh3_64_with_seed(g.join(" ").as_bytes(), 13))
                .collect()
        };
        let seen = hashes.iter().filter(|h| self.bloom.contains(**h)).count();
        let share = seen as f64 / hashes.len() as f64;
        let keep = share < self.threshold;
        if keep {
            for h in hashes {
                self.bloom.insert(h);
            }
        }
        (share, keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_copies_are_dropped_and_new_text_is_kept() {
        let mut d = NgramDedup::new(13, 0.8, 100_000, 0.001);
        let a = "the quick brown fox jumps over the lazy dog and then runs far away into the green forest where it sleeps until the morning sun wakes it";
        assert!(d.check(a).1);
        let b = format!("{a} again");
        let (share, keep) = d.check(&b);
        assert!(share > 0.8 && !keep, "{share}");
        let c = "a completely different document about rust programming and memory safety without garbage collection that compiles to fast native code";
        assert!(d.check(c).1);
        assert!(d.bytes() > 0);
    }
}
