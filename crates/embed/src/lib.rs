//! Sentence embeddings for trawl's index: all-MiniLM-L6-v2 (or another BERT model in the
//! sentence-transformers layout), computed the way sentence-transformers computes them.
//! On the CPU trawl's own forward pass runs (int8 dense layers where the CPU has AVX-512
//! VNNI); with the `cuda` feature, candle's `BertModel` runs on a CUDA device.
//!
//! A crate of its own so that the embedder builds without LanceDB: the CUDA benchmark
//! (`examples/embed_bench.rs`) is cross-built for a GPU machine with only what it needs.

pub mod alloc;
mod bert;
pub mod embed;
mod kernels;
pub mod model;
mod quant;

pub use embed::{Embedder, Engine, Precision};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "no embedding model in {dir} (missing {missing}): fetch all-MiniLM-L6-v2 with `scripts/fetch-model.sh` (or point --model-dir / TRAWL_MODEL_DIR at a directory holding config.json, tokenizer.json and model.safetensors), or run with --no-embed for a full-text index only"
    )]
    ModelMissing { dir: PathBuf, missing: String },
    #[error("embedding model: {0}")]
    Model(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("embedding settings: {0}")]
    Config(String),
}
