//! How well a crawl's page gate did, judged from its own `pages.jsonl`.
//!
//!     cargo run --release -p trawl-dedup --example dedup_eval -- CRAWL/pages.jsonl \
//!         [TRUTH/pages.jsonl] [--replay]
//!
//! A pair of pages is a **near-copy** when the exact Jaccard similarity of their word
//! 5-gram sets is at least 0.8, computed on the texts of TRUTH (default: the crawl itself),
//! which should be a crawl with the default extraction: a setting that changes the text
//! (`--boilerplate-min-pages`) then cannot move the ground truth.
//!
//! - **Recall**: of all near-copy pairs among the pages with text, those the crawl put in
//!   one group (`duplicate_of` chains lead both to the same kept page). `direct` counts only
//!   pairs where one page names the other.
//! - **Precision**: of the pages the crawl flagged (`duplicate_of` set), those that are
//!   near-copies of the page they name.
//!
//! Near-copy pairs are found without comparing every pair: candidates from 25 bands of 4
//! MinHash values under seeds of this tool's own (a pair at 0.8 is a candidate with
//! probability 1 - 2e-6), pruned by set size, then the exact Jaccard. Recall is also given
//! for the pairs the documentation builds in (`core::arch::x86` / `x86_64` items, `core`
//! re-exported as `std`).
//!
//! `--replay` also runs the gates offline over the same texts in the crawl's order (SimHash
//! at distances 0-3 with `EVAL_FEATURES=SHINGLE:numbers|nonumbers`, and `EVAL_SHORT=N`
//! making pages of fewer than N shingles match only at distance 0; MinHash at 0.75-0.85;
//! and MinHash's candidates checked by the exact Jaccard, the bound of its verification):
//! a design aid, not the product's figures (those are the crawl's own decisions above).

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use trawl_dedup::minhash::{LshIndex, MinHasher, jaccard};
use trawl_dedup::simhash::{Features, simhash_with, words};
use trawl_dedup::{Fingerprint, GateVerdict, MemoryGate};
use xxhash_rust::xxh3::xxh3_64_with_seed;

const NEAR: f64 = 0.8;

struct Page {
    url: String,
    path: String,
    text: String,
    duplicate_of: Option<String>,
}

fn read(path: &str) -> Result<Vec<Page>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(path)?).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let text = v["text"].as_str().unwrap_or("");
        if v["status"] != 200 || text.is_empty() || v["kind"].as_str().is_some_and(|k| k != "page")
        {
            continue;
        }
        let url = v["final_url"].as_str().unwrap_or("").to_string();
        let path = url
            .splitn(4, '/')
            .nth(3)
            .map(|p| format!("/{p}"))
            .unwrap_or_default();
        out.push(Page {
            url,
            path,
            text: text.to_string(),
            duplicate_of: v["duplicate_of"].as_str().map(String::from),
        });
    }
    Ok(out)
}

/// Every pair of `sets` with exact Jaccard >= NEAR (see the module's note on candidates).
fn near_pairs(sets: &[Vec<u64>]) -> Vec<(usize, usize)> {
    const BANDS: u64 = 25;
    const ROWS: u64 = 4;
    let mut buckets: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for (i, s) in sets.iter().enumerate() {
        if s.is_empty() {
            continue;
        }
        for band in 0..BANDS {
            let mut key = band;
            for r in 0..ROWS {
                let seed = 0xe7a1 + band * ROWS + r;
                let m = s
                    .iter()
                    .map(|x| xxh3_64_with_seed(&x.to_le_bytes(), seed))
                    .min();
                key = xxh3_64_with_seed(&m.unwrap_or(0).to_le_bytes(), key);
            }
            buckets.entry((band, key)).or_default().push(i);
        }
    }
    let mut pairs = HashSet::new();
    for members in buckets.values() {
        for (x, &i) in members.iter().enumerate() {
            for &j in &members[x + 1..] {
                let (a, b) = (sets[i].len() as f64, sets[j].len() as f64);
                if a.min(b) / a.max(b) >= NEAR {
                    pairs.insert((i.min(j), i.max(j)));
                }
            }
        }
    }
    let mut out: Vec<(usize, usize)> = pairs
        .into_iter()
        .filter(|&(i, j)| jaccard(&sets[i], &sets[j]) >= NEAR)
        .collect();
    out.sort_unstable();
    out
}

