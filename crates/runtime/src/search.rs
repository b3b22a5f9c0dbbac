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
    Searcher::default().search(q).await
}

/// Indexes a [`Searcher`] keeps open; past that, the one used longest ago is closed.
const OPEN_INDEXES: usize = 64;

/// What a process answering many queries keeps between them: the embedding model (loaded
/// by the first query that needs it) and the indexes it opened. An open index keeps what
/// LanceDB read of its search indexes (token sets, posting lists, partitions) in the
/// process's bounded session, so a query reads only what no earlier one did; each query
/// first moves the index to its latest version, so pages written since are found.
#[derive(Default)]
pub struct Searcher {
    model: tokio::sync::OnceCell<Arc<trawl_index::Embedder>>,
    /// By URI, the one used longest ago first.
    open: tokio::sync::Mutex<Vec<OpenIndex>>,
}

struct OpenIndex {
    uri: String,
    store: Arc<trawl_index::Store>,
    made: Option<Made>,
}

/// When and as which file a local index's chunks table was made: an index removed and
/// written again at the same place (a new crawl into the same directory) is another, and is
/// opened afresh (moved to its latest version, the open one answered nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Made {
    inode: u64,
    born: Option<std::time::SystemTime>,
}

fn made(uri: &str) -> Option<Made> {
    use std::os::unix::fs::MetadataExt;
    if uri.contains("://") {
        return None;
    }
    let m = std::fs::metadata(std::path::Path::new(uri).join("chunks.lance")).ok()?;
    Some(Made {
        inode: m.ino(),
        born: m.created().ok(),
    })
}

impl Searcher {
    /// The index at `uri`, open and at its latest version.
    async fn store(&self, uri: &str) -> anyhow::Result<Arc<trawl_index::Store>> {
        let now = made(uri);
        let kept = {
            let mut open = self.open.lock().await;
            match open.iter().position(|o| o.uri == uri) {
                Some(i) => {
                    let o = open.remove(i);
                    let store = (o.made == now).then(|| o.store.clone());
                    if store.is_some() {
                        open.push(o);
                    }
                    store
                }
                None => None,
            }
        };
        if let Some(store) = kept {
            match store.latest().await {
                Ok(()) => return Ok(store),
                // Removed, say: opened afresh below, or its error said.
                Err(e) => tracing::debug!(uri, "an open index could not be refreshed: {e}"),
            }
        }
        let store = Arc::new(trawl_index::Store::open_existing(uri).await?);
        let mut open = self.open.lock().await;
        open.retain(|o| o.uri != uri);
        if open.len() >= OPEN_INDEXES {
            open.remove(0);
        }
        open.push(OpenIndex {
            uri: uri.to_string(),
            store: store.clone(),
            made: now,
        });
        Ok(store)
    }

    /// Runs `q` as [`search`] does.
    pub async fn search(&self, q: &SearchQuery) -> anyhow::Result<Found> {
        let uri = q.index.to_string_lossy().to_string();
        if !uri.contains("://") && !q.index.is_dir() {
            anyhow::bail!(
                "no index at {uri}: crawl first (`trawl crawl URL --out DIR` writes DIR/index) or pass --index"
            );
        }
        let mut notes = Vec::new();
        let store = self.store(&uri).await?;
        // A crawl still computing vectors keeps a full-text preview of every page it wrote.
        let preview = trawl_index::preview::open(&uri).await?;
        if preview.is_some() && q.mode != Mode::Vector {
            notes.push(STILL_EMBEDDING.into());
        }
        // A text-only index (or text mode) needs no model; hybrid on such an index falls
        // back to text with a note.
        let mut mode = q.mode;
        if store.dim().is_none() && mode == Mode::Hybrid {
            notes.push(TEXT_ONLY.into());
            mode = Mode::Text;
        }
        let embedder = if mode == Mode::Text {
            None
        } else {
            let dir = trawl_index::model::resolve_dir(q.model_dir.as_deref());
            let loaded = self
                .model
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_core::message::PageRecord;
    use trawl_index::{IndexOptions, Indexer};

    fn page(url: &str, word: &str) -> PageRecord {
        let text: String = (0..20)
            .map(|i| format!("The {word} passage number {i} says what {word} means. "))
            .collect();
        let markdown = format!("# {word}\n\n{text}");
        PageRecord {
            url: url.into(),
            final_url: url.into(),
            status: 200,
            title: Some(word.into()),
            text: markdown.clone(),
            markdown: Some(markdown),
            ..Default::default()
        }
    }

    /// One searcher answers from an index it keeps open, and finds what was written to
    /// it after its first query; an index removed and made again is opened afresh.
    #[tokio::test]
    async fn an_open_index_answers_with_what_was_written_since() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index");
        let write = async |pages: &[(&str, &str)]| {
            let mut o = IndexOptions::new(index.to_string_lossy().to_string());
            o.embed = false;
            let mut ix = Indexer::open(o).await.unwrap();
            for (url, word) in pages {
                ix.add_page(&page(url, word)).await.unwrap();
            }
            ix.finish().await.unwrap();
        };
        write(&[("http://t/a", "marmot")]).await;
        let searcher = Searcher::default();
        let ask = |word: &str| SearchQuery {
            index: index.clone(),
            query: word.into(),
            k: 3,
            mode: Mode::Hybrid,
            model_dir: None,
        };
        let urls = async |word: &str| -> Vec<String> {
            let found = searcher.search(&ask(word)).await.unwrap();
            found.hits.into_iter().map(|h| h.url).collect()
        };
        assert_eq!(urls("marmot").await, ["http://t/a"]);
        write(&[("http://t/b", "ocelot")]).await;
        assert_eq!(urls("ocelot").await, ["http://t/b"], "written since");
        assert_eq!(urls("marmot").await, ["http://t/a"]);
        std::fs::remove_dir_all(&index).unwrap();
        write(&[("http://t/c", "quokka")]).await;
        assert_eq!(urls("quokka").await, ["http://t/c"], "made again");
        assert!(urls("marmot").await.is_empty(), "the old index's pages");
    }
}
