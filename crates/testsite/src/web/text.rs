//! Deterministic text for the synthetic web: words drawn from a made-up vocabulary with
//! Zipf frequencies (a few words everywhere, most rare), so pages share common words as
//! real pages do and SimHash tells unrelated pages apart.

/// A small, fast, seedable generator (SplitMix64): the same seed gives the same page.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n.max(1))) >> 64) as u64
    }
}

/// A seed from the parts that name a page.
pub(crate) fn seed(parts: &[u64]) -> u64 {
    let mut r = Rng::new(0x5eed);
    for p in parts {
        r.0 ^= p.wrapping_mul(0x2545_f491_4f6c_dd1d);
        r.next();
    }
    r.next()
}

const SYLLABLES: [&str; 32] = [
    "ka", "lo", "mi", "ter", "an", "vo", "ri", "sel", "du", "pra", "ne", "ost", "qui", "ba", "len",
    "gor", "fi", "tu", "mar", "ex", "sa", "ple", "dor", "in", "cu", "vet", "ro", "ham", "zi", "op",
    "lu", "ges",
];

/// The vocabulary and its cumulative Zipf weights.
pub(crate) struct Words {
    words: Vec<String>,
    /// `cumulative[i]`: the weight of words `0..=i`, scaled to `u32::MAX`.
    cumulative: Vec<u32>,
}

impl Words {
    pub(crate) fn new(n: usize) -> Self {
        let mut rng = Rng::new(42);
        let mut seen = std::collections::HashSet::new();
        let mut words = Vec::with_capacity(n);
        while words.len() < n {
            let len = 1 + rng.below(3) as usize;
            let w: String = (0..len)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
                .collect();
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        let weights: Vec<f64> = (0..n).map(|r| 1.0 / (r as f64 + 2.0)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                acc += w / total;
                (acc.min(1.0) * f64::from(u32::MAX)) as u32
            })
            .collect();
        Words { words, cumulative }
    }

    pub(crate) fn pick(&self, rng: &mut Rng) -> &str {
        let x = (rng.next() >> 32) as u32;
        let i = self.cumulative.partition_point(|c| *c < x);
        &self.words[i.min(self.words.len() - 1)]
    }

    /// A sentence of 6 to 19 words, capitalised, with a full stop.
    pub(crate) fn sentence(&self, rng: &mut Rng, out: &mut String) {
        let n = 6 + rng.below(14);
        for i in 0..n {
            let w = self.pick(rng);
            if i == 0 {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    out.extend(f.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push(' ');
                out.push_str(w);
            }
        }
        out.push_str(". ");
    }

    /// `n` words joined by spaces (titles, headings).
    pub(crate) fn phrase(&self, rng: &mut Rng, n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.pick(rng));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_words_and_common_words_are_common() {
        let words = Words::new(4096);
        let draw = |s| {
            let mut r = Rng::new(s);
            let mut t = String::new();
            for _ in 0..50 {
                words.sentence(&mut r, &mut t);
            }
            t
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let text = draw(9);
        let first = text.matches(&format!(" {} ", words.words[0])).count();
        let rare = text.matches(&format!(" {} ", words.words[4000])).count();
        assert!(first > rare + 5, "{first} vs {rare}");
    }
}