/// Each page's group: the kept page its `duplicate_of` chain ends at.
fn roots(links: &[Option<usize>]) -> Vec<usize> {
    (0..links.len())
        .map(|mut i| {
            for _ in 0..links.len() {
                match links[i] {
                    Some(j) if j != i => i = j,
                    _ => break,
                }
            }
            i
        })
        .collect()
}

struct Scores {
    flagged: usize,
    precision: f64,
    recall: f64,
    direct: f64,
    arch: f64,
    reexport: f64,
}

fn score(
    links: &[Option<usize>],
    sets: &[Vec<u64>],
    near: &[(usize, usize)],
    built: &[Vec<(usize, usize)>; 2],
) -> Scores {
    let root = roots(links);
    let flagged: Vec<(usize, usize)> = links
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.map(|j| (i, j)))
        .collect();
    let good = flagged
        .iter()
        .filter(|&&(i, j)| jaccard(&sets[i], &sets[j]) >= NEAR)
        .count();
    let caught = |pairs: &[(usize, usize)]| {
        let n = pairs.iter().filter(|&&(i, j)| root[i] == root[j]).count();
        n as f64 / pairs.len().max(1) as f64
    };
    let direct = near
        .iter()
        .filter(|&&(i, j)| links[i] == Some(j) || links[j] == Some(i))
        .count();
    Scores {
        flagged: flagged.len(),
        precision: good as f64 / flagged.len().max(1) as f64,
        recall: caught(near),
        direct: direct as f64 / near.len().max(1) as f64,
        arch: caught(&built[0]),
        reexport: caught(&built[1]),
    }
}

