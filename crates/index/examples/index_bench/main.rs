//! The index benchmark's Rust side (`bench/index/run.sh` and `bench/index/scale.sh` drive
//! it; the embedding throughput is trawl-embed's `embed_bench`):
//!
//! - `insert CHUNKS.jsonl DIR [ROWS]`: writes ROWS (100,000) rows, the chunks with their
//!   vectors over and over, into a fresh LanceDB table in batches of 1,000; prints rows/s.
//! - `search CHUNKS.jsonl DIR ROWS QUERIES`: the vector index at ROWS chunks, grown from
//!   the real chunks' embeddings ([`scale`], [`synth`]); it runs `probe DIR` as a child
//!   process for the searching side.
//! - `catchup CHUNKS DIR ROWS`: ROWS more rows into the table `search` kept, then each
//!   index's update timed on its own ([`catchup`]).
//!
//! Each prints one JSON object on stdout.

mod catchup;
mod scale;
mod synth;
mod truth;

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

/// The id of row `i` of a benchmark table (its chunk hash too).
fn row_id(i: usize) -> String {
    format!("{i:032x}")
}

/// Rows `from..` with these texts and vectors, `per_page` chunks a page.
fn rows(texts: &[String], vectors: Vec<Vec<f32>>, from: usize, per_page: usize) -> Vec<ChunkRow> {
    texts
        .iter()
        .zip(vectors)
        .enumerate()
        .map(|(i, (t, v))| ChunkRow {
            id: row_id(from + i),
            url: format!("http://bench/{}", (from + i) / per_page),
            canonical_url: format!("http://bench/{}", (from + i) / per_page),
            title: "bench".into(),
            heading_path: vec!["Section".into()],
            position: ((from + i) % per_page) as u32,
            chunks_in_page: per_page as u32,
            fetched_at_ms: 0,
            page_fingerprint: 0,
            chunk_hash: row_id(from + i),
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
                store.add(&rows(&ts, vs, n, 8), &[]).await.expect("add");
                n += len;
            }
            let wall = t.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({"rows": total, "batch": 1000, "wall_s": wall, "rows_per_s": total as f64 / wall})
            );
        }
        "search" => scale::run(&args[1..]).await,
        "probe" => scale::probe(&args[1]).await,
        "catchup" => catchup::run(&args[1..]).await,
        _ => {
            eprintln!(
                "usage: index_bench insert CHUNKS DIR | search CHUNKS DIR ROWS QUERIES | probe DIR \
                 | catchup CHUNKS DIR ROWS"
            );
            std::process::exit(2);
        }
    }
}
