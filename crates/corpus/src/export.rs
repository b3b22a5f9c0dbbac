//! `trawl export`: the pages of a crawl or an ingest (`pages.jsonl`) as a training corpus,
//! after language and quality filters and MinHash deduplication, in JSON Lines or Parquet,
//! with a dataset report.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::Serialize;
use trawl_core::PageRecord;
use trawl_dedup::minhash::{LshIndex, MinHasher};

use crate::lang;
use crate::quality::Filters;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Parquet,
}

#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub from: PathBuf,
    pub out: PathBuf,
    pub format: Format,
    /// Keep only these languages (ISO 639-3); empty keeps all.
    pub languages: Vec<String>,
    pub min_language_score: f64,
    pub filters: Filters,
    /// MinHash-LSH Jaccard threshold for corpus dedup; `None` turns it off.
    pub minhash_threshold: Option<f64>,
    /// Keep pages the crawl's SimHash gate marked as copies.
    pub keep_duplicates: bool,
}

/// One exported document.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: String,
    pub url: String,
    pub title: Option<String>,
    pub text: String,
    pub markdown: Option<String>,
    pub language: Option<String>,
    pub language_score: Option<f64>,
    pub date: Option<String>,
    /// `crawl`, or the archive file the page was read from.
    pub source: String,
    pub source_record_id: Option<String>,
    pub simhash: Option<String>,
    /// Quality signals by name (the filters' measurements).
    pub quality: BTreeMap<String, f64>,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct DatasetReport {
    pub documents_in: u64,
    pub tokens_in: u64,
    pub documents_out: u64,
    pub tokens_out: u64,
    /// Documents dropped, by `filter:reason`.
    pub dropped: BTreeMap<String, u64>,
    /// Documents kept, by language.
    pub languages_out: BTreeMap<String, u64>,
    /// Documents read, by language.
    pub languages_in: BTreeMap<String, u64>,
    /// `per_language` (FineWeb 2's settings for each language, English's own for English)
    /// or `english` (the English settings for every document).
    pub rules: crate::quality::LanguageRules,
    /// Where the per-language settings come from (FineWeb 2's commit).
    pub rules_source: String,
    /// Filters that were on but did not run, by filter and language: documents.
    pub not_applied: BTreeMap<String, BTreeMap<String, u64>>,
    pub elapsed_s: f64,
    pub documents_per_s: f64,
}

/// Whitespace-separated tokens: the report's unit (a model's tokenizer would give more).
fn tokens(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn drop(report: &mut DatasetReport, reason: &str) {
    *report.dropped.entry(reason.to_string()).or_default() += 1;
}

/// Decides on one page: the row to write, or the reason it is dropped.
fn judge(
    page: PageRecord,
    opts: &ExportOptions,
    report: &mut DatasetReport,
) -> Result<Row, String> {
    if page.error.as_ref().is_some_and(|e| e.kind != "truncated") {
        return Err("page:error".into());
    }
    if page.text.trim().is_empty() {
        return Err("page:empty".into());
    }
    if page.duplicate_of.is_some() && !opts.keep_duplicates {
        return Err("dedup:simhash".into());
    }
    let label = page.source.as_ref().and_then(|s| s.language.as_deref());
    let lang = lang::language(&page.text, label);
    let code = lang.as_ref().map_or("unknown", |(c, _)| c.as_str());
    *report.languages_in.entry(code.to_string()).or_default() += 1;
    if !opts.languages.is_empty() && !opts.languages.iter().any(|l| l == code) {
        return Err("language:not_selected".into());
    }
    if lang
        .as_ref()
        .is_some_and(|(_, s)| *s < opts.min_language_score)
    {
        return Err("language:low_score".into());
    }
    let script = lang::script(&page.text);
    let verdict = opts
        .filters
        .check_in(&page.text, lang.as_ref().map(|(c, _)| c.as_str()), script);
    for f in &verdict.not_applied {
        *report
            .not_applied
            .entry((*f).to_string())
            .or_default()
            .entry(code.to_string())
            .or_default() += 1;
    }
    if let Some(reason) = verdict.dropped {
        return Err(reason);
    }
    let text = verdict.c4_text.unwrap_or(page.text);
    let source = page.source.as_ref();
    Ok(Row {
        id: row_id_from(source.and_then(|s| s.record_id.as_deref()), &page.final_url),
        url: page.final_url.clone(),
        title: page.title,
        text,
        markdown: page.markdown,
        language: lang.as_ref().map(|(c, _)| c.clone()),
        language_score: lang.map(|(_, s)| s),
        date: source
            .and_then(|s| s.date.clone())
            .or_else(|| (!page.fetched_at.is_empty()).then(|| page.fetched_at.clone())),
        source: source.map_or_else(|| "crawl".to_string(), |s| s.file.clone()),
        source_record_id: source.and_then(|s| s.record_id.clone()),
        simhash: page.simhash,
        quality: verdict
            .signals
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    })
}

fn row_id_from(record_id: Option<&str>, url: &str) -> String {
    format!(
        "{:032x}",
        xxhash_rust::xxh3::xxh3_128(record_id.unwrap_or(url).as_bytes())
    )
}

trait Sink {
    fn write(&mut self, row: Row) -> std::io::Result<()>;
    fn finish(self: Box<Self>) -> std::io::Result<()>;
}

struct JsonlSink(std::io::BufWriter<std::fs::File>);

impl Sink for JsonlSink {
    fn write(&mut self, row: Row) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.0, &row)?;
        self.0.write_all(b"\n")
    }
    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.0.flush()
    }
}