fn print_row(name: &str, s: &Scores) {
    println!(
        "{name:<28} {:>8} {:>9.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4}",
        s.flagged, s.precision, s.recall, s.direct, s.arch, s.reexport
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let replay = args.iter().any(|a| a == "--replay");
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let crawl = read(
        files
            .first()
            .ok_or("usage: dedup_eval PAGES.jsonl [TRUTH]")?,
    )?;
    let truth: HashMap<String, String> = match files.get(1) {
        Some(t) => read(t)?.into_iter().map(|p| (p.url, p.text)).collect(),
        None => crawl
            .iter()
            .map(|p| (p.url.clone(), p.text.clone()))
            .collect(),
    };
    // Pages judged: those of the crawl that the truth has too.
    let pages: Vec<&Page> = crawl
        .iter()
        .filter(|p| truth.contains_key(&p.url))
        .collect();
    let mh = MinHasher::default();
    let sets: Vec<Vec<u64>> = pages.iter().map(|p| mh.shingles(&truth[&p.url])).collect();
    let by_url: HashMap<&str, usize> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.url.as_str(), i))
        .collect();
    let near = near_pairs(&sets);
    let by_path: HashMap<&str, usize> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.path.as_str(), i))
        .collect();
    let built_in = |from: &str, to: &str| -> Vec<(usize, usize)> {
        pages
            .iter()
            .enumerate()
            .filter(|(_, p)| from != "/core/" || !p.path.starts_with("/core/arch/"))
            .filter_map(|(i, p)| {
                let rest = p.path.strip_prefix(from)?;
                let j = *by_path.get(format!("{to}{rest}").as_str())?;
                (jaccard(&sets[i], &sets[j]) >= NEAR).then_some((i.min(j), i.max(j)))
            })
            .collect()
    };
    let built = [
        built_in("/core/arch/x86/", "/core/arch/x86_64/"),
        built_in("/core/", "/std/"),
    ];
    let median_words = {
        let mut w: Vec<usize> = pages.iter().map(|p| words(&truth[&p.url]).len()).collect();
        w.sort_unstable();
        w.get(w.len() / 2).copied().unwrap_or(0)
    };
    println!(
        "{} pages with text (median {median_words} words); near-copy pairs (5-gram Jaccard >= {NEAR}): {} ({} x86/x86_64 items, {} core/std)",
        pages.len(),
        near.len(),
        built[0].len(),
        built[1].len()
    );
    let unknown = pages
        .iter()
        .filter(|p| {
            p.duplicate_of
                .as_deref()
                .is_some_and(|d| !by_url.contains_key(d))
        })
        .count();
    let links: Vec<Option<usize>> = pages
        .iter()
        .map(|p| {
            p.duplicate_of
                .as_deref()
                .and_then(|d| by_url.get(d).copied())
        })
        .collect();
    println!(
        "{:<28} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "gate", "flagged", "precision", "recall", "direct", "x86", "std"
    );
    print_row(
        "the crawl's own decisions",
        &score(&links, &sets, &near, &built),
    );
    if unknown > 0 {
        println!("  ({unknown} pages name an original with no text in the crawl: not counted)");
    }
    if !replay {
        return Ok(());
    }
    let features = match std::env::var("EVAL_FEATURES") {
        Err(_) => trawl_dedup::simhash::FEATURES,
        Ok(f) => {
            let (n, nums) = f
                .split_once(':')
                .ok_or("EVAL_FEATURES: SHINGLE:numbers|nonumbers")?;
            Features {
                shingle: n.parse()?,
                numbers: nums == "numbers",
            }
        }
    };
    let texts: Vec<&str> = pages.iter().map(|p| truth[&p.url].as_str()).collect();
    // EVAL_SHORT=N: pages of fewer than N shingles match only at distance 0.
    let short: usize = std::env::var("EVAL_SHORT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for d in 0..=3 {
        let gate = MemoryGate::new(d);
        let exact_only = MemoryGate::new(0);
        let links: Vec<Option<usize>> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let w = words(t);
                let fp = Fingerprint {
                    simhash: simhash_with(&w, features),
                    exact: trawl_dedup::simhash::fingerprint_words(&w).exact,
                };
                let g = if sets[i].len() < short {
                    &exact_only
                } else {
                    &gate
                };
                match g.check_and_insert_sync(fp, &i.to_string()) {
                    GateVerdict::Kept => None,
                    v => v.original().and_then(|o| o.parse().ok()),
                }
            })
            .collect();
        let name = format!(
            "replay simhash d<={d} {}:{}",
            features.shingle, features.numbers
        );
        print_row(&name, &score(&links, &sets, &near, &built));
    }
    let sketches: Vec<_> = sets.iter().map(|s| mh.sketch_of(s)).collect();
    for t in [0.75, 0.8, 0.85] {
        let mut index = LshIndex::new(t);
        let links: Vec<Option<usize>> = sketches
            .iter()
            .enumerate()
            .map(|(i, sk)| {
                index
                    .check_and_insert(sk, &i.to_string())
                    .and_then(|m| m.id.parse().ok())
            })
            .collect();
        print_row(
            &format!("replay minhash >= {t}"),
            &score(&links, &sets, &near, &built),
        );
    }
    // The bound: the gate's LSH candidates verified by the exact Jaccard instead of the
    // sketch's estimate (what storing every page's shingles would buy).
    let mut buckets: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
    let links: Vec<Option<usize>> = sketches
        .iter()
        .enumerate()
        .map(|(i, sk)| {
            let mut cands: Vec<usize> = sk
                .bands
                .iter()
                .enumerate()
                .flat_map(|(b, k)| buckets.get(&(b, *k)).into_iter().flatten().copied())
                .collect();
            cands.sort_unstable();
            cands.dedup();
            for (b, k) in sk.bands.iter().enumerate() {
                buckets.entry((b, *k)).or_default().push(i);
            }
            cands
                .into_iter()
                .map(|c| (jaccard(&sets[i], &sets[c]), c))
                .filter(|(j, _)| *j >= NEAR)
                .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
                .map(|(_, c)| c)
        })
        .collect();
    print_row(
        "bound: minhash, exact check",
        &score(&links, &sets, &near, &built),
    );
    Ok(())
}
