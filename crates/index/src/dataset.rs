//! Datasets a user can open: the index's chunks with their embeddings as one Parquet file,
//! read from LanceDB as a stream and written a row group at a time, so an index larger
//! than memory exports in the memory of one row group.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures_util::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::Serialize;

use crate::IndexError;
use crate::rows::{arrow, col};
use crate::store::{Store, db};

/// What the chunks of one page carry from the page: the export's id of the page and where
/// it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PageMeta {
    pub page_id: String,
    pub language: Option<String>,
    /// `crawl`, or the archive file the page was read from.
    pub source: String,
    pub source_record_id: Option<String>,
}

/// Rows per Parquet row group: a group is what the writer holds in memory (8192 chunks of
/// ~1,500 characters and 384 floats: ~25 MB).
pub const ROW_GROUP: usize = 8192;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ChunkExport {
    pub file: String,
    /// Chunks written, and the pages they belong to.
    pub chunks: u64,
    pub pages: u64,
    /// Chunks of pages the page export did not keep.
    pub chunks_skipped: u64,
    /// The embeddings' length (`None`: a full-text index, no embedding column).
    pub dim: Option<usize>,
    pub row_groups: usize,
}

/// The index's columns the dataset takes, and their names in it.
const COLUMNS: [(&str, &str); 11] = [
    ("id", "id"),
    ("url", "url"),
    ("canonical_url", "canonical_url"),
    ("title", "title"),
    ("heading_path", "heading_path"),
    ("position", "position"),
    ("chunks_in_page", "chunks_in_page"),
    ("tokens", "token_count"),
    ("words", "words"),
    ("fetched_at", "fetched_at"),
    ("text", "text"),
];

