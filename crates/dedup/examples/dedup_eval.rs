//! Near-duplicate evaluation on a crawl of the Rust documentation.
//!
//!     cargo run --release -p trawl-dedup --example dedup_eval -- trawl-out/pages.jsonl \
//!         [BOILERPLATE_SHARE 0.01] [SHOW_MISSED 5] [SHINGLE:numbers|nonumbers]
//!
//! Pairs that are near-copies by construction: the same item under `core::arch::x86` and
//! `core::arch::x86_64`, and `core::X` re-exported as `std::X`. For each maximum distance
//! 0..=6: recall on those pairs, and precision over every pair of pages the gate would flag
//! (a flagged pair whose exact word 5-gram Jaccard is under 0.8 is a false positive;
//! precision is measured on a uniform sample when there are many flagged pairs). Recall is
//! given over all constructed pairs and over those that are near-copies by the same 0.8
//! rule; a table places the constructed pairs by Jaccard and distance, and the words that
//! differ are shown for missed pairs. The last argument tries other SimHash features.

use std::collections::HashMap;
use std::io::BufRead;

use trawl_dedup::hamming;
use trawl_dedup::minhash::{MinHasher, jaccard};

struct Page {
    path: String,
    kept: String,
    simhash: u64,
    shingles: Vec<u64>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: dedup_eval PAGES.jsonl")?;
    // Lines on at least this share of the site's pages are boilerplate (0 keeps them).
    let boiler_share: f64 = std::env::args().nth(2).map_or(Ok(0.01), |s| s.parse())?;
    // How many missed near-copies to print, with the words that differ.
    let show: usize = std::env::args().nth(3).map_or(Ok(5), |s| s.parse())?;
    // The SimHash features to evaluate, as SHINGLE:numbers|nonumbers (default: trawl's).
    let features = match std::env::args().nth(4) {
        None => trawl_dedup::simhash::FEATURES,
        Some(f) => {
            let (n, nums) = f
                .split_once(':')
                .ok_or("features: SHINGLE:numbers|nonumbers")?;
            trawl_dedup::simhash::Features {
                shingle: n.parse()?,
                numbers: nums == "numbers",
            }
        }
    };
    println!("features: {features:?}");
    let mh = MinHasher::new(5);
    let mut docs: Vec<(String, String)> = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(&path)?).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let text = v["text"].as_str().unwrap_or("");
        if v["status"] != 200 || text.is_empty() {
            continue;
        }
        let url = v["final_url"].as_str().unwrap_or("");
        let path = url
            .splitn(4, '/')
            .nth(3)
            .map(|p| format!("/{p}"))
            .unwrap_or_default();
        docs.push((path, text.to_string()));
    }
    let mut line_pages: HashMap<&str, usize> = HashMap::new();
    for (_, text) in &docs {
        let mut lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines.sort_unstable();
        lines.dedup();
        for l in lines {
            *line_pages.entry(l).or_default() += 1;
        }
    }
    let limit = ((docs.len() as f64 * boiler_share).ceil() as usize).max(2);
    let boiler =
        |l: &str| boiler_share > 0.0 && line_pages.get(l.trim()).is_some_and(|n| *n >= limit);
    println!(
        "boilerplate: lines on >= {limit} pages ({} distinct lines)",
        line_pages.values().filter(|n| **n >= limit).count()
    );
    // EVAL_IDF=1: shingles weighted by their inverse document frequency over the whole
    // crawl (Manku et al.'s weighting; needs corpus statistics the streaming gate lacks).
    let idf_mode = std::env::var("EVAL_IDF").is_ok();
    let shingle_hashes = |text: &str| {
        trawl_dedup::simhash::feature_hashes(&trawl_dedup::simhash::words(text), features)
    };
    let mut df: HashMap<u64, u32> = HashMap::new();
    if idf_mode {
        for (_, text) in &docs {
            let mut hs = shingle_hashes(text);
            hs.sort_unstable();
            hs.dedup();
            for h in hs {
                *df.entry(h).or_default() += 1;
            }
        }
    }
    let total_docs = docs.len() as f64;
    let weighted = |text: &str| -> u64 {
        let mut votes = [0f64; 64];
        for h in shingle_hashes(text) {
            let w = (total_docs / df.get(&h).copied().unwrap_or(1) as f64)
                .ln()
                .max(0.0);
            for (i, v) in votes.iter_mut().enumerate() {
                if (h >> i) & 1 == 1 { *v += w } else { *v -= w }
            }
        }
        votes
            .iter()
            .enumerate()
            .fold(0u64, |fp, (i, v)| if *v > 0.0 { fp | (1 << i) } else { fp })
    };
    let pages: Vec<Page> = docs
        .iter()
        .map(|(path, text)| {
            let kept: String = text
                .lines()
                .filter(|l| !boiler(l))
                .collect::<Vec<_>>()
                .join("\n");
            Page {
                path: path.clone(),
                simhash: if idf_mode {
                    weighted(&kept)
                } else {
                    trawl_dedup::simhash::simhash_with(
                        &trawl_dedup::simhash::words(&kept),
                        features,
                    )
                },
                shingles: mh.shingles(&kept),
                kept,
            }
        })
        .collect();
    let by_path: HashMap<&str, usize> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.path.as_str(), i))
        .collect();
    let pair_set = |from: &str, to: &str| -> Vec<(usize, usize)> {
        pages
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let rest = p.path.strip_prefix(from)?;
                let j = *by_path.get(format!("{to}{rest}").as_str())?;
                Some((i, j))
            })
            .collect()
    };
    let arch = pair_set("/core/arch/x86/", "/core/arch/x86_64/");
    let reexport: Vec<(usize, usize)> = pair_set("/core/", "/std/")
        .into_iter()
        .filter(|(i, _)| !pages[*i].path.starts_with("/core/arch/"))
        .collect();
    println!(
        "{} pages with text; pairs: x86/x86_64 {}, core/std {}",
        pages.len(),
        arch.len(),
        reexport.len()
    );
    // The ceiling for recall: how many constructed pairs are near-copies by the same measure
    // precision uses.
    let similar = |pairs: &[(usize, usize)]| {
        let n = pairs
            .iter()
            .filter(|(i, j)| jaccard(&pages[*i].shingles, &pages[*j].shingles) >= 0.8)
            .count();
        n as f64 / pairs.len().max(1) as f64
    };
    println!(
        "pairs with 5-gram Jaccard >= 0.8: x86/x86_64 {:.4}, core/std {:.4}",
        similar(&arch),
        similar(&reexport)
    );

    // Where the constructed pairs sit: Jaccard band by Hamming distance.
    let bands: [(f64, f64, &str); 4] = [
        (0.95, 1.01, ">=0.95"),
        (0.9, 0.95, "0.90-0.95"),
        (0.8, 0.9, "0.80-0.90"),
        (0.0, 0.8, "<0.80"),
    ];
    for (name, pairs) in [("x86/x86_64", &arch), ("core/std", &reexport)] {
        println!("{name}: pairs by 5-gram Jaccard (rows) and Hamming distance (columns 0..=6, >6)");
        for (lo, hi, label) in bands {
            let mut hist = [0usize; 8];
            for (i, j) in pairs.iter() {
                let jac = jaccard(&pages[*i].shingles, &pages[*j].shingles);
                if jac >= lo && jac < hi {
                    let d = hamming(pages[*i].simhash, pages[*j].simhash) as usize;
                    hist[d.min(7)] += 1;
                }
            }
            println!("  {label:>10} {hist:?}");
        }
        // What a missed near-copy looks like: the words one page has and the other lacks.
        let mut shown = 0;
        for (i, j) in pairs.iter() {
            let jac = jaccard(&pages[*i].shingles, &pages[*j].shingles);
            let d = hamming(pages[*i].simhash, pages[*j].simhash);
            if jac >= 0.9 && d > 2 && shown < show {
                shown += 1;
                let words = |k: usize| trawl_dedup::simhash::words(&pages[k].kept);
                let (a, b) = (words(*i), words(*j));
                let diff = |x: &[String], y: &[String]| {
                    let mut y: Vec<&String> = y.iter().collect();
                    x.iter()
                        .filter(|w| match y.iter().position(|v| v == w) {
                            Some(p) => {
                                y.swap_remove(p);
                                false
                            }
                            None => true,
                        })
                        .cloned()
                        .collect::<Vec<_>>()
                };
                println!(
                    "  missed: {} vs {} (J {jac:.3}, d {d}, {} words): -{:?} +{:?}",
                    pages[*i].path,
                    pages[*j].path,
                    a.len(),
                    diff(&a, &b),
                    diff(&b, &a)
                );
            }
        }
    }
    // Recall over the constructed pairs that are near-copies by the precision rule.
    let near = |pairs: &[(usize, usize)]| -> Vec<(usize, usize)> {
        pairs
            .iter()
            .copied()
            .filter(|(i, j)| jaccard(&pages[*i].shingles, &pages[*j].shingles) >= 0.8)
            .collect()
    };
    let (arch_near, reexport_near) = (near(&arch), near(&reexport));

    // For comparison, the corpus tool as a page gate: MinHash-LSH candidates (bands x rows
    // of trawl_dedup::minhash) flagged when their estimated Jaccard is at least
    // EVAL_MINHASH (0.8 when it is not a number).
    if let Ok(t) = std::env::var("EVAL_MINHASH") {
        let threshold: f64 = t.parse().unwrap_or(0.8);
        use trawl_dedup::minhash::{BANDS, ROWS, estimated_jaccard};
        let sigs: Vec<Vec<u64>> = pages.iter().map(|p| mh.signature(&p.kept)).collect();
        let mut buckets: HashMap<(usize, &[u64]), Vec<usize>> = HashMap::new();
        for (i, sig) in sigs.iter().enumerate() {
            for b in 0..BANDS {
                buckets
                    .entry((b, &sig[b * ROWS..(b + 1) * ROWS]))
                    .or_default()
                    .push(i);
            }
        }
        let mut candidates: Vec<(usize, usize)> = Vec::new();
        for members in buckets.values() {
            for (x, &i) in members.iter().enumerate() {
                for &j in &members[x + 1..] {
                    candidates.push((i.min(j), i.max(j)));
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        // LSH at 20x5 makes a candidate of a pair at Jaccard 0.8 with probability 0.9996,
        // so this is (nearly) every near-copy pair of the site.
        let near_pairs = candidates
            .iter()
            .filter(|(i, j)| jaccard(&pages[*i].shingles, &pages[*j].shingles) >= 0.8)
            .count();
        println!(
            "page pairs with 5-gram Jaccard >= 0.8 (LSH candidates, exact check): {near_pairs}"
        );
        let flagged: std::collections::HashSet<(usize, usize)> = candidates
            .into_iter()
            .filter(|(i, j)| estimated_jaccard(&sigs[*i], &sigs[*j]) >= threshold)
            .collect();
        let recall = |pairs: &[(usize, usize)]| {
            let hit = pairs
                .iter()
                .filter(|(i, j)| flagged.contains(&((*i).min(*j), (*i).max(*j))))
                .count();
            hit as f64 / pairs.len().max(1) as f64
        };
        let all: Vec<&(usize, usize)> = flagged.iter().collect();
        let step = (all.len() / 20_000).max(1);
        let sample: Vec<&&(usize, usize)> = all.iter().step_by(step).collect();
        let good = sample
            .iter()
            .filter(|(i, j)| jaccard(&pages[*i].shingles, &pages[*j].shingles) >= 0.8)
            .count();
        println!(
            "minhash-lsh ({BANDS}x{ROWS}, estimate >= {threshold}): recall x86 {:.4} std {:.4}, near x86 {:.4} std {:.4}; flagged {}, precision {:.4}",
            recall(&arch),
            recall(&reexport),
            recall(&arch_near),
            recall(&reexport_near),
            flagged.len(),
            good as f64 / sample.len().max(1) as f64
        );
    }

    // Every pair within distance 6, by brute force over the fingerprints.
    let mut flagged: Vec<Vec<(usize, usize)>> = vec![Vec::new(); 7];
    for i in 0..pages.len() {
        for j in i + 1..pages.len() {
            let d = hamming(pages[i].simhash, pages[j].simhash) as usize;
            if d <= 6 {
                flagged[d].push((i, j));
            }
        }
    }
    println!(
        "recall over all constructed pairs, and (near) over those with Jaccard >= 0.8: {} and {}",
        arch_near.len(),
        reexport_near.len()
    );
    println!(
        "{:>4} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9}",
        "dist",
        "recall x86",
        "recall std",
        "(near) x86",
        "(near) std",
        "flagged",
        "sampled",
        "precision"
    );
    let mut cumulative: Vec<(usize, usize)> = Vec::new();
    for (d, at_d) in flagged.iter().enumerate() {
        cumulative.extend(at_d);
        let recall = |pairs: &[(usize, usize)]| {
            let hit = pairs
                .iter()
                .filter(|(i, j)| hamming(pages[*i].simhash, pages[*j].simhash) as usize <= d)
                .count();
            hit as f64 / pairs.len().max(1) as f64
        };
        let step = (cumulative.len() / 20_000).max(1);
        let sample: Vec<&(usize, usize)> = cumulative.iter().step_by(step).collect();
        let good = sample
            .iter()
            .filter(|(i, j)| jaccard(&pages[*i].shingles, &pages[*j].shingles) >= 0.8)
            .count();
        let precision = good as f64 / sample.len().max(1) as f64;
        println!(
            "{d:>4} {:>12.4} {:>12.4} {:>12.4} {:>12.4} {:>10} {:>10} {precision:>9.4}",
            recall(&arch),
            recall(&reexport),
            recall(&arch_near),
            recall(&reexport_near),
            cumulative.len(),
            sample.len()
        );
        // The false positives at the default distance: how long their pages are.
        if d == 2 {
            let mut by_len = [0usize; 4];
            let mut shown = 0;
            for (i, j) in &sample {
                if jaccard(&pages[*i].shingles, &pages[*j].shingles) >= 0.8 {
                    continue;
                }
                let words = pages[*i].shingles.len().min(pages[*j].shingles.len());
                by_len[match words {
                    0..24 => 0,
                    24..50 => 1,
                    50..100 => 2,
                    _ => 3,
                }] += 1;
                if shown < show {
                    shown += 1;
                    println!(
                        "  false positive: {} vs {} ({words} shingles)",
                        pages[*i].path, pages[*j].path
                    );
                }
            }
            println!(
                "  false positives at distance <= 2 by the shorter page's 5-gram count: <24 {}, 24-49 {}, 50-99 {}, >=100 {}",
                by_len[0], by_len[1], by_len[2], by_len[3]
            );
        }
    }
    Ok(())
}
