//! Synthetic chunk vectors that sit where real ones do.
//!
//! A table of millions of chunks is grown from a few thousand real chunk embeddings: each
//! synthetic vector lies between a real vector and one of its nearest real neighbours, off
//! the segment by noise proportional to their distance, then renormalised. So the table
//! keeps the real embeddings' clusters and their local spread (what an ANN index's
//! partitions and codebooks are fitted to), and no two rows are near-copies of one another.
//! Random vectors (or mixtures of random pairs) are a different geometry: uniform noise
//! flatters an index, and mixtures of any two vectors put thousands of rows at almost the
//! same distance from every real one, which makes "the" top 10 a coin toss.

/// Nearest real neighbours a synthetic vector may lean towards.
const NEIGHBOURS: usize = 8;
/// Noise off the segment, as a share of the two vectors' distance.
const SPREAD: f32 = 0.3;

/// A cheap deterministic generator, so the big table is the same in every run.
pub struct Rng(pub u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// About normal (a sum of four uniforms), mean 0, deviation 1.
    fn normal(&mut self) -> f32 {
        let s: f32 = (0..4).map(|_| self.unit()).sum();
        (s - 2.0) * 3f32.sqrt()
    }
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn normalise(v: &mut [f32]) {
    let n = dot(v, v).sqrt().max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= n);
}

pub struct Synth {
    base: Vec<Vec<f32>>,
    near: Vec<Vec<usize>>,
    rng: Rng,
}

impl Synth {
    /// `base`: real, unit-length embeddings.
    pub fn new(base: Vec<Vec<f32>>, seed: u64) -> Self {
        let near = base
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut by: Vec<(f32, usize)> = base
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .map(|(j, b)| (dot(a, b), j))
                    .collect();
                let k = NEIGHBOURS.min(by.len());
                if k > 0 {
                    by.select_nth_unstable_by(k - 1, |x, y| y.0.total_cmp(&x.0));
                }
                by.truncate(k);
                by.into_iter().map(|(_, j)| j).collect()
            })
            .collect();
        Synth {
            base,
            near,
            rng: Rng(seed),
        }
    }

    /// Row `i` of the table: the real vectors first, then synthetic ones.
    pub fn vector(&mut self, i: usize) -> Vec<f32> {
        if i < self.base.len() {
            return self.base[i].clone();
        }
        let a = self.rng.below(self.base.len());
        let Some(&b) = self.near[a].get(self.rng.below(self.near[a].len().max(1))) else {
            return self.base[a].clone();
        };
        let (a, b) = (&self.base[a], &self.base[b]);
        let w = self.rng.unit();
        let gap = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f32>()
            .sqrt();
        let sigma = SPREAD * gap / (a.len() as f32).sqrt();
        let mut v: Vec<f32> = a
            .iter()
            .zip(b)
            .map(|(x, y)| x + w * (y - x) + sigma * self.rng.normal())
            .collect();
        normalise(&mut v);
        v
    }
}
