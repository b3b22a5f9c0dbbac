//! trawl's knowledge base: pages become heading-aware chunks, chunks become vectors
//! (BERT, all-MiniLM-L6-v2 by default), and both go into LanceDB for vector,
//! full-text and hybrid search. A chunk already indexed from another page is stored once
//! and recorded as an alias.

pub mod chunk;
pub mod dataset;
pub mod gate;
pub mod indexer;
pub mod preview;
mod rows;
pub mod search;
pub mod state;
pub mod store;

pub use chunk::{Chunker, ChunkerConfig};
// The embedder lives in trawl-embed (no LanceDB there); these paths stay as they were.
pub use indexer::{IndexOptions, IndexStats, Indexer};
pub use search::{Hit, Mode, search, search_with_preview};
pub use store::Store;
pub use trawl_embed::{EmbedError, Embedder, Engine, Precision, alloc, embed, model};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Embed(#[from] EmbedError),
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
