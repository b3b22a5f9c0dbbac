//! trawl's knowledge base: pages become heading-aware chunks, chunks become vectors
//! (BERT, all-MiniLM-L6-v2 by default), and both go into LanceDB for vector,
//! full-text and hybrid search. A chunk already indexed from another page is stored once
//! and recorded as an alias.

pub mod alloc;
mod bert;
pub mod chunk;
pub mod dataset;
pub mod embed;
pub mod gate;
pub mod indexer;
mod kernels;
pub mod model;
pub mod preview;
mod quant;
mod rows;
pub mod search;
pub mod store;

pub use chunk::{Chunker, ChunkerConfig};
pub use embed::{Embedder, Engine};
pub use indexer::{IndexOptions, IndexStats, Indexer};
pub use search::{Hit, Mode, search, search_with_preview};
pub use store::Store;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(
        "no embedding model in {dir} (missing {missing}): fetch all-MiniLM-L6-v2 with `scripts/fetch-model.sh` (or point --model-dir / TRAWL_MODEL_DIR at a directory holding config.json, tokenizer.json and model.safetensors), or run with --no-embed for a full-text index only"
    )]
    ModelMissing { dir: PathBuf, missing: String },
    #[error("embedding model: {0}")]
    Model(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("index store: {0}")]
    Store(String),
    #[error("index settings: {0}")]
    Config(String),
    #[error("search: {0}")]
    Search(String),
}