fn out_schema(input: &Schema, dim: Option<usize>) -> Result<SchemaRef, IndexError> {
    let field = |from: &str, to: &str| -> Result<Field, IndexError> {
        let f = input
            .field_with_name(from)
            .map_err(|_| IndexError::Store(format!("the index has no {from} column")))?;
        Ok(Field::new(to, f.data_type().clone(), f.is_nullable()))
    };
    let mut fields = vec![field("id", "id")?];
    fields.push(Field::new("page_id", DataType::Utf8, true));
    for (from, to) in &COLUMNS[1..] {
        fields.push(field(from, to)?);
    }
    for name in ["language", "source", "source_record_id"] {
        fields.push(Field::new(name, DataType::Utf8, true));
    }
    if dim.is_some() {
        fields.push(field("vector", "embedding")?);
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// Writes the chunks of `store` to `out` (Parquet). With `pages`, only the chunks of those
/// pages (by URL), each with its page's metadata; without, every chunk, the metadata null.
/// The file is written beside `out` and renamed into place when complete.
pub async fn export_chunks(
    store: &Store,
    out: &Path,
    pages: Option<&HashMap<String, PageMeta>>,
    row_group: usize,
) -> Result<ChunkExport, IndexError> {
    let dim = store.dim();
    let mut columns: Vec<&str> = COLUMNS.iter().map(|(c, _)| *c).collect();
    if dim.is_some() {
        columns.push("vector");
    }
    let io = |e: std::io::Error| IndexError::Store(format!("{}: {e}", out.display()));
    let pq =
        |e: parquet::errors::ParquetError| IndexError::Store(format!("{}: {e}", out.display()));
    let stored = store.chunks().schema().await.map_err(db)?;
    let schema = out_schema(&stored, dim)?;
    let mut stream = store
        .chunks()
        .query()
        .select(Select::columns(&columns))
        .execute()
        .await
        .map_err(db)?;
    let partial = {
        let mut p = out.as_os_str().to_owned();
        p.push(".partial");
        std::path::PathBuf::from(p)
    };
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(row_group.max(1)))
        .build();
    let file = std::fs::File::create(&partial).map_err(io)?;
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(pq)?;
    let mut report = ChunkExport {
        file: out.display().to_string(),
        dim,
        ..ChunkExport::default()
    };
    let mut seen_pages = HashSet::new();
    while let Some(batch) = stream.try_next().await.map_err(db)? {
        let (rows, skipped) = dataset_batch(&batch, &schema, pages)?;
        report.chunks_skipped += skipped;
        if rows.num_rows() == 0 {
            continue;
        }
        let canonical = col::<StringArray>(&rows, "canonical_url")?;
        for i in 0..canonical.len() {
            seen_pages.insert(xxhash_rust::xxh3::xxh3_64(canonical.value(i).as_bytes()));
        }
        report.chunks += rows.num_rows() as u64;
        writer.write(&rows).map_err(pq)?;
    }
    let meta = writer.close().map_err(pq)?;
    report.row_groups = meta.num_row_groups();
    report.pages = seen_pages.len() as u64;
    std::fs::rename(&partial, out).map_err(io)?;
    Ok(report)
}

/// One stored batch as dataset rows: the kept pages' chunks, the index's columns renamed,
/// the page metadata added. Returns the rows and how many were left out.
fn dataset_batch(
    batch: &RecordBatch,
    schema: &SchemaRef,
    pages: Option<&HashMap<String, PageMeta>>,
) -> Result<(RecordBatch, u64), IndexError> {
    let url = col::<StringArray>(batch, "url")?;
    let metas: Vec<Option<&PageMeta>> = (0..batch.num_rows())
        .map(|i| pages.and_then(|p| p.get(url.value(i))))
        .collect();
    let keep: Vec<bool> = metas
        .iter()
        .map(|m| pages.is_none() || m.is_some())
        .collect();
    let skipped = keep.iter().filter(|k| !**k).count() as u64;
    let kept: Vec<Option<&PageMeta>> = metas
        .into_iter()
        .filter(|m| pages.is_none() || m.is_some())
        .collect();
    // A batch kept whole (every chunk of an index, or of kept pages) is not copied.
    let mask = (skipped > 0).then(|| BooleanArray::from(keep));
    let take = |name: &str| -> Result<ArrayRef, IndexError> {
        let a = batch
            .column_by_name(name)
            .ok_or_else(|| IndexError::Store(format!("the index has no {name} column")))?;
        match &mask {
            Some(m) => arrow_select::filter::filter(a.as_ref(), m).map_err(arrow),
            None => Ok(a.clone()),
        }
    };
    let meta_col = |f: &dyn Fn(&PageMeta) -> Option<&str>| -> ArrayRef {
        Arc::new(kept.iter().map(|m| m.and_then(f)).collect::<StringArray>())
    };
    let mut cols = vec![take("id")?, meta_col(&|m| Some(m.page_id.as_str()))];
    for (from, _) in &COLUMNS[1..] {
        cols.push(take(from)?);
    }
    cols.push(meta_col(&|m| m.language.as_deref()));
    cols.push(meta_col(&|m| Some(m.source.as_str())));
    cols.push(meta_col(&|m| m.source_record_id.as_deref()));
    if schema.field_with_name("embedding").is_ok() {
        cols.push(take("vector")?);
    }
    let rows = RecordBatch::try_new(schema.clone(), cols).map_err(arrow)?;
    Ok((rows, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ChunkRow;
    use arrow_array::{FixedSizeListArray, Float32Array};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    fn chunk(page: usize, position: u32, dim: usize) -> ChunkRow {
        let url = format!("http://127.0.0.1/p/{page}");
        ChunkRow {
            id: format!("{page}-{position}"),
            url: url.clone(),
            canonical_url: url,
            title: format!("Page {page}"),
            heading_path: vec!["Top".into(), format!("Part {position}")],
            position,
            chunks_in_page: 3,
            fetched_at_ms: 1_700_000_000_000,
            page_fingerprint: page as u64,
            chunk_hash: format!("{page:032x}{position}"),
            chunk_simhash: page as u64 * 7 + position as u64,
            words: 10 + position,
            tokens: 14 + position,
            text: format!("chunk {position} of page {page}"),
            vector: Some(
                (0..dim)
                    .map(|d| (page * 100 + d) as f32 / 7.0 + position as f32)
                    .collect(),
            ),
        }
    }

    fn read(path: &Path) -> (Vec<RecordBatch>, usize) {
        let b =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
        let groups = b.metadata().num_row_groups();
        (b.build().unwrap().map(|r| r.unwrap()).collect(), groups)
    }

    #[tokio::test]
    async fn chunks_are_written_with_their_vectors_in_row_groups_and_only_kept_pages() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("index").display().to_string();
        let store = Store::open(&uri, Some(4)).await.unwrap();
        let rows: Vec<ChunkRow> = (0..10)
            .flat_map(|p| (0..3).map(move |i| chunk(p, i, 4)))
            .collect();
        store.add(&rows, &[]).await.unwrap();

        // Every chunk, row groups of 7: five groups for 30 rows, the metadata null.
        let all = dir.path().join("all.parquet");
        let r = export_chunks(&store, &all, None, 7).await.unwrap();
        assert_eq!(
            (r.chunks, r.pages, r.chunks_skipped, r.dim),
            (30, 10, 0, Some(4))
        );
        let (batches, groups) = read(&all);
        assert_eq!(groups, 5);
        assert_eq!(r.row_groups, 5);
        let mut got = HashMap::new();
        for b in &batches {
            let ids = col::<StringArray>(b, "id").unwrap();
            let emb = col::<FixedSizeListArray>(b, "embedding").unwrap();
            assert_eq!(emb.value_length(), 4);
            assert_eq!(
                col::<StringArray>(b, "language").unwrap().null_count(),
                b.num_rows()
            );
            for i in 0..b.num_rows() {
                let v = emb.value(i);
                let v = v.as_any().downcast_ref::<Float32Array>().unwrap();
                got.insert(ids.value(i).to_string(), v.values().to_vec());
            }
        }
        for row in &rows {
            assert_eq!(got.get(&row.id), row.vector.as_ref(), "{}", row.id);
        }

        // Only the pages kept, with their metadata; nothing left as a partial file.
        let mut kept = HashMap::new();
        for p in [2usize, 5] {
            kept.insert(
                format!("http://127.0.0.1/p/{p}"),
                PageMeta {
                    page_id: format!("page{p}"),
                    language: Some("deu".into()),
                    source: "a.warc.gz".into(),
                    source_record_id: Some(format!("<urn:uuid:{p}>")),
                },
            );
        }
        let some = dir.path().join("some.parquet");
        let r = export_chunks(&store, &some, Some(&kept), ROW_GROUP)
            .await
            .unwrap();
        assert_eq!((r.chunks, r.pages, r.chunks_skipped), (6, 2, 24));
        let (batches, _) = read(&some);
        let names: Vec<String> = batches[0]
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "id",
                "page_id",
                "url",
                "canonical_url",
                "title",
                "heading_path",
                "position",
                "chunks_in_page",
                "token_count",
                "words",
                "fetched_at",
                "text",
                "language",
                "source",
                "source_record_id",
                "embedding"
            ]
        );
        for b in &batches {
            let url = col::<StringArray>(b, "url").unwrap();
            let page = col::<StringArray>(b, "page_id").unwrap();
            let rec = col::<StringArray>(b, "source_record_id").unwrap();
            for i in 0..b.num_rows() {
                let m = &kept[url.value(i)];
                assert_eq!(page.value(i), m.page_id);
                assert_eq!(Some(rec.value(i)), m.source_record_id.as_deref());
            }
        }
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".partial")
        }));
    }
}
