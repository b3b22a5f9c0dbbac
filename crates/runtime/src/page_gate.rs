//! The embedded runtime's page gate, SimHash or MinHash, in memory for the first pages,
//! then in a file of the crawl (`gate.db`, so the gate does not grow the process with the
//! crawl); and what a resumed crawl puts back into it.

use std::io::{BufRead, Seek};
use std::path::Path;
use std::sync::Arc;

use trawl_core::settings::PageGate;
use trawl_dedup::{Gate, GateMethod, GatePage, MinGate, SimGate};
use trawl_store::gate_file::{CrawlPrints, GATE_FILE};
use trawl_store::resume::KeptPage;
use trawl_store::sketch_file::CrawlSketches;

/// The embedded runtime's page gate, of the crawl's method.
pub enum EmbeddedGate {
    SimHash(Arc<SimGate<CrawlPrints>>),
    MinHash(Arc<MinGate<CrawlSketches>>),
}

impl EmbeddedGate {
    /// The gate of the crawl in `out`: a SimHash gate keeps `in_memory` pages in memory,
    /// a MinHash gate a quarter as many (a page costs it about three times the bytes), then
    /// each moves to its file there, made anew.
    pub fn new(g: PageGate, out: &Path, in_memory: usize) -> Self {
        match g {
            PageGate::SimHash { distance } => {
                let gate = CrawlPrints::gate(&out.join(GATE_FILE), distance, in_memory);
                Self::SimHash(Arc::new(gate))
            }
            PageGate::MinHash { similarity } => {
                let gate = CrawlSketches::gate(&out.join(GATE_FILE), similarity, in_memory / 4);
                Self::MinHash(Arc::new(gate))
            }
        }
    }

    pub fn shared(self) -> Arc<dyn Gate> {
        match self {
            Self::SimHash(g) => g,
            Self::MinHash(g) => g,
        }
    }

    /// Puts back the pages a resumed crawl kept (see [`KeptPage`] for why not the copies),
    /// in the order they were written: for SimHash their fingerprints from the store, for
    /// MinHash their sketches, made again from their text in `pages.jsonl`. Each is shown
    /// to the gate as a page of its own, so two kept pages that would now match keep the
    /// first.
    pub fn restore(&self, kept: &[KeptPage], pages: &Path) -> anyhow::Result<()> {
        match self {
            Self::SimHash(g) => {
                let mut written: Vec<&KeptPage> = kept.iter().collect();
                written.sort_by_key(|k| k.page_offset.unwrap_or(u64::MAX));
                for k in written {
                    let fp = trawl_dedup::Fingerprint {
                        simhash: k.simhash,
                        exact: k.text_hash,
                    };
                    g.try_check_and_insert(fp, &k.final_url)?;
                }
            }
            Self::MinHash(g) => {
                let mut file = std::io::BufReader::new(std::fs::File::open(pages)?);
                let mut line = String::new();
                let mut written: Vec<(u64, &KeptPage)> = kept
                    .iter()
                    .filter_map(|k| k.page_offset.map(|o| (o, k)))
                    .collect();
                written.sort_unstable_by_key(|(o, _)| *o);
                for (offset, k) in written {
                    file.seek(std::io::SeekFrom::Start(offset))?;
                    line.clear();
                    file.read_line(&mut line)?;
                    let rec: trawl_core::PageRecord = match serde_json::from_str(&line) {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::warn!(url = %k.final_url, "not restored to the gate: {e}");
                            continue;
                        }
                    };
                    let page = GatePage::of(&rec.text, GateMethod::MinHash);
                    if let Some(sk) = &page.minhash {
                        g.try_check_and_insert(sk, &k.final_url)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize, tag: &str) -> String {
        (0..n).map(|i| format!("{tag}{i} ")).collect()
    }

    /// A resumed crawl's gate knows the pages kept before the stop again: their sketches
    /// made again from `pages.jsonl` at the stored offsets (the store lists them in an
    /// order of its own), or their prints.
    #[tokio::test]
    async fn a_resumed_gate_knows_the_kept_pages_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages.jsonl");
        let texts = [
            ("http://a.test/one", words(120, "a")),
            ("http://a.test/two", words(120, "b")),
        ];
        let mut file = String::new();
        let mut kept = Vec::new();
        for (url, text) in &texts {
            let rec = trawl_core::PageRecord {
                url: url.to_string(),
                final_url: url.to_string(),
                status: 200,
                text: text.clone(),
                ..Default::default()
            };
            let fp = trawl_dedup::fingerprint(text);
            kept.push(KeptPage {
                final_url: url.to_string(),
                simhash: fp.simhash,
                text_hash: fp.exact,
                page_offset: Some(file.len() as u64),
            });
            file.push_str(&serde_json::to_string(&rec).unwrap());
            file.push('\n');
        }
        std::fs::write(&path, file).unwrap();
        kept.reverse();
        let probe = |t: &str, m: GateMethod| GatePage::of(t, m);
        for (g, m) in [
            (PageGate::MinHash { similarity: 0.8 }, GateMethod::MinHash),
            (PageGate::SimHash { distance: 2 }, GateMethod::SimHash),
        ] {
            // In memory, and in the file from the first page on.
            for in_memory in [100, 0] {
                let gate = EmbeddedGate::new(g, dir.path(), in_memory);
                gate.restore(&kept, &path).unwrap();
                let gate = gate.shared();
                // Copies of what was written name the pages kept before the stop.
                let copy = words(120, "a");
                let v = gate
                    .check_and_insert(&probe(&copy, m), "http://a.test/new")
                    .await
                    .unwrap();
                assert_eq!(v.original(), Some("http://a.test/one"), "{m:?}");
                let v = gate
                    .check_and_insert(&probe(&words(120, "b"), m), "http://a.test/two-again")
                    .await
                    .unwrap();
                assert_eq!(v.original(), Some("http://a.test/two"), "{m:?}");
                // A kept page fetched again after the stop is still kept.
                let v = gate
                    .check_and_insert(&probe(&words(120, "a"), m), "http://a.test/one")
                    .await
                    .unwrap();
                assert_eq!(v, trawl_dedup::GateVerdict::Kept, "{m:?}");
            }
        }
    }
}
