//! Where exported rows go: JSON Lines (everything), Parquet (everything, plus a preview and
//! a token count, written a row group at a time) and CSV (the metadata and the preview, a
//! table to open in a spreadsheet or pandas). Each is written beside its path and renamed
//! into place when complete, so an export that fails leaves no half file behind.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::export::{Format, Row};

/// Characters of a page's text in its preview.
pub const PREVIEW_CHARS: usize = 300;

/// The start of `text`, its whitespace runs made single spaces, cut at a character boundary.
pub fn preview(text: &str) -> String {
    let mut out = String::new();
    let mut n = 0;
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
            n += 1;
        }
        for c in word.chars() {
            if n >= PREVIEW_CHARS {
                return out;
            }
            out.push(c);
            n += 1;
        }
    }
    out
}

pub(crate) trait Sink {
    fn write(&mut self, row: Row) -> std::io::Result<()>;
    fn finish(self: Box<Self>) -> std::io::Result<()>;
}

/// The path a sink writes to until it is finished.
fn partial(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".partial");
    PathBuf::from(p)
}

pub(crate) fn open(format: Format, path: &Path) -> std::io::Result<Box<dyn Sink>> {
    let tmp = partial(path);
    let file = std::fs::File::create(&tmp)?;
    let done = Done {
        tmp,
        path: path.to_path_buf(),
    };
    Ok(match format {
        Format::Jsonl => Box::new(JsonlSink(std::io::BufWriter::new(file), done)),
        Format::Parquet => Box::new(ParquetSink::new(file, done)?),
        Format::Csv => Box::new(CsvSink::new(file, done)?),
    })
}

/// Moves a finished file into place.
struct Done {
    tmp: PathBuf,
    path: PathBuf,
}

impl Done {
    fn commit(self) -> std::io::Result<()> {
        std::fs::rename(&self.tmp, &self.path)
    }
}

struct JsonlSink(std::io::BufWriter<std::fs::File>, Done);

impl Sink for JsonlSink {
    fn write(&mut self, row: Row) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.0, &row)?;
        self.0.write_all(b"\n")
    }
    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.0.flush()?;
        self.0.get_ref().sync_all()?;
        self.1.commit()
    }
}

/// Rows per batch and per Parquet row group: what the writer holds in memory.
const BATCH: usize = 2048;

fn schema() -> Arc<Schema> {
    let s = |n: &str, null| Field::new(n, DataType::Utf8, null);
    Arc::new(Schema::new(vec![
        s("id", false),
        s("url", false),
        s("title", true),
        s("text", false),
        s("markdown", true),
        s("preview", false),
        Field::new("token_count", DataType::UInt64, false),
        s("language", true),
        Field::new("language_score", DataType::Float64, true),
        s("date", true),
        s("source", false),
        s("source_record_id", true),
        s("simhash", true),
        s("quality", false),
        Field::new("paragraphs_removed", DataType::UInt32, false),
    ]))
}

struct ParquetSink {
    writer: ArrowWriter<std::fs::File>,
    schema: Arc<Schema>,
    rows: Vec<Row>,
    done: Done,
}

impl ParquetSink {
    fn new(file: std::fs::File, done: Done) -> std::io::Result<Self> {
        let schema = schema();
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(BATCH))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(std::io::Error::other)?;
        Ok(ParquetSink {
            writer,
            schema,
            rows: Vec::with_capacity(BATCH),
            done,
        })
    }

    fn flush_rows(&mut self) -> std::io::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        let col = |f: &dyn Fn(&Row) -> Option<String>| -> ArrayRef {
            Arc::new(rows.iter().map(f).collect::<StringArray>())
        };
        let columns: Vec<ArrayRef> = vec![
            col(&|r| Some(r.id.clone())),
            col(&|r| Some(r.url.clone())),
            col(&|r| r.title.clone()),
            col(&|r| Some(r.text.clone())),
            col(&|r| r.markdown.clone()),
            col(&|r| Some(preview(&r.text))),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| r.token_count),
            )),
            col(&|r| r.language.clone()),
            Arc::new(
                rows.iter()
                    .map(|r| r.language_score)
                    .collect::<Float64Array>(),
            ),
            col(&|r| r.date.clone()),
            col(&|r| Some(r.source.clone())),
            col(&|r| r.source_record_id.clone()),
            col(&|r| r.simhash.clone()),
            col(&|r| Some(serde_json::to_string(&r.quality).unwrap_or_default())),
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|r| r.paragraphs_removed),
            )),
        ];
        let batch =
            RecordBatch::try_new(self.schema.clone(), columns).map_err(std::io::Error::other)?;
        self.writer.write(&batch).map_err(std::io::Error::other)
    }
}

impl Sink for ParquetSink {
    fn write(&mut self, row: Row) -> std::io::Result<()> {
        self.rows.push(row);
        if self.rows.len() >= BATCH {
            self.flush_rows()?;
        }
        Ok(())
    }
    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.flush_rows()?;
        let this = *self;
        let file = this.writer.into_inner().map_err(std::io::Error::other)?;
        file.sync_all()?;
        this.done.commit()
    }
}

/// The CSV columns: a page's metadata and its preview (the full text is in JSONL/Parquet).
const CSV_HEADER: [&str; 13] = [
    "id",
    "url",
    "title",
    "language",
    "language_score",
    "date",
    "source",
    "source_record_id",
    "simhash",
    "token_count",
    "quality",
    "paragraphs_removed",
    "preview",
];

struct CsvSink(csv::Writer<std::fs::File>, Done);

impl CsvSink {
    fn new(file: std::fs::File, done: Done) -> std::io::Result<Self> {
        let mut w = csv::Writer::from_writer(file);
        w.write_record(CSV_HEADER).map_err(std::io::Error::other)?;
        Ok(CsvSink(w, done))
    }
}

impl Sink for CsvSink {
    fn write(&mut self, row: Row) -> std::io::Result<()> {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let record = [
            row.id.clone(),
            row.url.clone(),
            opt(&row.title),
            opt(&row.language),
            row.language_score
                .map(|s| s.to_string())
                .unwrap_or_default(),
            opt(&row.date),
            row.source.clone(),
            opt(&row.source_record_id),
            opt(&row.simhash),
            row.token_count.to_string(),
            serde_json::to_string(&row.quality).unwrap_or_default(),
            row.paragraphs_removed.to_string(),
            preview(&row.text),
        ];
        self.0.write_record(&record).map_err(std::io::Error::other)
    }
    fn finish(self: Box<Self>) -> std::io::Result<()> {
        let CsvSink(w, done) = *self;
        let file = w
            .into_inner()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        file.sync_all()?;
        done.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_is_the_start_of_the_text_on_one_line() {
        assert_eq!(preview("  Hello,\n\n  world\tagain "), "Hello, world again");
        let long = "ü".repeat(1000);
        let p = preview(&long);
        assert_eq!(p.chars().count(), PREVIEW_CHARS);
        assert!(long.starts_with(&p));
        let words = "word ".repeat(200);
        assert_eq!(preview(&words).chars().count(), PREVIEW_CHARS);
        assert_eq!(preview(""), "");
    }
}
