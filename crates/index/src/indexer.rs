//! Pages in, chunks out: chunk, pass every chunk through the chunk gate, embed the new ones
//! in batches, write them to LanceDB, and replace a page's chunks when it comes again.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trawl_core::PageRecord;
use trawl_dedup::simhash::{Fingerprint, fingerprint};
use xxhash_rust::xxh3::xxh3_128;

use crate::chunk::{Chunker, ChunkerConfig, Draft};
use crate::embed::Embedder;
use crate::gate::{ChunkGate, ChunkVerdict};
use crate::state::{IndexState, Stamp};
use crate::store::{AliasRow, ChunkRow, SEGMENT_ROWS, Store};
use crate::{IndexError, model};

#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// Where the index lives (a directory or a LanceDB URI).
    pub uri: String,
    /// Embed chunks (needs the model); without, only the full-text index is built.
    pub embed: bool,
    /// The model directory; `None` = `TRAWL_MODEL_DIR`, else the fetch script's cache.
    pub model_dir: Option<PathBuf>,
    /// The embedder's number format (the `embed_precision` setting).
    pub precision: crate::Precision,
    pub chunker: ChunkerConfig,
    /// Chunks per forward pass of the model.
    pub batch_size: usize,
    /// SimHash distance under which a chunk is a near-copy; `None` turns chunk dedup off.
    pub dedup_distance: Option<u32>,
    /// Rows in the table before a vector index is built (below it, search is flat).
    pub vector_index_min_rows: usize,
    /// Chunks gathered before they are embedded and written.
    pub flush_chunks: usize,
    /// Chunks a search index segment covers: the indexes take new chunks each time this
    /// many are written, so no update reads more than about a segment.
    pub segment_rows: usize,
    /// How long the tables' earlier versions are kept: each time the search indexes are
    /// brought up to date, older ones go ([`crate::Store::prune`]).
    pub keep_versions: std::time::Duration,
    /// The uses the index serves besides search (the `purpose` setting): a page whose
    /// site reserves one of them is left out.
    pub purposes: Vec<trawl_core::policy::Purpose>,
}

impl IndexOptions {
    /// An index at `uri` with the default settings.
    pub fn new(uri: impl Into<String>) -> Self {
        Self::from_settings(uri, &trawl_core::settings::IndexSettings::default())
    }

    /// An index at `uri` cut as `s` says, embedding (or not) with this process's model.
    pub fn for_process(
        uri: impl Into<String>,
        s: &trawl_core::settings::IndexSettings,
        embed: bool,
        model_dir: Option<PathBuf>,
    ) -> Self {
        Self {
            embed,
            model_dir,
            ..Self::from_settings(uri, s)
        }
    }

    /// An index at `uri` cut and deduplicated as `s` says, embedding with the default model.
    pub fn from_settings(uri: impl Into<String>, s: &trawl_core::settings::IndexSettings) -> Self {
        Self {
            uri: uri.into(),
            embed: true,
            model_dir: None,
            precision: crate::Precision::Auto,
            chunker: ChunkerConfig {
                max_tokens: s.chunk_tokens as usize,
                overlap_tokens: s.chunk_overlap as usize,
            },
            batch_size: s.embed_batch as usize,
            dedup_distance: s.chunk_dedup.then_some(s.chunk_dedup_distance),
            vector_index_min_rows: s.vector_index_min_rows,
            flush_chunks: 512,
            segment_rows: SEGMENT_ROWS,
            keep_versions: KEEP_VERSIONS,
            purposes: s.purpose.clone(),
        }
    }
}

