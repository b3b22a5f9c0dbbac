//! `trawl search` as a function: one query against an index (and the preview a crawl still
//! computing vectors keeps), returning the hits and what the caller should be told.

use std::path::PathBuf;
use std::sync::Arc;

use trawl_index::{Hit, Mode};

/// The note on results from a crawl still computing vectors.
const STILL_EMBEDDING: &str = "the index is still computing vectors: full-text results come \
    from its preview (every page written so far), vector results from the pages embedded so far";

/// The note on hybrid search falling back to text search.
const TEXT_ONLY: &str = "this index has no vectors (built with --no-embed): text search only";

/// One query, as a value.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// The index directory (or a LanceDB URI).
    pub index: PathBuf,
    pub query: String,
    /// Results wanted.
    pub k: usize,
    pub mode: Mode,
    /// The embedding model's directory (default: the one `trawl_index::model` resolves).
    pub model_dir: Option<PathBuf>,
}

/// A query's results, best first, and notes on how they were found (a preview, or text
/// search in place of hybrid), to show before them.
#[derive(Debug)]
pub struct Found {
    pub hits: Vec<Hit>,
    /// Without a `note: ` prefix; in the order they arose.
    pub notes: Vec<String>,
}

/// Runs `q`; a text-only index turns hybrid search into text search (with a note) rather
/// than failing for want of a model.
pub async fn search(q: &SearchQuery) -> anyhow::Result<Found> {
    search_cached(q, &tokio::sync::OnceCell::new()).await
}

/// [`search`] with the model kept in `model` (loaded on the first query that needs it): a
/// server answering many queries loads it once.
pub async fn search_cached(
    q: &SearchQuery,
    model: &tokio::sync::OnceCell<Arc<trawl_index::Embedder>>,
) -> anyhow::Result<Found> {
    let uri = q.index.to_string_lossy().to_string();
    if !uri.contains("://") && !q.index.is_dir() {
        anyhow::bail!(
            "no index at {uri}: crawl first (`trawl crawl URL --out DIR` writes DIR/index) or pass --index"
        );
    }
    let mut notes = Vec::new();
    let store = trawl_index::Store::open_existing(&uri).await?;
    // A crawl still computing vectors keeps a full-text preview of every page it wrote.
    let preview = trawl_index::preview::open(&uri).await?;
    if preview.is_some() && q.mode != Mode::Vector {
        notes.push(STILL_EMBEDDING.into());
    }
    // A text-only index (or text mode) needs no model; hybrid on such an index falls back
    // to text with a note.
    let mut mode = q.mode;
    if store.dim().is_none() && mode == Mode::Hybrid {
        notes.push(TEXT_ONLY.into());
        mode = Mode::Text;
    }
    let embedder = if mode == Mode::Text {
        None
    } else {
        let dir = trawl_index::model::resolve_dir(q.model_dir.as_deref());
        let loaded = model
            .get_or_try_init(|| async move {
                let e = tokio::task::spawn_blocking(move || trawl_index::Embedder::load(&dir))
                    .await??;
                anyhow::Ok(Arc::new(e))
            })
            .await?;
        Some(loaded.clone())
    };
    let hits = trawl_index::search_with_preview(
        &store,
        preview.as_ref(),
        embedder.as_deref(),
        &q.query,
        q.k,
        mode,
    )
    .await?;
    Ok(Found { hits, notes })
}
