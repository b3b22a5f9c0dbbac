//! The embedded runtime's page gate: the crawl's method in memory, and what a resumed
//! crawl puts back into it.

use std::io::{BufRead, Seek};
use std::path::Path;
use std::sync::Arc;

use trawl_core::settings::PageGate;
use trawl_dedup::{Gate, GateMethod, GatePage, MemoryGate, MemoryMinGate};
use trawl_store::resume::KeptPage;

/// The embedded runtime's page gate, of the crawl's method.
pub enum EmbeddedGate {
    SimHash(Arc<MemoryGate>),
    MinHash(Arc<MemoryMinGate>),
}

impl EmbeddedGate {
    pub fn new(g: PageGate) -> Self {
        match g {
            PageGate::SimHash { distance } => Self::SimHash(Arc::new(MemoryGate::new(distance))),
            PageGate::MinHash { similarity } => {
                Self::MinHash(Arc::new(MemoryMinGate::new(similarity)))
            }
        }
    }

    pub fn shared(self) -> Arc<dyn Gate> {
        match self {
            Self::SimHash(g) => g,
            Self::MinHash(g) => g,
        }
    }

    /// Puts back the pages a resumed crawl wrote, copies too (both gates store them), in
    /// the order they were written: for SimHash their fingerprints from the store, for
    /// MinHash their sketches, made again from their text in `pages.jsonl`.
    pub fn restore(&self, kept: &[KeptPage], pages: &Path) -> anyhow::Result<()> {
        match self {
            Self::SimHash(g) => {
                let mut written: Vec<&KeptPage> = kept.iter().collect();
                written.sort_by_key(|k| k.page_offset);
                for k in written {
                    let fp = trawl_dedup::Fingerprint {
                        simhash: k.simhash,
                        exact: k.text_hash,
                    };
                    g.check_and_insert_sync(fp, &k.final_url);
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
                        g.check_and_insert_sync(sk, &k.final_url);
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

    /// A resumed MinHash crawl knows the pages written before the stop, copies included:
    /// their sketches are made again from `pages.jsonl` at the stored offsets.
    #[tokio::test]
    async fn a_resumed_minhash_gate_knows_the_written_pages_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages.jsonl");
        let texts = [
            ("http://a.test/one", words(120, "a"), None),
            (
                "http://a.test/copy",
                words(118, "a") + "x y",
                Some("http://a.test/one"),
            ),
            ("http://a.test/two", words(120, "b"), None),
        ];
        let mut file = String::new();
        let mut kept = Vec::new();
        for (url, text, dup) in &texts {
            let rec = trawl_core::PageRecord {
                url: url.to_string(),
                final_url: url.to_string(),
                status: 200,
                text: text.clone(),
                duplicate_of: dup.map(String::from),
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
        // The store's order is not the written order.
        kept.reverse();
        let gate = EmbeddedGate::new(PageGate::MinHash { similarity: 0.8 });
        gate.restore(&kept, &path).unwrap();
        let gate = gate.shared();
        let probe = |t: &str| GatePage::of(t, GateMethod::MinHash);
        // A copy of the copy's text names a page written before the stop.
        let v = gate
            .check_and_insert(&probe(&(words(118, "a") + "x y")), "http://a.test/new")
            .await
            .unwrap();
        let of = v.original().expect("a copy").to_string();
        assert!(
            of == "http://a.test/copy" || of == "http://a.test/one",
            "{of}"
        );
        let v = gate
            .check_and_insert(&probe(&words(120, "b")), "http://a.test/two-again")
            .await
            .unwrap();
        assert_eq!(v.original(), Some("http://a.test/two"));
        // The SimHash gate stores each print once.
        let simhash = EmbeddedGate::new(PageGate::SimHash { distance: 2 });
        simhash.restore(&kept, &path).unwrap();
        let prints: std::collections::HashSet<u64> = kept.iter().map(|k| k.simhash).collect();
        match simhash {
            EmbeddedGate::SimHash(g) => assert_eq!(g.len(), prints.len()),
            EmbeddedGate::MinHash(_) => unreachable!(),
        }
    }
}