/// What an indexing run did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct IndexStats {
    pub pages: u64,
    pub pages_replaced: u64,
    /// Pages taken out (removed on a re-crawl).
    pub pages_removed: u64,
    pub pages_skipped: u64,
    /// Pages left out for what they say of themselves: `noindex`, or a use the index
    /// serves reserved by their site.
    pub pages_excluded: u64,
    /// Stored chunks that moved to a page they are more of (a chapter over the whole
    /// book on one page), the earlier page keeping an alias.
    pub chunks_rehomed: u64,
    pub chunks: u64,
    pub aliases_exact: u64,
    pub aliases_near: u64,
    pub tokens: u64,
    pub embed_seconds: f64,
    pub write_seconds: f64,
    pub indexes_built: Vec<String>,
    /// Bytes of the tables' earlier versions removed.
    #[serde(default)]
    pub bytes_pruned: u64,
}

impl IndexStats {
    /// The line `trawl index` and `trawl crawl` end with, for an index at `dir`.
    pub fn summary(&self, dir: &str) -> String {
        format!(
            "index: {} pages ({} replaced, {} left out: noindex or reserved), {} chunks stored, {} repeated chunks kept as aliases ({} exact, {} near, {} moved to a page they are more of), {:.1}s embedding; {} in {}",
            self.pages,
            self.pages_replaced,
            self.pages_excluded,
            self.chunks,
            self.aliases_exact + self.aliases_near + self.chunks_rehomed,
            self.aliases_exact,
            self.aliases_near,
            self.chunks_rehomed,
            self.embed_seconds,
            if self.indexes_built.is_empty() {
                "no search indexes".to_string()
            } else {
                format!("search indexes: {}", self.indexes_built.join(", "))
            },
            dir
        )
    }
}

pub struct Indexer {
    opts: IndexOptions,
    store: Store,
    embedder: Option<Arc<Embedder>>,
    chunker: Chunker,
    gate: Option<ChunkGate>,
    /// The chunk gate's chunks, each canonical URL's chunk and alias ids (stored or
    /// pending), and the stored chunks aliases point at: in a file, not in memory.
    state: IndexState,
    pending: Vec<(ChunkRow, String)>,
    pending_aliases: Vec<AliasRow>,
    /// Pages whose stored rows go before the pending ones are written, with the ids of
    /// those rows.
    replace: HashMap<String, Vec<String>>,
    /// Stored chunk ids that are going away; aliases pointing at them must be resolved again.
    orphaned: HashSet<String>,
    /// Stored chunks moving to a better home, at the next flush.
    demoted: Vec<Demotion>,
    /// Chunks written since the search indexes were last brought up to date.
    unindexed: usize,
    stats: IndexStats,
}

/// A stored chunk that becomes an alias of a chunk of a page it is more of.
struct Demotion {
    old: String,
    new: String,
    distance: u32,
    /// The old chunk's gate row, put back should the move be called off.
    entry: Option<crate::gate::GateEntry>,
}

/// How long earlier versions of the tables are kept ([`IndexOptions::keep_versions`]):
/// longer than a query holds one or a writer's commit reads since, short enough that a
/// long crawl's versions (one a flush, each listing every fragment, so their bytes grow
/// with the square of the crawl) do not pile up: 15% of the tables at 100,000 pages
/// (33 of 224 MB), by the same count some 3 of the 4.3 GB at a million.
pub const KEEP_VERSIONS: std::time::Duration = std::time::Duration::from_secs(60);

/// The id of a page's `n`th chunk: stable across runs for the same canonical URL.
pub fn chunk_id(canonical: &str, n: usize) -> String {
    format!("{:032x}", xxh3_128(format!("{canonical}\n{n}").as_bytes()))
}

/// The URL a page is indexed under: its declared canonical URL when that is on the host
/// the page was fetched from, else where it was fetched. A canonical on another host is
/// not taken: any page could otherwise name another site's page and replace its rows.
pub fn canonical_url(page: &PageRecord) -> &str {
    let same_host = |c: &str| {
        let (Ok(c), Ok(f)) = (url::Url::parse(c), url::Url::parse(&page.final_url)) else {
            return false;
        };
        matches!(c.scheme(), "http" | "https")
            && c.host_str() == f.host_str()
            && c.port_or_known_default() == f.port_or_known_default()
    };
    page.meta
        .canonical
        .as_deref()
        .filter(|c| same_host(c))
        .unwrap_or(&page.final_url)
}