struct ParquetSink {
    writer: ArrowWriter<std::fs::File>,
    schema: Arc<Schema>,
    rows: Vec<Row>,
}

const BATCH: usize = 2048;

fn schema() -> Arc<Schema> {
    let s = |n: &str, null| Field::new(n, DataType::Utf8, null);
    Arc::new(Schema::new(vec![
        s("id", false),
        s("url", false),
        s("title", true),
        s("text", false),
        s("markdown", true),
        s("language", true),
        Field::new("language_score", DataType::Float64, true),
        s("date", true),
        s("source", false),
        s("source_record_id", true),
        s("simhash", true),
        s("quality", false),
    ]))
}

impl ParquetSink {
    fn new(path: &Path) -> std::io::Result<Self> {
        let schema = schema();
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let writer =
            ArrowWriter::try_new(std::fs::File::create(path)?, schema.clone(), Some(props))
                .map_err(std::io::Error::other)?;
        Ok(ParquetSink {
            writer,
            schema,
            rows: Vec::with_capacity(BATCH),
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
        self.writer.close().map_err(std::io::Error::other)?;
        Ok(())
    }
}

/// Reads `pages.jsonl` (a file, or a directory holding one), writes the corpus to `out` and
/// the report beside it (`<out>.report.json` and `.md`).
pub fn export(opts: &ExportOptions) -> std::io::Result<DatasetReport> {
    let started = Instant::now();
    let input = if opts.from.is_dir() {
        opts.from.join("pages.jsonl")
    } else {
        opts.from.clone()
    };
    let reader = std::io::BufReader::new(
        std::fs::File::open(&input)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", input.display())))?,
    );
    if let Some(dir) = opts.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut sink: Box<dyn Sink> = match opts.format {
        Format::Jsonl => Box::new(JsonlSink(std::io::BufWriter::new(std::fs::File::create(
            &opts.out,
        )?))),
        Format::Parquet => Box::new(ParquetSink::new(&opts.out)?),
    };
    let mut report = DatasetReport {
        rules: opts.filters.rules,
        rules_source: format!(
            "FineWeb 2 configs @ {}",
            crate::language_rules::source_commit()
        ),
        ..DatasetReport::default()
    };
    let hasher = MinHasher::new(5);
    let mut lsh = opts.minhash_threshold.map(LshIndex::new);
    for (n, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let page: PageRecord = match serde_json::from_str(&line) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("{} line {}: {e}", input.display(), n + 1);
                drop(&mut report, "input:unreadable_line");
                continue;
            }
        };
        // Only pages are documents; sitemaps and feeds are how a crawl found them.
        if page.kind != trawl_core::UrlKind::Page {
            continue;
        }
        report.documents_in += 1;
        report.tokens_in += tokens(&page.text);
        let row = match judge(page, opts, &mut report) {
            Ok(r) => r,
            Err(reason) => {
                drop(&mut report, &reason);
                continue;
            }
        };
        if let Some(index) = lsh.as_mut() {
            let sig = hasher.signature(&row.text);
            if index.insert_or_match(sig, &row.id).is_some() {
                drop(&mut report, "dedup:minhash");
                continue;
            }
        }
        report.documents_out += 1;
        report.tokens_out += tokens(&row.text);
        *report
            .languages_out
            .entry(row.language.clone().unwrap_or_else(|| "unknown".into()))
            .or_default() += 1;
        sink.write(row)?;
    }
    sink.finish()?;
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.documents_per_s = report.documents_in as f64 / report.elapsed_s.max(1e-9);
    let stem = opts.out.display().to_string();
    std::fs::write(
        format!("{stem}.report.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    std::fs::write(format!("{stem}.report.md"), markdown_report(&report))?;
    Ok(report)
}

pub fn markdown_report(r: &DatasetReport) -> String {
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let mut s = String::from("# Dataset report\n\n| | documents | tokens |\n|---|---|---|\n");
    s.push_str(&format!("| in | {} | {} |\n", r.documents_in, r.tokens_in));
    s.push_str(&format!(
        "| out | {} ({:.1}%) | {} ({:.1}%) |\n\n",
        r.documents_out,
        pct(r.documents_out, r.documents_in),
        r.tokens_out,
        pct(r.tokens_out, r.tokens_in)
    ));
    s.push_str("## Dropped\n\n| filter:reason | documents |\n|---|---|\n");
    let mut dropped: Vec<_> = r.dropped.iter().collect();
    dropped.sort_by(|a, b| b.1.cmp(a.1));
    for (k, v) in dropped {
        s.push_str(&format!("| {k} | {v} |\n"));
    }
    s.push_str("\n## Languages (kept / read)\n\n| language | kept | read |\n|---|---|---|\n");
    let mut langs: Vec<_> = r.languages_in.iter().collect();
    langs.sort_by(|a, b| b.1.cmp(a.1));
    for (k, v) in langs {
        s.push_str(&format!(
            "| {k} | {} | {v} |\n",
            r.languages_out.get(k).copied().unwrap_or(0)
        ));
    }
    if !r.not_applied.is_empty() {
        s.push_str(
            "\n## Filters not run (no settings for the language)\n\n| filter | language: documents |\n|---|---|\n",
        );
        for (f, langs) in &r.not_applied {
            let l: Vec<String> = langs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            s.push_str(&format!("| {f} | {} |\n", l.join(", ")));
        }
    }
    s.push_str(&format!("\nRules: {:?} ({})\n", r.rules, r.rules_source));
    s.push_str(&format!(
        "\n{:.1} s, {:.0} documents/s\n",
        r.elapsed_s, r.documents_per_s
    ));
    s
}
