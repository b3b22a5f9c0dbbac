//! Near-duplicate evaluation on a crawl of the Rust documentation.
//!
//!     cargo run --release -p trawl-dedup --example dedup_eval -- trawl-out/pages.jsonl
//!
//! Pairs that are near-copies by construction: the same item under `core::arch::x86` and
//! `core::arch::x86_64`, and `core::X` re-exported as `std::X`. For each maximum distance
//! 0..=6: recall on those pairs, and precision over every pair of pages the gate would flag
//! (a flagged pair whose exact word 5-gram Jaccard is under 0.8 is a false positive;
//! precision is measured on a uniform sample when there are many flagged pairs).

use std::collections::HashMap;
use std::io::BufRead;

use trawl_dedup::minhash::{MinHasher, jaccard};
use trawl_dedup::{fingerprint, hamming};

struct Page {
    path: String,
    simhash: u64,
    shingles: Vec<u64>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: dedup_eval PAGES.jsonl")?;
    // Lines on at least this share of the site's pages are boilerplate (0 keeps them).
    let boiler_share: f64 = std::env::args().nth(2).map_or(Ok(0.01), |s| s.parse())?;
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
                simhash: fingerprint(&kept).simhash,
                shingles: mh.shingles(&kept),
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
        "{:>4} {:>12} {:>12} {:>10} {:>10} {:>9}",
        "dist", "recall x86", "recall std", "flagged", "sampled", "precision"
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
            "{d:>4} {:>12.4} {:>12.4} {:>10} {:>10} {precision:>9.4}",
            recall(&arch),
            recall(&reexport),
            cumulative.len(),
            sample.len()
        );
    }
    Ok(())
}