/// Pages worth indexing: a 2xx answer with text, and not a copy of another page. A page
/// kept cut (past the body cap or the 8 MiB extraction reads, or to fit a message) is
/// indexed from the part that was kept.
pub fn wants(page: &PageRecord) -> bool {
    let cut = |kind: &str| matches!(kind, "body_too_large" | "record_too_large");
    (200..300).contains(&page.status)
        && page.error.as_ref().is_none_or(|e| cut(&e.kind))
        && page.duplicate_of.is_none()
        && !page.text.trim().is_empty()
}

/// Why a page the index could take is left out by what it says of itself: `noindex`
/// (header or meta), or its site reserving search or one of `purposes`.
pub fn excluded(
    page: &PageRecord,
    purposes: &[trawl_core::policy::Purpose],
) -> Option<&'static str> {
    use trawl_core::policy::Purpose;
    if page.robots.noindex.is_some() {
        return Some("noindex");
    }
    std::iter::once(Purpose::Search)
        .chain(purposes.iter().copied())
        .find(|p| page.usage.get(*p).is_reserved())
        .map(Purpose::as_str)
}

/// What the state must have been filled to match for the index in `store`.
async fn stamp_of(store: &Store, opts: &IndexOptions) -> Result<Stamp, IndexError> {
    let (chunks_version, aliases_version, chunks_written_ms) = store.versions().await?;
    Ok(Stamp {
        chunks_version,
        aliases_version,
        chunks_written_ms,
        gate: opts.dedup_distance,
    })
}

/// Fills an empty state from the tables: every stored chunk into the gate and its page,
/// every alias into its page and its target.
async fn fill_state(
    store: &Store,
    gate: Option<ChunkGate>,
    state: &mut IndexState,
) -> Result<(), IndexError> {
    store
        .seed(|s| {
            if let Some(g) = gate {
                let fp = Fingerprint {
                    simhash: s.chunk_simhash,
                    exact: s.chunk_hash,
                };
                g.insert(state, s.id, fp, s.words as usize, s.chunks_in_page)?;
            }
            state.add_to_page(s.canonical_url, s.id)
        })
        .await?;
    store
        .alias_links(|id, canon, of| {
            state.add_to_page(canon, id)?;
            state.add_target(of)
        })
        .await
}

fn parse_ms(s: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .unwrap_or(0)
}

