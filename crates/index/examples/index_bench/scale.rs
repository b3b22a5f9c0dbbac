//! `search CHUNKS.jsonl DIR ROWS QUERIES`: the vector index at scale, grown the way the
//! product grows it.
//!
//! - The real chunks are embedded once (kept beside CHUNKS as `.vectors`); QUERIES of them
//!   are held out as the queries, the rest seed [`Synth`], which grows the table to ROWS.
//! - Rows go in 20,000 at a time, and the indexes are brought up to date whenever a
//!   segment's worth is unindexed, then at the end, with the product's own
//!   `Store::build_indexes` (so the vector index is trained when the table first holds
//!   `MIN_ROWS` at an update, and later rows join it as the product's do).
//! - Then: bytes per chunk on disk (table and index); the truth is each query's exact
//!   top 10, kept while the rows were made ([`Truth`]) and checked against LanceDB's flat
//!   search on [`FLAT_QUERIES`] of them; then, in a process of its own (`probe DIR`), each (nprobes, refine factor) setting's
//!   p50/p95/p99 and recall@10, the product's search in each mode and that process's
//!   memory; then an update of 10,000 pages (40,000 chunks replaced in the product's
//!   flushes of 512, then the index update), embedding excluded.
//! - `FRESH=24,48` (numbers of PQ sub-vectors) also builds the index anew over the whole
//!   table with sqrt(ROWS) partitions, for each number, and measures it the same way.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use lancedb::index::Index;
use lancedb::index::vector::IvfPqIndexBuilder;
use serde_json::{Value, json};
use trawl_index::store::{SEGMENT_ROWS, Store};

use crate::synth::Synth;
use crate::truth::Truth;
use crate::{embedder, percentile, read_chunks, row_id, rows};

/// The product's default for `vector_index_min_rows`.
const MIN_ROWS: usize = 50_000;
/// Chunks a page (the docs crawl has 3.8).
pub const CHUNKS_PER_PAGE: usize = 4;
const UPDATE_PAGES: usize = 10_000;
const FLUSH_ROWS: usize = 512;
/// (nprobes, refine factor) settings measured; trawl's own is marked in the output.
const SETTINGS: [(usize, u32); 6] = [(20, 10), (50, 10), (50, 20), (50, 40), (100, 20), (100, 40)];
/// The first table size searched on the way (then each double of it), before the end.
const PROBE_FROM: usize = 1 << 20;
/// Queries also searched flat through LanceDB: its latency, and a check of [`Truth`].
const FLAT_QUERIES: usize = 10;

