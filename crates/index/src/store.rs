//! The LanceDB side: the `chunks` table (one row per stored chunk, with its vector) and the
//! `chunk_aliases` table (chunks stored once elsewhere), batched writes, page replacement,
//! and the indexes.

use arrow_array::{Array, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, SchemaRef};
use futures_util::TryStreamExt;
use lancedb::index::Index;
use lancedb::index::scalar::FtsIndexBuilder;
use lancedb::index::vector::IvfPqIndexBuilder;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::table::{OptimizeAction, OptimizeOptions};
use lancedb::{Connection, DistanceType, Table};

use crate::IndexError;
pub use crate::rows::{AliasRow, ChunkRow, alias_schema, chunk_schema};
use crate::rows::{alias_batch, alias_rows, chunk_batch};
pub(crate) use crate::rows::{col, collect, heading_paths};

pub const CHUNKS: &str = "chunks";
pub const ALIASES: &str = "chunk_aliases";

/// Rows a segment of a search index covers before the next rows start a segment of their
/// own: the bound on what one index update reads and builds (about 90 MiB of full-text
/// postings), at the cost of one more segment per half-million chunks to search.
pub const SEGMENT_ROWS: usize = 1 << 19;

pub(crate) fn db(e: lancedb::Error) -> IndexError {
    IndexError::Store(e.to_string())
}

/// Every value of a string column of `table` (tests and tools; reads the whole column).
pub async fn string_column(table: &Table, name: &str) -> Result<Vec<String>, IndexError> {
    let batches = collect(&table.query().select(Select::columns(&[name])))
        .await
        .map_err(db)?;
    let mut out = Vec::new();
    for b in &batches {
        let a = col::<StringArray>(b, name)?;
        out.extend((0..a.len()).map(|i| a.value(i).to_string()));
    }
    Ok(out)
}

/// A SQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// How many values one `IN (...)` filter carries: longer lists are split so that a
/// predicate stays a reasonable size for LanceDB's SQL parser.
const IN_LIST_MAX: usize = 256;

