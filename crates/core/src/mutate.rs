//! Deterministic input mutation for hostile-input tests: every parser that faces the web is
//! fed thousands of corrupted variants of real inputs (bit flips, truncation, splices,
//! repeated and inserted bytes) and must return, not panic. cargo-fuzz needs a nightly
//! toolchain; this runs in the ordinary test suite.

/// A small xorshift generator: reproducible across runs and platforms.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Bytes that tend to break parsers: markup delimiters, quotes, escapes, NUL, high bytes.
const SPICE: &[u8] = b"<>&;\"'=/\\%#?:\0\xff\xfe\xc3\x80\r\n\t ]]>-->";

/// One corrupted variant of `input`.
pub fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let cut = rng.below(v.len());
                v.truncate(cut);
            }
            2 => {
                let i = rng.below(v.len() + 1);
                let b = SPICE[rng.below(SPICE.len())];
                v.insert(i, b);
            }
            3 if !v.is_empty() => {
                // Repeat a slice many times: deep nesting, long lines.
                let a = rng.below(v.len());
                let len = rng.below((v.len() - a).min(64)) + 1;
                let piece = v[a..a + len].to_vec();
                let times = rng.below(200) + 1;
                let at = rng.below(v.len() + 1);
                v.splice(at..at, piece.iter().copied().cycle().take(len * times));
            }
            4 if !v.is_empty() => {
                let a = rng.below(v.len());
                let b = a + rng.below(v.len() - a);
                v.drain(a..b);
            }
            _ => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.next_u64() as u8);
            }
        }
    }
    v
}

/// Calls `f` on `n` mutations of each seed input.
pub fn each_mutation(seeds: &[&[u8]], n: usize, mut f: impl FnMut(&[u8])) {
    let mut rng = Rng::new(0x7261_776c);
    for seed in seeds {
        f(seed);
        for _ in 0..n {
            f(&mutate(seed, &mut rng));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::urlnorm::Normalizer;

    #[test]
    fn mutations_are_reproducible_and_varied() {
        let mut a = Vec::new();
        each_mutation(&[b"hello world"], 50, |m| a.push(m.to_vec()));
        let mut b = Vec::new();
        each_mutation(&[b"hello world"], 50, |m| b.push(m.to_vec()));
        assert_eq!(a, b);
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() > 40);
    }

    #[test]
    fn url_normalization_survives_hostile_urls() {
        let norm = Normalizer::default();
        let base = url::Url::parse("http://h/a/b?c=d").unwrap();
        let seeds: &[&[u8]] = &[
            b"http://Example.COM:80/a/./b/../%7e?utm_source=x&a=%41#f",
            b"../../x?y=%zz&&=&utm_=1",
            b"https://[::1]:8080/p%C3%BC",
            b"//user:pw@host/%%%",
        ];
        each_mutation(seeds, 3000, |m| {
            let s = String::from_utf8_lossy(m);
            let _ = norm.parse(&s, Some(&base));
            let _ = norm.parse(&s, None);
        });
    }
}