pub async fn run(args: &[String]) {
    let texts = read_chunks(&args[0]);
    let dir = &args[1];
    let total: usize = args[2].parse().expect("rows");
    let queries: usize = args[3].parse().expect("queries");
    let vectors = real_vectors(&args[0], &texts);
    let dim = vectors[0].len();
    let step = (vectors.len() / queries.max(1)).max(2);
    let (mut qs, mut base, mut words) = (Vec::new(), Vec::new(), Vec::new());
    for (i, v) in vectors.into_iter().enumerate() {
        if i % step == step / 2 && qs.len() < queries {
            qs.push(v);
            words.push(keywords(&texts[i]));
        } else {
            base.push(v);
        }
    }
    let t = Instant::now();
    let mut synth = Synth::new(base, 0x9e37_79b9_7f4a_7c15);
    let neighbours_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(dir);
    let store = Store::open(dir, Some(dim)).await.expect("open");
    let mut exact = Truth::new(qs.clone());

    let t = Instant::now();
    let mut updates = Vec::new();
    let (mut n, mut unindexed) = (0, 0);
    let (mut next_probe, mut on_the_way, mut probing) = (PROBE_FROM, Vec::new(), 0.0);
    while n < total {
        let len = 20_000.min(total - n);
        let (ts, vs) = batch(&mut synth, &texts, n, len);
        exact.add(n, &vs);
        store
            .add(&rows(&ts, vs, n, CHUNKS_PER_PAGE), &[])
            .await
            .expect("add");
        n += len;
        unindexed += len;
        if unindexed >= SEGMENT_ROWS || n == total {
            updates.push(update(&store, n).await);
            unindexed = 0;
            eprintln!(
                "{n} rows, {:.0} s: {}",
                t.elapsed().as_secs_f64(),
                updates[updates.len() - 1]
            );
            if n >= next_probe && n < total {
                // On the way: how search holds up as the table grows (and figures kept
                // should a long run not finish).
                let p = Instant::now();
                let at = json!({"rows": n, "bytes": bytes_per_chunk(&store, dir, n).await,
                                "search": probe_at(dir, &exact.ids(row_id), &qs, &words)});
                eprintln!("{at}");
                on_the_way.push(at);
                next_probe *= 2;
                probing += p.elapsed().as_secs_f64();
            }
        }
    }
    let load_s = t.elapsed().as_secs_f64() - probing;
    let bytes = bytes_per_chunk(&store, dir, total).await;

    let truth = exact.ids(row_id);
    let flat_n = FLAT_QUERIES.min(qs.len());
    let (flat_lat, flat_ids) = time_queries(&store, &qs[..flat_n], None).await;
    let truth_agrees = recall(&truth[..flat_n], &flat_ids);
    let grown = probe_at(dir, &truth, &qs, &words);
    let update_10k = update_pages(&store, &mut synth, &texts, total).await;

    let subs: Vec<u32> = std::env::var("FRESH")
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    // The update replaced rows the truth named (a flat pass: only when it is used).
    let truth = if subs.is_empty() {
        truth
    } else {
        time_queries(&store, &qs, None).await.1
    };
    let mut fresh = Vec::new();
    for sub in subs {
        let partitions = (total as f64).sqrt().round() as u32;
        let t = Instant::now();
        store
            .chunks()
            .create_index(
                &["vector"],
                Index::IvfPq(
                    IvfPqIndexBuilder::default()
                        .distance_type(lancedb::DistanceType::Cosine)
                        .num_partitions(partitions)
                        .num_sub_vectors(sub),
                ),
            )
            .replace(true)
            .execute()
            .await
            .expect("index");
        let build_s = t.elapsed().as_secs_f64();
        store.prune(Duration::ZERO).await.expect("prune");
        let (vector_bytes, _) = index_bytes(dir);
        fresh.push(json!({
            "num_sub_vectors": sub, "num_partitions": partitions, "build_s": build_s,
            "vector_index_per_chunk": vector_bytes as f64 / total as f64,
            "settings": measure(&store, &qs, &truth).await,
        }));
    }
    println!(
        "{}",
        json!({
            "rows": total, "dim": dim, "queries": qs.len(), "neighbours_s": neighbours_s,
            "load_s": load_s, "updates": updates, "bytes": bytes,
            "flat_p50_ms": percentile(&flat_lat, 0.5), "flat_p95_ms": percentile(&flat_lat, 0.95),
            "flat_queries": flat_n, "flat_recall_of_truth": truth_agrees,
            "grown": grown, "on_the_way": on_the_way, "update_10k_pages": update_10k,
            "fresh": fresh,
        })
    );
}

/// Bytes a chunk on disk, the table's versions but the latest removed first.
async fn bytes_per_chunk(store: &Store, dir: &str, rows: usize) -> Value {
    store.prune(Duration::ZERO).await.expect("prune");
    let (vector_bytes, text_bytes) = index_bytes(dir);
    json!({
        "all_per_chunk": dir_bytes(dir.as_ref()) as f64 / rows as f64,
        "vector_index_per_chunk": vector_bytes as f64 / rows as f64,
        "text_index_per_chunk": text_bytes as f64 / rows as f64,
    })
}

/// Rows `from..from + len` of the grown table: their texts (the real chunks over and
/// over) and their vectors ([`Synth`], which makes them in order).
pub fn batch(
    synth: &mut Synth,
    texts: &[String],
    from: usize,
    len: usize,
) -> (Vec<String>, Vec<Vec<f32>>) {
    let ts = (from..from + len)
        .map(|i| texts[i % texts.len()].clone())
        .collect();
    let vs = (from..from + len).map(|i| synth.vector(i)).collect();
    (ts, vs)
}

