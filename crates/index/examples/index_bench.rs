//! The index benchmark's Rust side (`bench/index/run.sh` drives it; the embedding
//! throughput is trawl-embed's `embed_bench`):
//!
//! - `insert CHUNKS.jsonl DIR [ROWS]`: writes ROWS (100,000) rows, the chunks with their
//!   vectors over and over, into a fresh LanceDB table in batches of 1,000; prints rows/s.
//! - `search CHUNKS.jsonl DIR ROWS QUERIES`: grows a table to ROWS chunks (the real vectors,
//!   then random mixtures of two of them with noise, renormalized), builds the IVF-PQ
//!   index, and times
//!   QUERIES top-10 searches (p50/p99, flat and indexed; recall@10 of the index).
//!
//! Each prints one JSON object on stdout.

use std::io::BufRead;
use std::time::Instant;

use trawl_index::store::{ChunkRow, Store};

// Large tensors are allocated and freed on every forward pass: mimalloc keeps the pages,
// where glibc's malloc returns them to the kernel and faults them in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn read_chunks(path: &str) -> Vec<String> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    std::io::BufReader::new(f)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.expect("line")).expect("json");
            v["text"].as_str().expect("text").to_string()
        })
        .collect()
}

fn embedder() -> trawl_index::Embedder {
    let dir = trawl_index::model::resolve_dir(None);
    trawl_index::Embedder::load(&dir).unwrap_or_else(|e| panic!("{e}"))
}

