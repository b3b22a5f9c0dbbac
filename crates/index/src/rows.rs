//! The arrow form of the index's rows: the `chunks` and `chunk_aliases` schemas, rows to
//! record batches and back.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::types::Float32Type;
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, RecordBatch, StringArray, TimestampMillisecondArray,
    UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::IndexError;

/// Runs a LanceDB query and gathers its record batches.
pub(crate) async fn collect(
    query: &impl lancedb::query::ExecutableQuery,
) -> lancedb::Result<Vec<RecordBatch>> {
    futures_util::TryStreamExt::try_collect(query.execute().await?).await
}

/// One stored chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRow {
    /// Stable: a hash of the canonical URL and the chunk number.
    pub id: String,
    pub url: String,
    pub canonical_url: String,
    pub title: String,
    pub heading_path: Vec<String>,
    /// The chunk's number in its page, from 0.
    pub position: u32,
    pub chunks_in_page: u32,
    pub fetched_at_ms: i64,
    /// The page's SimHash.
    pub page_fingerprint: u64,
    /// Hash of the chunk's normalized text (128 bits, hex) and its SimHash: the chunk gate
    /// is rebuilt from these when the index is opened again.
    pub chunk_hash: String,
    pub chunk_simhash: u64,
    pub words: u32,
    pub tokens: u32,
    pub text: String,
    pub vector: Option<Vec<f32>>,
}

/// A chunk not stored again: where it was seen and which stored chunk holds its text.
#[derive(Debug, Clone, PartialEq)]
pub struct AliasRow {
    pub id: String,
    pub url: String,
    pub canonical_url: String,
    pub title: String,
    pub heading_path: Vec<String>,
    pub position: u32,
    pub alias_of: String,
    /// SimHash distance to `alias_of` (0: the same normalized text).
    pub distance: u32,
    pub text: String,
    pub fetched_at_ms: i64,
    pub page_fingerprint: u64,
}

pub(crate) fn arrow(e: arrow_schema::ArrowError) -> IndexError {
    IndexError::Store(e.to_string())
}

fn list_of_strings() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

fn utc_millis() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

pub fn chunk_schema(dim: Option<usize>) -> SchemaRef {
    let mut fields = vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("url", DataType::Utf8, false),
        Field::new("canonical_url", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, false),
        Field::new("heading_path", list_of_strings(), false),
        Field::new("position", DataType::UInt32, false),
        Field::new("chunks_in_page", DataType::UInt32, false),
        Field::new("fetched_at", utc_millis(), false),
        Field::new("page_fingerprint", DataType::UInt64, false),
        Field::new("chunk_hash", DataType::Utf8, false),
        Field::new("chunk_simhash", DataType::UInt64, false),
        Field::new("words", DataType::UInt32, false),
        Field::new("tokens", DataType::UInt32, false),
        Field::new("text", DataType::Utf8, false),
    ];
    if let Some(dim) = dim {
        fields.push(Field::new(
            "vector",
            DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::Float32, true)),
                dim as i32,
            ),
            false,
        ));
    }
    Arc::new(Schema::new(fields))
}

pub fn alias_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("url", DataType::Utf8, false),
        Field::new("canonical_url", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, false),
        Field::new("heading_path", list_of_strings(), false),
        Field::new("position", DataType::UInt32, false),
        Field::new("alias_of", DataType::Utf8, false),
        Field::new("distance", DataType::UInt32, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("fetched_at", utc_millis(), false),
        Field::new("page_fingerprint", DataType::UInt64, false),
    ]))
}

fn strings<'a>(v: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