/// [`probe_in_child`] against `truth`, each query's true ids.
fn probe_at(dir: &str, truth: &[Vec<String>], qs: &[Vec<f32>], words: &[String]) -> Value {
    std::fs::write(
        std::path::Path::new(dir).join("probe.json"),
        json!({"vectors": qs, "words": words, "truth": truth}).to_string(),
    )
    .expect("write probe");
    probe_in_child(dir)
}

/// The searching side in a process of its own, so its memory is a searcher's: the
/// index opened as `trawl search` and `trawl serve` open it, each setting's recall and
/// latency, the product's search in each mode, and the resident set before and after.
fn probe_in_child(dir: &str) -> Value {
    let exe = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(exe)
        .args(["probe", dir])
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("probe");
    assert!(out.status.success(), "probe failed");
    serde_json::from_slice(&out.stdout).expect("probe json")
}

/// `probe DIR`: see [`probe_in_child`].
pub async fn probe(dir: &str) {
    let file = std::fs::read(std::path::Path::new(dir).join("probe.json")).expect("probe.json");
    let q: Value = serde_json::from_slice(&file).expect("probe json");
    let qs: Vec<Vec<f32>> = serde_json::from_value(q["vectors"].clone()).expect("vectors");
    let words: Vec<String> = serde_json::from_value(q["words"].clone()).expect("words");
    let truth: Vec<Vec<String>> = serde_json::from_value(q["truth"].clone()).expect("truth");
    let rss_start = rss_kib();
    let store = Store::open_existing(dir).await.expect("open");
    let rss_open = rss_kib();
    let settings = measure(&store, &qs, &truth).await;
    let rss_ann = rss_kib();
    let product = product_latency(&store, &words).await;
    println!(
        "{}",
        json!({
            "settings": settings, "product_search": product,
            "rss_kib": {"start": rss_start, "opened": rss_open, "after_ann": rss_ann,
                        "after_product": rss_kib(), "peak": peak_kib()},
        })
    );
}

async fn update(store: &Store, rows: usize) -> Value {
    let t = Instant::now();
    let built = store.build_indexes(MIN_ROWS).await.expect("index");
    let s = t.elapsed().as_secs_f64();
    store.prune(Duration::ZERO).await.expect("prune");
    json!({"rows": rows, "s": s, "built": built})
}

/// 10,000 pages re-crawled with new text: their chunks replaced flush by flush, then the
/// indexes brought up to date.
async fn update_pages(store: &Store, synth: &mut Synth, texts: &[String], total: usize) -> Value {
    let t = Instant::now();
    let n = UPDATE_PAGES * CHUNKS_PER_PAGE;
    let mut done = 0;
    while done < n {
        let len = FLUSH_ROWS.min(n - done);
        let gone: Vec<String> = (done..done + len).map(row_id).collect();
        let vs: Vec<Vec<f32>> = (0..len).map(|j| synth.vector(total + done + j)).collect();
        let ts: Vec<String> = (0..len)
            .map(|j| texts[(done + j) % texts.len()].clone())
            .collect();
        let mut new = rows(&ts, vs, total + done, CHUNKS_PER_PAGE);
        for (j, r) in new.iter_mut().enumerate() {
            r.url = format!("http://bench/{}", (done + j) / CHUNKS_PER_PAGE);
            r.canonical_url = r.url.clone();
        }
        store
            .replace_pages(&gone, &new, &[])
            .await
            .expect("replace");
        done += len;
    }
    let write_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let built = store.build_indexes(MIN_ROWS).await.expect("index");
    let index_s = t.elapsed().as_secs_f64();
    let (rows, _) = store.count().await.expect("count");
    assert_eq!(rows, total, "an update of pages keeps the table's size");
    json!({"pages": UPDATE_PAGES, "chunks": n, "write_s": write_s, "index_s": index_s, "built": built})
}

/// A user's query from a held-out chunk: its first four words of four letters or more.
fn keywords(text: &str) -> String {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|w| w.chars().count() >= 4)
        .take(4)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The product's own search (`trawl_index::search`, what `trawl search` and `/v2/search`