fn rows(texts: &[String], vectors: Vec<Vec<f32>>, from: usize) -> Vec<ChunkRow> {
    texts
        .iter()
        .zip(vectors)
        .enumerate()
        .map(|(i, (t, v))| ChunkRow {
            id: format!("{:032x}", from + i),
            url: format!("http://bench/{}", (from + i) / 8),
            canonical_url: format!("http://bench/{}", (from + i) / 8),
            title: "bench".into(),
            heading_path: vec!["Section".into()],
            position: ((from + i) % 8) as u32,
            chunks_in_page: 8,
            fetched_at_ms: 0,
            page_fingerprint: 0,
            chunk_hash: format!("{:032x}", from + i),
            chunk_simhash: (from + i) as u64,
            words: t.split_whitespace().count() as u32,
            tokens: 0,
            text: t.clone(),
            vector: Some(v),
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A cheap deterministic generator, so the big table is the same in every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }
}

#[tokio::main]
async fn main() {
    trawl_index::alloc::keep_freed_pages();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = args.first().map(String::as_str).unwrap_or("");
    match cmd {
        "insert" => {
            let texts = read_chunks(&args[1]);
            let e = embedder();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = e.embed(&refs, 32).expect("embed");
            let total: usize = args.get(3).map_or(100_000, |n| n.parse().expect("rows"));
            let _ = std::fs::remove_dir_all(&args[2]);
            let store = Store::open(&args[2], Some(e.dim())).await.expect("open");
            let t = Instant::now();
            let mut n = 0;
            while n < total {
                let len = 1000.min(total - n);
                let idx: Vec<usize> = (n..n + len).map(|i| i % texts.len()).collect();
                let ts: Vec<String> = idx.iter().map(|&i| texts[i].clone()).collect();
                let vs: Vec<Vec<f32>> = idx.iter().map(|&i| vectors[i].clone()).collect();
                store.add(&rows(&ts, vs, n), &[]).await.expect("add");
                n += len;
            }
            let wall = t.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({"rows": total, "batch": 1000, "wall_s": wall, "rows_per_s": total as f64 / wall})
            );
        }
        "search" => {
            let texts = read_chunks(&args[1]);
            let dir = &args[2];
            let total: usize = args[3].parse().expect("rows");
            let queries: usize = args[4].parse().expect("queries");
            let e = embedder();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let base = e.embed(&refs, 32).expect("embed");
            let _ = std::fs::remove_dir_all(dir);
            let store = Store::open(dir, Some(e.dim())).await.expect("open");
            let mut rng = Rng(0x9e3779b97f4a7c15);
            let t = Instant::now();
            let mut n = 0;
            while n < total {
                let len = 20_000.min(total - n);
                let mut vs = Vec::with_capacity(len);
                let mut ts = Vec::with_capacity(len);
                for i in 0..len {
                    // Past the real vectors: mixtures of two of them plus noise, so the
                    // table is a spread of distinct points (copies of a few hundred
                    // vectors would make "the" top 10 a coin toss among near-ties).
                    let mut v: Vec<f32> = if n + i < base.len() {
                        base[n + i].clone()
                    } else {
                        let a = &base
                            [(rng.next().abs() * 2.0 * base.len() as f32) as usize % base.len()];
                        let b = &base
                            [(rng.next().abs() * 2.0 * base.len() as f32) as usize % base.len()];
                        let w = rng.next() + 0.5;
                        a.iter()
                            .zip(b)
                            .map(|(x, y)| w * x + (1.0 - w) * y + 0.02 * rng.next())
                            .collect()
                    };
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    v.iter_mut().for_each(|x| *x /= norm);
                    vs.push(v);
                    ts.push(texts[(n + i) % texts.len()].clone());
                }
                store.add(&rows(&ts, vs, n), &[]).await.expect("add");
                n += len;
            }
            let load_s = t.elapsed().as_secs_f64();
            // Queries: other chunks' texts, embedded as a user's query would be.
            let qs: Vec<Vec<f32>> = base
                .iter()
                .step_by((base.len() / queries).max(1))
                .take(queries)
                .cloned()
                .collect();
            let time = |nprobes: Option<usize>| {
                let store = &store;
                let qs = qs.clone();
                async move {
                    let mut lat = Vec::new();
                    let mut ids = Vec::new();
                    for q in &qs {
                        let t = Instant::now();
                        let hits = search_ids(store, q, nprobes).await;
                        lat.push(t.elapsed().as_secs_f64() * 1000.0);
                        ids.push(hits);
                    }
                    lat.sort_by(f64::total_cmp);
                    (lat, ids)
                }
            };
            let (flat_lat, flat_ids) = time(None).await;
            let t = Instant::now();
            let built = store.build_indexes(1).await.expect("index");
            let index_s = t.elapsed().as_secs_f64();
            let mut indexed = Vec::new();
            for nprobes in [20, trawl_index::search::NPROBES, 100] {
                let (lat, ids) = time(Some(nprobes)).await;
                let recall: f64 = flat_ids
                    .iter()
                    .zip(&ids)
                    .map(|(f, i)| {
                        f.iter().filter(|id| i.contains(id)).count() as f64 / f.len().max(1) as f64
                    })
                    .sum::<f64>()
                    / flat_ids.len() as f64;
                indexed.push(serde_json::json!({
                    "nprobes": nprobes, "refine_factor": trawl_index::search::REFINE_FACTOR,
                    "p50_ms": percentile(&lat, 0.5), "p99_ms": percentile(&lat, 0.99),
                    "recall_at_10": recall,
                    "trawl_default": nprobes == trawl_index::search::NPROBES,
                }));
            }
            println!(
                "{}",
                serde_json::json!({
                    "rows": total, "queries": qs.len(), "load_s": load_s, "index_build_s": index_s,
                    "indexes": built,
                    "flat_p50_ms": percentile(&flat_lat, 0.5), "flat_p99_ms": percentile(&flat_lat, 0.99),
                    "ivfpq": indexed,
                })
            );
        }
        _ => {
            eprintln!("usage: index_bench insert CHUNKS DIR | search CHUNKS DIR ROWS QUERIES");
            std::process::exit(2);
        }
    }
}

async fn search_ids(store: &Store, q: &[f32], nprobes: Option<usize>) -> Vec<String> {
    use arrow_array::{Array, StringArray};
    use futures_util::TryStreamExt;
    use lancedb::query::{ExecutableQuery, QueryBase, Select};
    let mut query = store
        .chunks()
        .vector_search(q.to_vec())
        .expect("query")
        .distance_type(lancedb::DistanceType::Cosine)
        .select(Select::columns(&["id"]))
        .limit(10);
    query = match nprobes {
        Some(n) => query
            .nprobes(n)
            .expect("nprobes")
            .refine_factor(trawl_index::search::REFINE_FACTOR),
        None => query.bypass_vector_index(),
    };
    let batches: Vec<arrow_array::RecordBatch> = query
        .execute()
        .await
        .expect("search")
        .try_collect()
        .await
        .expect("results");
    batches
        .iter()
        .flat_map(|b| {
            let a = b
                .column_by_name("id")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
                .expect("id");
            (0..a.len())
                .map(|i| a.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}
