//! The MinHash LSH index against exact Jaccard on a sample: pairs at Jaccard 0.8 and above
//! are found.

use trawl_core::mutate::Rng;
use trawl_dedup::minhash::{LshIndex, MinHasher, jaccard};

#[test]
fn recall_at_jaccard_point_eight_and_above() {
    let h = MinHasher::default();
    let mut rng = Rng::new(7);
    let vocab: Vec<String> = (0..5000).map(|i| format!("w{i}")).collect();
    let mut pairs = 0usize;
    let mut found = 0usize;
    let mut false_pos = 0usize;
    let mut flagged = 0usize;
    for doc in 0..150 {
        let base: Vec<String> = (0..400)
            .map(|_| vocab[rng.below(vocab.len())].clone())
            .collect();
        // Replace 0% to 6% of the words: each breaks five 5-grams, so exact Jaccard spreads
        // from 1.0 to about 0.55.
        let rate = (doc % 30) as f64 / 500.0;
        let variant: Vec<String> = base
            .iter()
            .map(|w| {
                if (rng.below(1000) as f64) < rate * 1000.0 {
                    vocab[rng.below(vocab.len())].clone()
                } else {
                    w.clone()
                }
            })
            .collect();
        let (a, b) = (base.join(" "), variant.join(" "));
        let exact = jaccard(&h.shingles(&a), &h.shingles(&b));
        // A fresh index per pair: the question is whether this pair is caught.
        let mut idx = LshIndex::new(0.75);
        idx.check_and_insert(&h.sketch(&a), "a");
        let hit = idx.check_and_insert(&h.sketch(&b), "b").is_some();
        if exact >= 0.8 {
            pairs += 1;
            found += usize::from(hit);
        }
        if hit {
            flagged += 1;
            false_pos += usize::from(exact < 0.6);
        }
    }
    assert!(pairs >= 20, "the sample must hold pairs at 0.8+: {pairs}");
    let recall = found as f64 / pairs as f64;
    eprintln!(
        "pairs >= 0.8: {pairs}, recall {recall:.3}, flagged {flagged}, below 0.6: {false_pos}"
    );
    assert!(recall >= 0.95, "recall {recall}");
    assert_eq!(false_pos, 0, "pairs under Jaccard 0.6 flagged");
}
