//! SimHash over word 3-shingles of normalized text.
//!
//! Normalization lower-cases, folds punctuation to spaces and splits on whitespace, so
//! markup-level differences (quotes, dashes, separators) do not move the fingerprint.

use xxhash_rust::xxh3::{xxh3_64, xxh3_128};

/// What the gate needs to know about one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    pub simhash: u64,
    /// Hash of the normalized text: equal for exact copies.
    pub exact: u128,
}

/// Lower-cased words with punctuation folded away.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Which features vote in a SimHash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Words per shingle (1: single words, each occurrence voting).
    pub shingle: usize,
    /// Whether tokens made only of digits take part.
    pub numbers: bool,
}

/// The features [`fingerprint`] uses.
pub const FEATURES: Features = Features {
    shingle: 3,
    numbers: true,
};

/// The 64-bit SimHash of `words` with [`FEATURES`].
pub fn simhash_words(words: &[String]) -> u64 {
    simhash_with(words, FEATURES)
}

/// The hashes of `words`' features, one per occurrence, in order.
pub fn feature_hashes(words: &[String], features: Features) -> Vec<u64> {
    let kept: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| features.numbers || !w.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    let n = features.shingle.max(1);
    if kept.len() < n {
        return kept.iter().map(|w| xxh3_64(w.as_bytes())).collect();
    }
    let mut buf = String::new();
    kept.windows(n)
        .map(|win| {
            buf.clear();
            for (i, w) in win.iter().enumerate() {
                if i > 0 {
                    buf.push(' ');
                }
                buf.push_str(w);
            }
            xxh3_64(buf.as_bytes())
        })
        .collect()
}

/// The 64-bit SimHash of `words`: each feature votes on every bit with its hash.
pub fn simhash_with(words: &[String], features: Features) -> u64 {
    let mut votes = [0i32; 64];
    for h in feature_hashes(words, features) {
        for (i, v) in votes.iter_mut().enumerate() {
            if (h >> i) & 1 == 1 {
                *v += 1;
            } else {
                *v -= 1;
            }
        }
    }
    votes
        .iter()
        .enumerate()
        .fold(0u64, |fp, (i, v)| if *v > 0 { fp | (1 << i) } else { fp })
}

/// Fingerprint of a document's text.
pub fn fingerprint(text: &str) -> Fingerprint {
    fingerprint_words(&words(text))
}

/// Fingerprint of a document's normalized [`words`].
pub fn fingerprint_words(w: &[String]) -> Fingerprint {
    let joined = w.join(" ");
    Fingerprint {
        simhash: simhash_words(w),
        exact: xxh3_128(joined.as_bytes()),
    }
}

pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// How to split fingerprints into bands so that any two within `max_distance` share at
/// least one band exactly (pigeonhole: `max_distance + 1` bands). Fewer, wider bands mean
/// smaller buckets: at 10 million prints a 21-bit band holds ~5 of them, a 16-bit one ~150.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Banding {
    pub count: u32,
}

impl Banding {
    /// `max_distance` 0..=3 (beyond 3 the index would need more than 4 bands).
    pub fn for_distance(max_distance: u32) -> Self {
        Self {
            count: max_distance.clamp(0, 3) + 1,
        }
    }

    /// The band values of `fp`, each tagged with its band number: band `i` covers bits
    /// `[64*i/count, 64*(i+1)/count)`.
    pub fn bands(self, fp: u64) -> Vec<(u32, u64)> {
        (0..self.count)
            .map(|i| {
                let lo = 64 * i / self.count;
                let hi = 64 * (i + 1) / self.count;
                let width = hi - lo;
                let mask = if width == 64 {
                    u64::MAX
                } else {
                    (1u64 << width) - 1
                };
                (i, (fp >> lo) & mask)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "The Rust Programming Language is a book about Rust. It teaches ownership, \
        borrowing and lifetimes with many examples, and it explains how the compiler checks \
        references so that programs are memory safe without a garbage collector. Each chapter \
        ends with exercises that build a small project step by step.";

    #[test]
    fn punctuation_and_case_do_not_matter() {
        let a = fingerprint(TEXT);
        let b = fingerprint(&TEXT.to_uppercase().replace(',', " ;").replace('.', "!"));
        assert_eq!(a, b);
    }

    #[test]
    fn a_small_edit_moves_few_bits_and_other_text_many() {
        let a = fingerprint(TEXT).simhash;
        let edited = fingerprint(&TEXT.replace("many examples", "several examples")).simhash;
        let other = fingerprint(
            "Tokio is an asynchronous runtime for Rust with timers, sockets, channels and a \
             scheduler that runs many tasks on a few threads with work stealing between them.",
        )
        .simhash;
        assert!(hamming(a, edited) <= 12, "{}", hamming(a, edited));
        assert!(hamming(a, other) >= 16, "{}", hamming(a, other));
        assert!(hamming(a, edited) < hamming(a, other));
    }

    #[test]
    fn bands_cover_the_fingerprint() {
        let fp = 0x0123_4567_89ab_cdef;
        let four = Banding::for_distance(3).bands(fp);
        assert_eq!(four, [(0, 0xcdef), (1, 0x89ab), (2, 0x4567), (3, 0x0123)]);
        let three = Banding::for_distance(2).bands(fp);
        assert_eq!(three.len(), 3);
        let rebuilt = three[0].1 | (three[1].1 << 21) | (three[2].1 << 42);
        assert_eq!(rebuilt, fp);
    }

    #[test]
    fn prints_within_the_distance_share_a_band() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for d in 0..=3u32 {
            let banding = Banding::for_distance(d);
            for _ in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut y = x;
                for k in 0..d {
                    y ^= 1 << ((x >> (6 * k)) % 64);
                }
                let (a, b) = (banding.bands(x), banding.bands(y));
                assert!(a.iter().zip(&b).any(|(p, q)| p == q), "d={d}");
            }
        }
    }

    #[test]
    fn features_choose_what_votes() {
        let w = |t: &str| words(t);
        let unigrams = Features {
            shingle: 1,
            numbers: true,
        };
        // Single words ignore order; shingles do not.
        let (a, b) = (w("alpha beta gamma delta"), w("delta gamma beta alpha"));
        assert_eq!(simhash_with(&a, unigrams), simhash_with(&b, unigrams));
        assert_ne!(simhash_words(&a), simhash_words(&b));
        // Without numbers, a text that differs only in a number has the same print.
        let no_numbers = Features {
            shingle: 3,
            numbers: false,
        };
        let (c, d) = (
            w("available on x86 and target feature sse only"),
            w("available on x86 64 and target feature sse only"),
        );
        assert_eq!(simhash_with(&c, no_numbers), simhash_with(&d, no_numbers));
        assert_ne!(simhash_words(&c), simhash_words(&d));
        assert_eq!(simhash_words(&c), simhash_with(&c, FEATURES));
    }

    #[test]
    fn empty_and_short_texts_are_fine() {
        assert_eq!(fingerprint("").simhash, 0);
        let _ = fingerprint("one");
        let _ = fingerprint("one two");
    }
}