impl Indexer {
    pub async fn open(opts: IndexOptions) -> Result<Self, IndexError> {
        let embedder = if opts.embed {
            let dir = model::resolve_dir(opts.model_dir.as_deref());
            let precision = opts.precision;
            let e = tokio::task::spawn_blocking(move || Embedder::load_with(&dir, precision))
                .await
                .map_err(|e| IndexError::Model(e.to_string()))??;
            Some(Arc::new(e))
        } else {
            None
        };
        let chunker = match &embedder {
            Some(e) => Chunker::new(e.tokenizer(), opts.chunker.clone())?,
            None => Chunker::words(opts.chunker.clone())?,
        };
        let mut store = Store::open(&opts.uri, embedder.as_ref().map(|e| e.dim())).await?;
        store.set_segment_rows(opts.segment_rows);
        let gate = opts.dedup_distance.map(ChunkGate::new);
        let stamp = stamp_of(&store, &opts).await?;
        // An index elsewhere (object storage) keeps its state in a temporary file, filled
        // each time; a local one beside the tables.
        let (mut state, kept) = if opts.uri.contains("://") {
            (IndexState::create(&std::env::temp_dir())?, false)
        } else {
            IndexState::open(std::path::Path::new(&opts.uri), &stamp)?
        };
        if !kept {
            fill_state(&store, gate, &mut state).await?;
        }
        Ok(Self {
            opts,
            store,
            embedder,
            chunker,
            gate,
            state,
            pending: Vec::new(),
            pending_aliases: Vec::new(),
            replace: HashMap::new(),
            orphaned: HashSet::new(),
            demoted: Vec::new(),
            unindexed: 0,
            stats: IndexStats::default(),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn embedder(&self) -> Option<&Arc<Embedder>> {
        self.embedder.as_ref()
    }

    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// Nothing added is waiting to be written: every page added so far is in the table.
    pub fn is_flushed(&self) -> bool {
        self.pending.is_empty()
            && self.pending_aliases.is_empty()
            && self.replace.is_empty()
            && self.orphaned.is_empty()
            && self.demoted.is_empty()
    }

    /// Chunks a page and queues its chunks; writes when enough are queued. Returns false
    /// for a page that is not indexed (an error, a copy of another page, no text, or
    /// [`excluded`]: then its earlier rows go).
    pub async fn add_page(&mut self, page: &PageRecord) -> Result<bool, IndexError> {
        if excluded(page, &self.opts.purposes).is_some() {
            // A page that turned noindex (or reserved) on a re-crawl takes its rows along.
            self.remove_page(canonical_url(page))?;
            self.stats.pages_excluded += 1;
            return Ok(false);
        }
        if !wants(page) {
            self.stats.pages_skipped += 1;
            return Ok(false);
        }
        let canonical = canonical_url(page).to_string();
        if let Some(old) = self.state.take_page(&canonical)? {
            self.forget(&canonical, &old)?;
            self.stats.pages_replaced += 1;
        }
        let title = page.title.clone().unwrap_or_default();
        let source = page.markdown.as_deref().unwrap_or(&page.text);
        let drafts = self.chunker.chunk(&title, source)?;
        let fetched_at_ms = parse_ms(&page.fetched_at);
        let page_fingerprint = page
            .simhash
            .as_deref()
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| fingerprint(&page.text).simhash);
        let total = drafts.len() as u32;
        let mut ids = Vec::with_capacity(drafts.len());
        for (n, d) in drafts.into_iter().enumerate() {
            let id = chunk_id(&canonical, n);
            ids.push(id.clone());
            let fp = fingerprint(&d.text);
            let words = trawl_dedup::simhash::words(&d.text).len();
            let verdict = match self.gate {
                Some(g) => g.check(&self.state, &fp, words)?,
                None => ChunkVerdict::New,
            };
            // The text is more of this page than of the one holding it: it moves here.
            let verdict = match verdict {
                ChunkVerdict::Alias { of, distance } if self.better_home(&of, total)? => {
                    self.rehome(of, &id, distance)?;
                    ChunkVerdict::New
                }
                v => v,
            };
            let Draft {
                heading_path,
                text,
                embed_text,
                tokens,
            } = d;
            match verdict {
                ChunkVerdict::Alias { of, distance } => {
                    if distance == 0 {
                        self.stats.aliases_exact += 1;
                    } else {
                        self.stats.aliases_near += 1;
                    }
                    self.pending_aliases.push(AliasRow {
                        id,
                        url: page.final_url.clone(),
                        canonical_url: canonical.clone(),
                        title: title.clone(),
                        heading_path,
                        position: n as u32,
                        alias_of: of,
                        distance,
                        text,
                        fetched_at_ms,
                        page_fingerprint,
                    });
                }
                ChunkVerdict::New => {
                    if let Some(g) = self.gate {
                        g.insert(&mut self.state, &id, fp, words, total)?;
                    }
                    self.stats.chunks += 1;
                    self.stats.tokens += tokens as u64;
                    self.pending.push((
                        ChunkRow {
                            id,
                            url: page.final_url.clone(),
                            canonical_url: canonical.clone(),
                            title: title.clone(),
                            heading_path,
                            position: n as u32,
                            chunks_in_page: total,
                            fetched_at_ms,
                            page_fingerprint,
                            chunk_hash: format!("{:032x}", fp.exact),
                            chunk_simhash: fp.simhash,
                            words: words as u32,
                            tokens: tokens as u32,
                            text,
                            vector: None,
                        },
                        embed_text,
                    ));
                }
            }
        }
        self.state.put_page(&canonical, &ids)?;
        self.stats.pages += 1;
        if self.pending.len() >= self.opts.flush_chunks {
            self.flush().await?;
        }
        Ok(true)
    }

    /// Whether a page of `total` chunks is a better home for the stored chunk `of`: the
    /// chunk is a larger part of it than of the page holding it.
    fn better_home(&self, of: &str, total: u32) -> Result<bool, IndexError> {
        let Some(g) = self.gate else {
            return Ok(false);
        };
        Ok(g.total(&self.state, of)?.is_some_and(|t| total < t))
    }

    /// Turns the stored (or pending) chunk `old` into an alias of `new`, which the caller
    /// stores: a pending row moves now, a stored one at the flush; aliases pointing at
    /// `old` are resolved again (they find `new`).
    fn rehome(&mut self, old: String, new: &str, distance: u32) -> Result<(), IndexError> {
        let entry = match self.gate {
            Some(g) => g.remove(&mut self.state, &old)?,
            None => None,
        };
        // A stored chunk that was to move to `old` stays where it is: `old` is about to
        // be an alias itself.
        self.call_off_demotions(|d| d.new == old)?;
        self.stats.chunks_rehomed += 1;
        self.orphaned.insert(old.clone());
        match self.pending.iter().position(|(r, _)| r.id == old) {
            Some(i) => {
                let (r, _) = self.pending.remove(i);
                self.pending_aliases.push(AliasRow {
                    id: r.id,
                    url: r.url,
                    canonical_url: r.canonical_url,
                    title: r.title,
                    heading_path: r.heading_path,
                    position: r.position,
                    alias_of: new.to_string(),
                    distance,
                    text: r.text,
                    fetched_at_ms: r.fetched_at_ms,
                    page_fingerprint: r.page_fingerprint,
                });
            }
            None => self.demoted.push(Demotion {
                old,
                new: new.to_string(),
                distance,
                entry,
            }),
        }
        Ok(())
    }

    /// Stored chunks whose move `off` names stay chunks, back in the gate.
    fn call_off_demotions(&mut self, off: impl Fn(&Demotion) -> bool) -> Result<(), IndexError> {
        let (gone, kept): (Vec<Demotion>, Vec<Demotion>) =
            std::mem::take(&mut self.demoted).into_iter().partition(off);
        self.demoted = kept;
        for d in gone {
            self.stats.chunks_rehomed = self.stats.chunks_rehomed.saturating_sub(1);
            if let (Some(g), Some(entry)) = (self.gate, &d.entry) {
                g.restore(&mut self.state, &d.old, entry)?;
            }
        }
        Ok(())
    }

    /// Stored chunks that moved home become aliases of their new home, once it is written
    /// (a failure before leaves the text stored twice, never nowhere).
    async fn demote_stored(&mut self) -> Result<(), IndexError> {
        if self.demoted.is_empty() {
            return Ok(());
        }
        let demoted = std::mem::take(&mut self.demoted);
        let ids: Vec<String> = demoted.iter().map(|d| d.old.clone()).collect();
        let mut rows = self.store.take_chunks(&ids).await?;
        for r in rows.iter_mut() {
            if let Some(d) = demoted.iter().find(|x| x.old == r.id) {
                r.alias_of = d.new.clone();
                r.distance = d.distance;
            }
        }
        rows.retain(|r| !r.alias_of.is_empty());
        self.store.add(&[], &rows).await?;
        for a in rows {
            self.state.add_target(&a.alias_of)?;
        }
        Ok(())
    }

    /// Takes the page indexed under `canonical` out (its rows go at the next flush, and
    /// aliases pointing at them are resolved again). False when it is not in the index.
    pub fn remove_page(&mut self, canonical: &str) -> Result<bool, IndexError> {
        match self.state.take_page(canonical)? {
            Some(old) => {
                self.forget(canonical, &old)?;
                self.stats.pages_removed += 1;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Takes a page's earlier chunks out of the gate, the queue and (at the next flush)
    /// the table.
    fn forget(&mut self, canonical: &str, old: &[String]) -> Result<(), IndexError> {
        let old_set: HashSet<&String> = old.iter().collect();
        let before = self.pending.len() + self.pending_aliases.len();
        self.pending.retain(|(r, _)| !old_set.contains(&r.id));
        self.pending_aliases.retain(|a| !old_set.contains(&a.id));
        let dropped_pending = before - self.pending.len() - self.pending_aliases.len();
        // A chunk of this page that was to move elsewhere goes with the page (its id may
        // come back as a new chunk of the page, which must stay one); a chunk that was to
        // move here stays where it is.
        let moving = self.demoted.len();
        self.demoted.retain(|d| !old_set.contains(&d.old));
        let went = (moving - self.demoted.len()) as u64;
        self.stats.chunks_rehomed = self.stats.chunks_rehomed.saturating_sub(went);
        self.call_off_demotions(|d| old_set.contains(&d.new))?;
        if let Some(g) = self.gate {
            for id in old {
                g.remove(&mut self.state, id)?;
            }
        }
        if dropped_pending < old.len() {
            // Some of them are in the table.
            self.replace
                .entry(canonical.to_string())
                .or_default()
                .extend(old.iter().cloned());
        }
        for id in old {
            self.orphaned.insert(id.clone());
        }
        Ok(())
    }

    /// Aliases (stored or pending, of other pages) that pointed at chunks now gone go
    /// through the gate again: they become chunks of their own or point elsewhere.
    async fn resolve_orphans(&mut self) -> Result<(), IndexError> {
        if self.orphaned.is_empty() {
            return Ok(());
        }
        let orphaned: Vec<String> = self.orphaned.drain().collect();
        let gone: HashSet<&String> = orphaned.iter().collect();
        let mut redo: Vec<AliasRow> = Vec::new();
        let (keep, moved): (Vec<AliasRow>, Vec<AliasRow>) =
            std::mem::take(&mut self.pending_aliases)
                .into_iter()
                .partition(|a| !gone.contains(&a.alias_of));
        self.pending_aliases = keep;
        redo.extend(moved);
        let mut stored_targets: Vec<String> = Vec::new();
        for id in &orphaned {
            if self.state.is_target(id)? {
                stored_targets.push(id.clone());
            }
        }
        if !stored_targets.is_empty() {
            let rows = self.store.aliases_of(&stored_targets).await?;
            let rows: Vec<AliasRow> = rows
                .into_iter()
                .filter(|a| !self.replace.contains_key(&a.canonical_url))
                .collect();
            for t in &stored_targets {
                self.state.remove_target(t)?;
            }
            let ids: Vec<String> = rows.iter().map(|a| a.id.clone()).collect();
            self.store.delete_aliases(&ids).await?;
            redo.extend(rows);
        }
        for a in redo {
            let fp = fingerprint(&a.text);
            let words = trawl_dedup::simhash::words(&a.text).len();
            let verdict = match self.gate {
                Some(g) => g.check(&self.state, &fp, words)?,
                None => ChunkVerdict::New,
            };
            match verdict {
                ChunkVerdict::Alias { of, distance } => self.pending_aliases.push(AliasRow {
                    alias_of: of,
                    distance,
                    ..a
                }),
                ChunkVerdict::New => {
                    let total = self.state.page_len(&a.canonical_url)? as u32;
                    if let Some(g) = self.gate {
                        g.insert(&mut self.state, &a.id, fp, words, total)?;
                    }
                    let tokens = self.chunker.count(&a.text)?;
                    let embed_text = a.text.clone();
                    self.pending.push((
                        ChunkRow {
                            id: a.id,
                            url: a.url,
                            canonical_url: a.canonical_url,
                            title: a.title,
                            heading_path: a.heading_path,
                            position: a.position,
                            chunks_in_page: total,
                            fetched_at_ms: a.fetched_at_ms,
                            page_fingerprint: a.page_fingerprint,
                            chunk_hash: format!("{:032x}", fp.exact),
                            chunk_simhash: fp.simhash,
                            words: words as u32,
                            tokens: tokens as u32,
                            text: a.text,
                            vector: None,
                        },
                        embed_text,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Embeds and writes everything queued.
    pub async fn flush(&mut self) -> Result<(), IndexError> {
        self.resolve_orphans().await?;
        if self.pending.is_empty() && self.pending_aliases.is_empty() && self.replace.is_empty() {
            return self.demote_stored().await;
        }
        let (mut rows, texts): (Vec<ChunkRow>, Vec<String>) =
            std::mem::take(&mut self.pending).into_iter().unzip();
        if let Some(e) = &self.embedder {
            let t = Instant::now();
            let e = e.clone();
            let batch = self.opts.batch_size;
            let vectors = tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                e.embed(&refs, batch)
            })
            .await
            .map_err(|e| IndexError::Model(e.to_string()))??;
            for (row, v) in rows.iter_mut().zip(vectors) {
                row.vector = Some(v);
            }
            self.stats.embed_seconds += t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        let gone: Vec<String> = self.replace.drain().flat_map(|(_, ids)| ids).collect();
        let aliases = std::mem::take(&mut self.pending_aliases);
        self.store.replace_pages(&gone, &rows, &aliases).await?;
        for a in &aliases {
            self.state.add_target(&a.alias_of)?;
        }
        self.demote_stored().await?;
        self.stats.write_seconds += t.elapsed().as_secs_f64();
        self.unindexed += rows.len();
        if self.unindexed >= self.opts.segment_rows {
            // A segment's worth: indexed now, so no update, and not the one at the end,
            // reads more than a segment.
            self.update_indexes().await?;
        }
        Ok(())
    }

    /// Builds the search indexes, or brings them up to date.
    async fn update_indexes(&mut self) -> Result<(), IndexError> {
        let built = self
            .store
            .build_indexes(self.opts.vector_index_min_rows)
            .await?;
        for b in built {
            if !self.stats.indexes_built.iter().any(|have| have == b) {
                self.stats.indexes_built.push(b.to_string());
            }
        }
        self.unindexed = 0;
        self.stats.bytes_pruned += self.store.prune(self.opts.keep_versions).await?;
        Ok(())
    }

    /// Writes what is queued and builds the search indexes; the state file is stamped as
    /// matching the tables, so the next writer need not fill it again.
    pub async fn finish(&mut self) -> Result<IndexStats, IndexError> {
        self.flush().await?;
        self.update_indexes().await?;
        let stamp = stamp_of(&self.store, &self.opts).await?;
        self.state.stamp(&stamp)?;
        Ok(self.stats.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(final_url: &str, canonical: Option<&str>) -> PageRecord {
        let mut p = PageRecord {
            final_url: final_url.into(),
            ..PageRecord::default()
        };
        p.meta.canonical = canonical.map(str::to_string);
        p
    }

    #[test]
    fn a_canonical_is_the_key_only_on_the_pages_own_host() {
        let at = "https://docs.example.org/v2/page?x=1";
        let same = "https://docs.example.org/page";
        assert_eq!(canonical_url(&page(at, Some(same))), same);
        for other in [
            "https://victim.example.com/page",
            "https://example.org/page",
            "https://docs.example.org:8443/page",
            "ftp://docs.example.org/page",
            "/page",
            "not a url",
        ] {
            assert_eq!(canonical_url(&page(at, Some(other))), at, "{other}");
        }
        assert_eq!(canonical_url(&page(at, None)), at);
    }
}