fn paths<'a>(v: impl Iterator<Item = &'a [String]>) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for p in v {
        for h in p {
            b.values().append_value(h);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

pub(crate) fn chunk_batch(
    rows: &[ChunkRow],
    schema: &SchemaRef,
    dim: Option<usize>,
) -> Result<RecordBatch, IndexError> {
    let mut cols: Vec<ArrayRef> = vec![
        strings(rows.iter().map(|r| r.id.as_str())),
        strings(rows.iter().map(|r| r.url.as_str())),
        strings(rows.iter().map(|r| r.canonical_url.as_str())),
        strings(rows.iter().map(|r| r.title.as_str())),
        paths(rows.iter().map(|r| r.heading_path.as_slice())),
        Arc::new(UInt32Array::from_iter_values(
            rows.iter().map(|r| r.position),
        )),
        Arc::new(UInt32Array::from_iter_values(
            rows.iter().map(|r| r.chunks_in_page),
        )),
        Arc::new(
            TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.fetched_at_ms))
                .with_timezone("UTC"),
        ),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r.page_fingerprint),
        )),
        strings(rows.iter().map(|r| r.chunk_hash.as_str())),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r.chunk_simhash),
        )),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.words))),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.tokens))),
        strings(rows.iter().map(|r| r.text.as_str())),
    ];
    if let Some(dim) = dim {
        let mut vectors = Vec::with_capacity(rows.len());
        for r in rows {
            match &r.vector {
                Some(v) if v.len() == dim => {
                    vectors.push(Some(v.iter().map(|x| Some(*x)).collect::<Vec<_>>()))
                }
                _ => {
                    return Err(IndexError::Store(format!(
                        "chunk {} has no {dim}-dimensional vector",
                        r.id
                    )));
                }
            }
        }
        cols.push(Arc::new(FixedSizeListArray::from_iter_primitive::<
            Float32Type,
            _,
            _,
        >(vectors, dim as i32)));
    }
    RecordBatch::try_new(schema.clone(), cols).map_err(arrow)
}

pub(crate) fn alias_batch(rows: &[AliasRow]) -> Result<RecordBatch, IndexError> {
    RecordBatch::try_new(
        alias_schema(),
        vec![
            strings(rows.iter().map(|r| r.id.as_str())),
            strings(rows.iter().map(|r| r.url.as_str())),
            strings(rows.iter().map(|r| r.canonical_url.as_str())),
            strings(rows.iter().map(|r| r.title.as_str())),
            paths(rows.iter().map(|r| r.heading_path.as_slice())),
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|r| r.position),
            )),
            strings(rows.iter().map(|r| r.alias_of.as_str())),
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|r| r.distance),
            )),
            strings(rows.iter().map(|r| r.text.as_str())),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.fetched_at_ms))
                    .with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| r.page_fingerprint),
            )),
        ],
    )
    .map_err(arrow)
}

pub(crate) fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<&'a T, IndexError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| IndexError::Store(format!("column {name} is missing or of another type")))
}

pub(crate) fn heading_paths(b: &RecordBatch) -> Result<Vec<Vec<String>>, IndexError> {
    let list = col::<arrow_array::ListArray>(b, "heading_path")?;
    let mut out = Vec::with_capacity(b.num_rows());
    for i in 0..b.num_rows() {
        let v = list.value(i);
        let s = v
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| IndexError::Store("heading_path is not a list of strings".into()))?;
        out.push((0..s.len()).map(|j| s.value(j).to_string()).collect());
    }
    Ok(out)
}

pub(crate) fn alias_rows(b: &RecordBatch) -> Result<Vec<AliasRow>, IndexError> {
    let of = col::<StringArray>(b, "alias_of")?;
    let dist = col::<UInt32Array>(b, "distance")?;
    let mut rows = chunk_alias_rows(b)?;
    for (i, r) in rows.iter_mut().enumerate() {
        r.alias_of = of.value(i).to_string();
        r.distance = dist.value(i);
    }
    Ok(rows)
}

/// The rows of `b` (chunks or aliases) as alias rows, pointing nowhere yet.
pub(crate) fn chunk_alias_rows(b: &RecordBatch) -> Result<Vec<AliasRow>, IndexError> {
    let id = col::<StringArray>(b, "id")?;
    let url = col::<StringArray>(b, "url")?;
    let canon = col::<StringArray>(b, "canonical_url")?;
    let title = col::<StringArray>(b, "title")?;
    let pos = col::<UInt32Array>(b, "position")?;
    let text = col::<StringArray>(b, "text")?;
    let at = col::<TimestampMillisecondArray>(b, "fetched_at")?;
    let fp = col::<UInt64Array>(b, "page_fingerprint")?;
    let paths = heading_paths(b)?;
    Ok((0..b.num_rows())
        .zip(paths)
        .map(|(i, heading_path)| AliasRow {
            id: id.value(i).to_string(),
            url: url.value(i).to_string(),
            canonical_url: canon.value(i).to_string(),
            title: title.value(i).to_string(),
            heading_path,
            position: pos.value(i),
            alias_of: String::new(),
            distance: 0,
            text: text.value(i).to_string(),
            fetched_at_ms: at.value(i),
            page_fingerprint: fp.value(i),
        })
        .collect())
}