/// The inside of an SQL `IN (...)` list: the values quoted, comma-separated.
pub fn in_list<S: AsRef<str>>(values: &[S]) -> String {
    values
        .iter()
        .map(|v| quote(v.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One commit: `rows` merged in by id, and the other rows matching `pred` deleted.
///
/// LanceDB's `merge_insert` takes its source as a stream, which lance spills into a table
/// without statistics; the join then hashes the *target*, every id in the table (a jump of
/// 1 GB at 3.8 M chunks that stayed for the rest of the run). Lance's own builder given
/// the rows in memory knows their size and hashes them instead; the table is streamed.
async fn replace_rows(
    table: &Table,
    pred: &str,
    rows: Option<arrow_array::RecordBatch>,
) -> Result<(), IndexError> {
    use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched, WhenNotMatchedBySource};
    let Some(batch) = rows else {
        return table.delete(pred).await.map(|_| ()).map_err(db);
    };
    let Some(handle) = table.dataset() else {
        return lancedb_merge(table, pred, batch).await;
    };
    let dataset = handle.get().await.map_err(db)?;
    let mut merge =
        MergeInsertBuilder::try_new(dataset.clone(), vec!["id".to_string()]).map_err(lance_err)?;
    merge
        .when_matched(WhenMatched::UpdateAll)
        .when_not_matched(WhenNotMatched::InsertAll)
        .when_not_matched_by_source(
            WhenNotMatchedBySource::delete_if(&dataset, pred).map_err(lance_err)?,
        );
    let job = merge.try_build().map_err(lance_err)?;
    let (merged, _) = job.execute_batches(vec![batch]).await.map_err(lance_err)?;
    // The table handle keeps the version it last saw: it must see this one.
    handle.update(std::sync::Arc::unwrap_or_clone(merged));
    Ok(())
}

/// Rows an IVF partition is trained for; lance splits one past four times this as rows
/// come ([`Store::catch_up`]), so a query's probes read at most `NPROBES` times 8,192
/// codes at any size. At LanceDB's 8,192 (a split past 32,768) a query at a million
/// chunks read most of the index: p50 46 ms against 11 ms at 1,000 partitions.
pub const VECTOR_PARTITION_ROWS: u32 = 2048;

/// The vector index: IVF-PQ with a sub-vector of four dimensions (96 bytes a chunk for
/// 384 dimensions). LanceDB's default of sixteen (24 bytes) lost the order of close
/// neighbours: on `bench/index/scale.sh`'s million chunks grown from real embeddings,
/// recall@10 against exact search was 0.72 at trawl's search settings, 0.90 with eight
/// dimensions, 0.99 with four.
fn vector_index(dim: usize) -> IvfPqIndexBuilder {
    let b = IvfPqIndexBuilder::default()
        .distance_type(DistanceType::Cosine)
        .target_partition_size(VECTOR_PARTITION_ROWS);
    if dim >= 4 && dim.is_multiple_of(4) {
        b.num_sub_vectors((dim / 4) as u32)
    } else {
        b
    }
}

/// The same merge through LanceDB, for a table that is not a local lance dataset.
async fn lancedb_merge(
    table: &Table,
    pred: &str,
    batch: arrow_array::RecordBatch,
) -> Result<(), IndexError> {
    let schema = batch.schema();
    let reader = arrow_array::RecordBatchIterator::new(vec![Ok(batch)], schema);
    let mut merge = table.merge_insert(&["id"]);
    merge
        .when_matched_update_all(None)
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete(Some(pred.to_string()));
    merge.execute(Box::new(reader)).await.map_err(db)?;
    Ok(())
}

fn lance_err(e: lance::Error) -> IndexError {
    IndexError::Store(e.to_string())
}

/// What the gate and the page map need of one stored chunk, read back when an index is
/// reopened.
pub struct Seed<'a> {
    pub id: &'a str,
    pub canonical_url: &'a str,
    pub chunk_hash: u128,
    pub chunk_simhash: u64,
    pub words: u32,
    pub chunks_in_page: u32,
}

pub struct Store {
    conn: Connection,
    chunks: Table,
    aliases: Table,
    dim: Option<usize>,
    schema: SchemaRef,
    /// See [`SEGMENT_ROWS`].
    segment_rows: usize,
}

/// Bytes LanceDB may keep of table metadata (manifests, fragment and file metadata). Its
/// default, 1 GiB, is reached by a long crawl: every flush is a new version, and each is
/// cached, so a process holding the index grew with the crawl until it got there.
const METADATA_CACHE_BYTES: usize = 64 << 20;
/// Bytes LanceDB may keep of opened search indexes (its default is 6 GiB).
const INDEX_CACHE_BYTES: usize = 512 << 20;

/// The process's LanceDB session, whose caches are bounded by the constants above: one
/// for every index the process opens, so a server keeping many open (`trawl serve`'s
/// search) holds them all within the one bound.
fn session() -> std::sync::Arc<lancedb::Session> {
    static SESSION: std::sync::OnceLock<std::sync::Arc<lancedb::Session>> =
        std::sync::OnceLock::new();
    SESSION
        .get_or_init(|| {
            std::sync::Arc::new(lancedb::Session::new(
                INDEX_CACHE_BYTES,
                METADATA_CACHE_BYTES,
                std::sync::Arc::new(lancedb::ObjectStoreRegistry::default()),
            ))
        })
        .clone()
}

async fn connect(uri: &str) -> Result<Connection, IndexError> {
    lancedb::connect(uri)
        .session(session())
        .execute()
        .await
        .map_err(db)
}

impl Store {
    /// Opens (or creates) the index at `uri` (a directory, or any URI LanceDB takes).
    /// `dim` is the vector length, `None` for a full-text-only index. An index built with
    /// vectors cannot take chunks without, nor the other way round.
    pub async fn open(uri: &str, dim: Option<usize>) -> Result<Self, IndexError> {
        if !uri.contains("://") {
            std::fs::create_dir_all(uri).map_err(|e| IndexError::Store(format!("{uri}: {e}")))?;
        }
        let conn = connect(uri).await?;
        let names = conn.table_names().execute().await.map_err(db)?;
        let schema = chunk_schema(dim);
        let chunks = if names.iter().any(|n| n == CHUNKS) {
            let t = conn.open_table(CHUNKS).execute().await.map_err(db)?;
            let have = t.schema().await.map_err(db)?;
            let have_dim = have
                .field_with_name("vector")
                .ok()
                .and_then(|f| match f.data_type() {
                    DataType::FixedSizeList(_, n) => Some(*n as usize),
                    _ => None,
                });
            if have_dim != dim {
                let say = |d: Option<usize>| {
                    d.map_or("no vectors".to_string(), |d| {
                        format!("{d}-dimensional vectors")
                    })
                };
                return Err(IndexError::Store(format!(
                    "the index at {uri} holds {}, this run makes {}: use another index directory, or the same embedding settings",
                    say(have_dim),
                    say(dim)
                )));
            }
            t
        } else {
            conn.create_empty_table(CHUNKS, schema.clone())
                .execute()
                .await
                .map_err(db)?
        };
        let aliases = if names.iter().any(|n| n == ALIASES) {
            conn.open_table(ALIASES).execute().await.map_err(db)?
        } else {
            conn.create_empty_table(ALIASES, alias_schema())
                .execute()
                .await
                .map_err(db)?
        };
        Ok(Self {
            conn,
            chunks,
            aliases,
            dim,
            schema,
            segment_rows: SEGMENT_ROWS,
        })
    }

    /// Opens an existing index for reading; a clear error when there is none.
    pub async fn open_existing(uri: &str) -> Result<Self, IndexError> {
        let conn = connect(uri).await?;
        let names = conn.table_names().execute().await.map_err(db)?;
        if !names.iter().any(|n| n == CHUNKS) {
            return Err(IndexError::Store(format!(
                "no index at {uri} (no `{CHUNKS}` table): run `trawl crawl` first, or point --index at its out/index"
            )));
        }
        let chunks = conn.open_table(CHUNKS).execute().await.map_err(db)?;
        let schema = chunks.schema().await.map_err(db)?;
        let dim = schema
            .field_with_name("vector")
            .ok()
            .and_then(|f| match f.data_type() {
                DataType::FixedSizeList(_, n) => Some(*n as usize),
                _ => None,
            });
        let aliases = match conn.open_table(ALIASES).execute().await {
            Ok(t) => t,
            Err(_) => conn
                .create_empty_table(ALIASES, alias_schema())
                .execute()
                .await
                .map_err(db)?,
        };
        Ok(Self {
            conn,
            chunks,
            aliases,
            dim,
            schema,
            segment_rows: SEGMENT_ROWS,
        })
    }

    /// Removes the tables' versions older than `keep` (their manifests, transactions and
    /// the files only they held; never the latest version): every flush is a version, and
    /// each manifest lists every fragment, so kept whole they grew with the square of a
    /// crawl. Readers hold a version for the length of one query, and writers commit
    /// within seconds of what they read. Returns the bytes removed.
    ///
    /// Data files of the latest version stay: no compaction runs, so the fragments (one a
    /// flush) remain, and with them the size of each manifest.
    pub async fn prune(&self, keep: std::time::Duration) -> Result<u64, IndexError> {
        let older_than = chrono::Duration::from_std(keep)
            .map_err(|e| IndexError::Store(format!("prune: {e}")))?;
        let mut removed = 0;
        for table in [&self.chunks, &self.aliases] {
            let stats = table
                .optimize(OptimizeAction::Prune {
                    older_than: Some(older_than),
                    delete_unverified: Some(false),
                    error_if_tagged_old_versions: Some(false),
                })
                .await
                .map_err(db)?;
            removed += stats.prune.map_or(0, |p| p.bytes_removed);
        }
        Ok(removed)
    }

    /// Moves both tables to their latest versions: what was committed since the store was
    /// opened (by this process or another) is read from then on.
    pub async fn latest(&self) -> Result<(), IndexError> {
        self.chunks.checkout_latest().await.map_err(db)?;
        self.aliases.checkout_latest().await.map_err(db)?;
        Ok(())
    }

    /// Rows a search index segment covers before new rows start another ([`SEGMENT_ROWS`]
    /// by default).
    pub fn set_segment_rows(&mut self, rows: usize) {
        self.segment_rows = rows.max(1);
    }

    pub fn dim(&self) -> Option<usize> {
        self.dim
    }

    pub fn chunks(&self) -> &Table {
        &self.chunks
    }

    pub fn aliases(&self) -> &Table {
        &self.aliases
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Writes `chunks` and `aliases` in place of the rows `gone` (the ids a replaced page
    /// had): one commit per table (a merge on `id` that inserts the new rows, updates the
    /// ones kept and deletes the other `gone` rows), so a write that fails (a full disk)
    /// leaves the table as it was. Delete-then-add lost the page's chunks when the add
    /// failed; here the batch is written again (the service's redelivery, a resumed
    /// crawl's re-index). The rows to delete are named by id, a column the merge reads
    /// anyway: named by page, every row of the table had its URL read at every merge.
    pub async fn replace_pages(
        &self,
        gone: &[String],
        chunks: &[ChunkRow],
        aliases: &[AliasRow],
    ) -> Result<(), IndexError> {
        if gone.is_empty() {
            return self.add(chunks, aliases).await;
        }
        let pred = gone
            .chunks(IN_LIST_MAX)
            .map(|g| format!("id IN ({})", in_list(g)))
            .collect::<Vec<_>>()
            .join(" OR ");
        let chunk_rows = (!chunks.is_empty())
            .then(|| chunk_batch(chunks, &self.schema, self.dim))
            .transpose()?;
        replace_rows(&self.chunks, &pred, chunk_rows).await?;
        let alias_rows = (!aliases.is_empty())
            .then(|| alias_batch(aliases))
            .transpose()?;
        replace_rows(&self.aliases, &pred, alias_rows).await
    }

    /// Appends rows (one commit per table that gets any).
    pub async fn add(&self, chunks: &[ChunkRow], aliases: &[AliasRow]) -> Result<(), IndexError> {
        if !chunks.is_empty() {
            let batch = chunk_batch(chunks, &self.schema, self.dim)?;
            self.chunks.add(batch).execute().await.map_err(db)?;
        }
        if !aliases.is_empty() {
            self.aliases
                .add(alias_batch(aliases)?)
                .execute()
                .await
                .map_err(db)?;
        }
        Ok(())
    }

    /// The tables' versions (chunks, aliases) and when the chunks table's was written
    /// (milliseconds; 0 for a remote table): what a kept index state was filled to match.
    /// The time tells a table made again (the same version numbers) from the one before.
    pub async fn versions(&self) -> Result<(u64, u64, i64), IndexError> {
        let aliases = self.aliases.version().await.map_err(db)?;
        let Some(handle) = self.chunks.dataset() else {
            return Ok((self.chunks.version().await.map_err(db)?, aliases, 0));
        };
        // One read of the dataset gives both the number and the time of its version.
        let v = handle.get().await.map_err(db)?.version();
        Ok((v.version, aliases, v.timestamp.timestamp_millis()))
    }

    pub async fn count(&self) -> Result<(usize, usize), IndexError> {
        Ok((
            self.chunks.count_rows(None).await.map_err(db)?,
            self.aliases.count_rows(None).await.map_err(db)?,
        ))
    }

    /// Calls `each` with what the chunk gate and the page map need of every stored
    /// chunk, one batch read at a time: an index of millions of chunks is never held whole.
    pub async fn seed(
        &self,
        mut each: impl FnMut(Seed<'_>) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        let query = self.chunks.query().select(Select::columns(&[
            "id",
            "canonical_url",
            "chunk_hash",
            "chunk_simhash",
            "words",
            "chunks_in_page",
        ]));
        let mut batches = query.execute().await.map_err(db)?;
        while let Some(b) = batches.try_next().await.map_err(db)? {
            let id = col::<StringArray>(&b, "id")?;
            let canon = col::<StringArray>(&b, "canonical_url")?;
            let hash = col::<StringArray>(&b, "chunk_hash")?;
            let sim = col::<UInt64Array>(&b, "chunk_simhash")?;
            let words = col::<UInt32Array>(&b, "words")?;
            let total = col::<UInt32Array>(&b, "chunks_in_page")?;
            for i in 0..b.num_rows() {
                each(Seed {
                    id: id.value(i),
                    canonical_url: canon.value(i),
                    chunk_hash: u128::from_str_radix(hash.value(i), 16).unwrap_or(0),
                    chunk_simhash: sim.value(i),
                    words: words.value(i),
                    chunks_in_page: total.value(i),
                })?;
            }
        }
        Ok(())
    }

    /// The alias rows that point at any of `targets`.
    pub async fn aliases_of(&self, targets: &[String]) -> Result<Vec<AliasRow>, IndexError> {
        let mut out = Vec::new();
        for group in targets.chunks(IN_LIST_MAX) {
            let list = in_list(group);
            let batches = collect(
                &self
                    .aliases
                    .query()
                    .only_if(format!("alias_of IN ({list})")),
            )
            .await
            .map_err(db)?;
            for b in &batches {
                out.extend(alias_rows(b)?);
            }
        }
        Ok(out)
    }

    /// Takes stored chunks out of the table, returned as alias rows to be pointed
    /// elsewhere (their `alias_of` empty): a chunk moving to a better home.
    pub async fn take_chunks(&self, ids: &[String]) -> Result<Vec<AliasRow>, IndexError> {
        let mut out = Vec::new();
        for group in ids.chunks(IN_LIST_MAX) {
            let pred = format!("id IN ({})", in_list(group));
            let batches = collect(&self.chunks.query().only_if(pred.clone()).select(
                Select::columns(&[
                    "id",
                    "url",
                    "canonical_url",
                    "title",
                    "heading_path",
                    "position",
                    "text",
                    "fetched_at",
                    "page_fingerprint",
                ]),
            ))
            .await
            .map_err(db)?;
            for b in &batches {
                out.extend(crate::rows::chunk_alias_rows(b)?);
            }
            self.chunks.delete(pred.as_str()).await.map_err(db)?;
        }
        Ok(out)
    }

    /// Removes alias rows by id.
    pub async fn delete_aliases(&self, ids: &[String]) -> Result<(), IndexError> {
        for group in ids.chunks(IN_LIST_MAX) {
            let list = in_list(group);
            self.aliases
                .delete(format!("id IN ({list})").as_str())
                .await
                .map_err(db)?;
        }
        Ok(())
    }

    /// Calls `each` with every alias row's id, page and the chunk it points at, one batch
    /// read at a time.
    pub async fn alias_links(
        &self,
        mut each: impl FnMut(&str, &str, &str) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        let query =
            self.aliases
                .query()
                .select(Select::columns(&["id", "canonical_url", "alias_of"]));
        let mut batches = query.execute().await.map_err(db)?;
        while let Some(b) = batches.try_next().await.map_err(db)? {
            let id = col::<StringArray>(&b, "id")?;
            let canon = col::<StringArray>(&b, "canonical_url")?;
            let of = col::<StringArray>(&b, "alias_of")?;
            for i in 0..b.num_rows() {
                each(id.value(i), canon.value(i), of.value(i))?;
            }
        }
        Ok(())
    }

    /// Builds what searching needs: the full-text index on `text`, and, once the table
    /// holds `vector_index_min_rows` chunks, an IVF-PQ vector index (below that a flat
    /// search is exact and fast enough); an index already there takes the rows it does not
    /// cover yet ([`Store::catch_up`]). Returns what it built or updated.
    pub async fn build_indexes(
        &self,
        vector_index_min_rows: usize,
    ) -> Result<Vec<&'static str>, IndexError> {
        let rows = self.chunks.count_rows(None).await.map_err(db)?;
        let mut built = Vec::new();
        if rows == 0 {
            return Ok(built);
        }
        let indices = self.chunks.list_indices().await.map_err(db)?;
        let named = |col: &str| {
            indices
                .iter()
                .find(|i| i.columns.iter().any(|c| c == col))
                .map(|i| i.name.clone())
        };
        match named("text") {
            Some(name) => {
                if self.catch_up(&name).await? {
                    built.push("text (updated)");
                }
            }
            None => {
                self.chunks
                    .create_index(&["text"], Index::FTS(FtsIndexBuilder::default()))
                    .execute()
                    .await
                    .map_err(db)?;
                built.push("text");
            }
        }
        if self.dim.is_some() && rows >= vector_index_min_rows.max(256) {
            match named("vector") {
                Some(name) => {
                    if self.catch_up(&name).await? {
                        built.push("vector (updated)");
                    }
                }
                None => {
                    self.chunks
                        .create_index(
                            &["vector"],
                            Index::IvfPq(vector_index(self.dim.unwrap_or_default())),
                        )
                        .execute()
                        .await
                        .map_err(db)?;
                    built.push("vector");
                }
            }
        }
        Ok(built)
    }

    /// Adds the rows index `name` does not cover yet: merged into its latest segment
    /// while its segments hold fewer than [`SEGMENT_ROWS`] (or what was set) on average, else as a segment of
    /// their own. An update reads the segment it merges into whole (the full-text one
    /// loads its posting lists), so merging into one segment grew with the table: 665 MiB
    /// at 3.8 M chunks, built once at the end. False when there was nothing to add.
    pub async fn catch_up(&self, name: &str) -> Result<bool, IndexError> {
        let Some(stats) = self.chunks.index_stats(name).await.map_err(db)? else {
            return Ok(false);
        };
        if stats.num_unindexed_rows == 0 {
            return Ok(false);
        }
        let segments = stats.num_indices.unwrap_or(1).max(1) as usize;
        let mut opts = if stats.distance_type.is_some() {
            // A vector index's partitions were sized for the table it was trained on:
            // lance's own choice (no merge count) adds a segment, or, once a partition
            // holds four times its target, splits it and merges every segment, so the
            // rows a query's probes scan stay bounded as the table grows (kept at their
            // first size, 64 partitions trained at 524,288 rows held 150,000 rows each
            // at 10 M, most of the table read by every query).
            OptimizeOptions::default()
        } else if stats.num_indexed_rows / segments < self.segment_rows {
            OptimizeOptions::merge(1)
        } else {
            OptimizeOptions::append()
        };
        opts.index_names = Some(vec![name.to_string()]);
        self.chunks
            .optimize(OptimizeAction::Index(opts))
            .await
            .map_err(db)?;
        Ok(true)
    }
}
