//! The embedding benchmark's Rust side (`bench/index/run.sh` and `bench/index/gpu.sh`
//! drive it). It links no LanceDB, so it can be cross-built with `--features cuda` for a
//! GPU machine and carried there alone.
//!
//! - `embed CHUNKS.jsonl [BATCH] [ENGINE] [VECTORS]`: embeds every chunk's `text` in
//!   batches of BATCH (32) and prints chunks/s and chunks per CPU-second of the embedding
//!   itself (model loading and a warm-up batch excluded). ENGINE is `native`, `int8`,
//!   `candle` (on the CPU) or `auto`: what the product picks (`Embedder::load`: CUDA when
//!   built with it and a device is there, `TRAWL_EMBED_PRECISION` honoured). VECTORS, when
//!   given, receives the vectors as little-endian f32, one row of `dim` per chunk, in order.
//! - `agree CHUNKS.jsonl [A] [B]`: the cosine of each chunk's vectors under engines A and B
//!   (`native` and `int8`), or of engine A's against a VECTORS file B: min, 1st percentile,
//!   median.
//!
//! Each prints one JSON object on stdout.

use std::io::{BufRead, Write};
use std::time::Instant;

use trawl_embed::{Embedder, Engine, model};

// Large tensors are allocated and freed on every forward pass: mimalloc keeps the pages,
// where glibc's malloc returns them to the kernel and faults them in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn cpu_seconds() -> f64 {
    // utime + stime of this process, in clock ticks (100 per second on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

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

fn embedder(engine: &str) -> Embedder {
    let dir = model::resolve_dir(None);
    let engine = match engine {
        "auto" => {
            // The product's setting, as its services read it.
            let precision = std::env::var("TRAWL_EMBED_PRECISION")
                .unwrap_or_default()
                .parse()
                .unwrap_or_else(|e| panic!("{e}"));
            return Embedder::load_with(&dir, precision).unwrap_or_else(|e| panic!("{e}"));
        }
        "native" => Engine::Native,
        "int8" => Engine::Int8,
        "candle" => Engine::Candle,
        other => panic!("engine {other:?}: auto, native, int8 or candle"),
    };
    Embedder::load_engine(&dir, engine).unwrap_or_else(|e| panic!("{e}"))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn write_vectors(path: &str, vectors: &[Vec<f32>]) {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).unwrap_or_else(|e| panic!("{path}: {e}")),
    );
    for x in vectors.iter().flatten() {
        f.write_all(&x.to_le_bytes()).expect("write vectors");
    }
    f.flush().expect("write vectors");
}

fn read_vectors(path: &str, dim: usize) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let floats: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    floats.chunks_exact(dim).map(<[f32]>::to_vec).collect()
}

fn embed(args: &[String]) {
    let texts = read_chunks(&args[1]);
    let batch: usize = args.get(2).map_or(32, |b| b.parse().expect("batch"));
    let engine = args.get(3).map_or("native", String::as_str);
    let e = embedder(engine);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // One small batch first: page the weights in, size the thread pool, load the kernels.
    e.embed(&refs[..batch.min(refs.len())], batch)
        .expect("warm-up");
    let (t, c) = (Instant::now(), cpu_seconds());
    let v = e.embed(&refs, batch).expect("embed");
    let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
    assert_eq!(v.len(), texts.len());
    if let Some(path) = args.get(4) {
        write_vectors(path, &v);
    }
    println!(
        "{}",
        serde_json::json!({
            "impl": format!("trawl ({engine})"), "device": e.device_name(),
            "chunks": texts.len(), "batch": batch, "wall_s": wall, "cpu_s": cpu,
            "chunks_per_s": texts.len() as f64 / wall,
            "chunks_per_cpu_s": texts.len() as f64 / cpu,
        })
    );
}

fn agree(args: &[String]) {
    let texts = read_chunks(&args[1]);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let a = args.get(2).map_or("native", String::as_str);
    let b = args.get(3).map_or("int8", String::as_str);
    let ea = embedder(a);
    let va = ea.embed(&refs, 32).expect("embed");
    let vb = if std::path::Path::new(b).is_file() {
        read_vectors(b, ea.dim())
    } else {
        embedder(b).embed(&refs, 32).expect("embed")
    };
    assert_eq!(va.len(), vb.len(), "{b} holds another number of vectors");
    let mut cos: Vec<f64> = va
        .iter()
        .zip(&vb)
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| f64::from(p * q)).sum())
        .collect();
    cos.sort_by(f64::total_cmp);
    println!(
        "{}",
        serde_json::json!({
            "a": a, "b": b, "chunks": cos.len(), "cosine_min": cos[0],
            "cosine_p1": percentile(&cos, 0.01), "cosine_median": percentile(&cos, 0.5),
        })
    );
}

fn main() {
    trawl_embed::alloc::keep_freed_pages();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str).unwrap_or("") {
        "embed" => embed(&args),
        "agree" => agree(&args),
        other => panic!("command {other:?}: embed or agree"),
    }
}