/// call, the query embedded by the product's model), top 10, in each mode.
async fn product_latency(store: &Store, queries: &[String]) -> Value {
    use trawl_index::Mode;
    let e = embedder();
    let mut out = serde_json::Map::new();
    for (name, mode) in [
        ("text", Mode::Text),
        ("vector", Mode::Vector),
        ("hybrid", Mode::Hybrid),
    ] {
        let mut lat = Vec::new();
        let mut empty = 0;
        for q in queries.iter().filter(|q| !q.is_empty()) {
            let t = Instant::now();
            let hits = trawl_index::search(store, Some(&e), q, 10, mode)
                .await
                .expect("search");
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            empty += usize::from(hits.is_empty());
        }
        lat.sort_by(f64::total_cmp);
        out.insert(
            name.into(),
            json!({"queries": lat.len(), "no_hits": empty, "p50_ms": percentile(&lat, 0.5),
                   "p95_ms": percentile(&lat, 0.95), "max_ms": lat.last()}),
        );
    }
    Value::Object(out)
}

async fn measure(store: &Store, qs: &[Vec<f32>], truth: &[Vec<String>]) -> Vec<Value> {
    let mut out = Vec::new();
    for (nprobes, refine) in SETTINGS {
        let (lat, ids) = time_queries(store, qs, Some((nprobes, refine))).await;
        let recall = recall(truth, &ids);
        out.push(json!({
            "nprobes": nprobes, "refine_factor": refine,
            "p50_ms": percentile(&lat, 0.5), "p95_ms": percentile(&lat, 0.95),
            "p99_ms": percentile(&lat, 0.99), "recall_at_10": recall,
            "trawl_default": nprobes == trawl_index::search::NPROBES
                && refine == trawl_index::search::REFINE_FACTOR,
        }));
    }
    out
}

/// Mean share of each query's true ids that were found.
fn recall(truth: &[Vec<String>], found: &[Vec<String>]) -> f64 {
    truth
        .iter()
        .zip(found)
        .map(|(t, f)| t.iter().filter(|id| f.contains(id)).count() as f64 / t.len().max(1) as f64)
        .sum::<f64>()
        / truth.len().max(1) as f64
}

async fn time_queries(
    store: &Store,
    qs: &[Vec<f32>],
    ann: Option<(usize, u32)>,
) -> (Vec<f64>, Vec<Vec<String>>) {
    let mut lat = Vec::new();
    let mut ids = Vec::new();
    for q in qs {
        let t = Instant::now();
        ids.push(search_ids(store, q, ann).await);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(f64::total_cmp);
    (lat, ids)
}

async fn search_ids(store: &Store, q: &[f32], ann: Option<(usize, u32)>) -> Vec<String> {
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
    query = match ann {
        Some((nprobes, refine)) => query
            .nprobes(nprobes)
            .expect("nprobes")
            .refine_factor(refine),
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

/// The chunks' embeddings, computed once and kept beside them (little-endian f32 rows).
pub fn real_vectors(chunks: &str, texts: &[String]) -> Vec<Vec<f32>> {
    let cache = format!("{chunks}.vectors");
    if let Ok(mut f) = std::fs::File::open(&cache) {
        let mut raw = Vec::new();
        f.read_to_end(&mut raw).expect("read vectors");
        let floats: Vec<f32> = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if !floats.is_empty() && floats.len().is_multiple_of(texts.len()) {
            let dim = floats.len() / texts.len();
            return floats.chunks(dim).map(<[f32]>::to_vec).collect();
        }
    }
    let e = embedder();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = e.embed(&refs, 32).expect("embed");
    let mut f = std::fs::File::create(&cache).expect("vector cache");
    for v in &vectors {
        for x in v {
            f.write_all(&x.to_le_bytes()).expect("write vectors");
        }
    }
    vectors
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Bytes of the vector index and of the full-text index: a vector index segment is the
/// directory with an `auxiliary.idx` (its quantized vectors).
fn index_bytes(dir: &str) -> (u64, u64) {
    let Ok(rd) = std::fs::read_dir(std::path::Path::new(dir).join("chunks.lance/_indices")) else {
        return (0, 0);
    };
    rd.flatten().fold((0, 0), |(v, t), e| {
        let b = dir_bytes(&e.path());
        if e.path().join("auxiliary.idx").exists() {
            (v + b, t)
        } else {
            (v, t + b)
        }
    })
}

fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

fn peak_kib() -> u64 {
    status_kib("VmHWM:")
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
