//! `trawl export`: the pages of a crawl or an ingest (`pages.jsonl`) as a training corpus,
//! after language and quality filters and MinHash deduplication, in JSON Lines or Parquet,
//! with a dataset report.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use trawl_core::PageRecord;
use trawl_dedup::minhash::{LshIndex, MinHasher};

use crate::lang;
use crate::quality::Filters;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Parquet,
    /// A table to look at: the metadata and a preview of the text, no full text.
    Csv,
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
    /// Remove from each kept document the lines an earlier kept document had
    /// (`paragraphs`); a document left with none is dropped.
    pub paragraph_dedup: bool,
    /// Keep pages whose site reserves AI training (Content Signals `ai-train=no`, a TDM
    /// reservation, `noai`): the user's own decision, which the report records.
    pub include_reserved: bool,
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
    /// Lines removed from `text` by the paragraph dedup (`markdown` keeps them).
    pub paragraphs_removed: u32,
    /// Whitespace-separated tokens of `text` (Parquet and CSV have it as a column).
    #[serde(skip)]
    pub token_count: u64,
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
    /// The chunk dataset written with the pages (`trawl export --chunks`): its file, chunks,
    /// pages, chunks of dropped pages left out, embedding length and row groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<serde_json::Value>,
    /// What the paragraph dedup removed (with `paragraph_dedup`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paragraphs: Option<crate::paragraphs::ParagraphReport>,
    /// Documents kept although their site reserves AI training, by the signal's source
    /// (`include_reserved`: the user took that decision); dropped ones are under
    /// `dropped`, `usage:ai-train-reserved:<source>`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub reserved_included: BTreeMap<String, u64>,
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
    if page.robots.noindex.is_some() {
        return Err("robots:noindex".into());
    }
    let train = &page.usage.ai_train;
    if train.is_reserved() {
        let source = train.source.map_or("unknown", |s| s.as_str());
        if !opts.include_reserved {
            return Err(format!("usage:ai-train-reserved:{source}"));
        }
        *report
            .reserved_included
            .entry(source.to_string())
            .or_default() += 1;
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
        paragraphs_removed: 0,
        token_count: 0,
    })
}

fn row_id_from(record_id: Option<&str>, url: &str) -> String {
    format!(
        "{:032x}",
        xxhash_rust::xxh3::xxh3_128(record_id.unwrap_or(url).as_bytes())
    )
}

/// Reads `pages.jsonl` (a file, or a directory holding one), writes the corpus to `out` and
/// the report beside it (`<out>.report.json` and `.md`).
pub fn export(opts: &ExportOptions) -> std::io::Result<DatasetReport> {
    export_with(opts, &mut |_| {})
}

/// `export`, showing `on_row` each row written (the chunk export takes the kept pages'
/// metadata from them).
pub fn export_with(
    opts: &ExportOptions,
    on_row: &mut dyn FnMut(&Row),
) -> std::io::Result<DatasetReport> {
    let started = Instant::now();
    let (input, reader) = open_input(&opts.from)?;
    if let Some(dir) = opts.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut sink = crate::sink::open(opts.format, &opts.out)?;
    let mut report = DatasetReport {
        rules: opts.filters.rules,
        rules_source: format!(
            "FineWeb 2 configs @ {}",
            crate::language_rules::source_commit()
        ),
        ..DatasetReport::default()
    };
    let mut dedup = Dedup::new(opts);
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
        let mut row = match judge(page, opts, &mut report) {
            Ok(r) => r,
            Err(reason) => {
                drop(&mut report, &reason);
                continue;
            }
        };
        if let Err(reason) = dedup.apply(&mut row) {
            drop(&mut report, reason);
            continue;
        }
        row.token_count = tokens(&row.text);
        report.documents_out += 1;
        report.tokens_out += row.token_count;
        *report
            .languages_out
            .entry(row.language.clone().unwrap_or_else(|| "unknown".into()))
            .or_default() += 1;
        on_row(&row);
        sink.write(row)?;
    }
    sink.finish()?;
    report.paragraphs = dedup.paragraphs.map(|p| p.report());
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.documents_per_s = report.documents_in as f64 / report.elapsed_s.max(1e-9);
    write_report(&opts.out, &report)?;
    Ok(report)
}

/// `pages.jsonl` in `from` when it is a directory, else `from` itself. The error names
/// the file: a bare "not found" does not say which.
fn open_input(
    from: &std::path::Path,
) -> std::io::Result<(PathBuf, std::io::BufReader<std::fs::File>)> {
    let input = if from.is_dir() {
        from.join("pages.jsonl")
    } else {
        from.to_path_buf()
    };
    let reader = std::io::BufReader::new(
        std::fs::File::open(&input)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", input.display())))?,
    );
    Ok((input, reader))
}

/// The corpus dedup: whole documents by MinHash, then the lines earlier documents had.
struct Dedup {
    hasher: MinHasher,
    lsh: Option<LshIndex>,
    paragraphs: Option<crate::paragraphs::ParagraphDedup>,
}

impl Dedup {
    fn new(opts: &ExportOptions) -> Self {
        Dedup {
            hasher: MinHasher::new(5),
            lsh: opts.minhash_threshold.map(LshIndex::new),
            paragraphs: opts
                .paragraph_dedup
                .then(crate::paragraphs::ParagraphDedup::default),
        }
    }

    /// Strips the row of the lines seen before, or says why it is dropped.
    fn apply(&mut self, row: &mut Row) -> Result<(), &'static str> {
        if let Some(index) = self.lsh.as_mut()
            && index
                .match_and_insert(&self.hasher.sketch(&row.text), &row.id)
                .is_some()
        {
            return Err("dedup:minhash");
        }
        // After the document dedup: a copy MinHash drops leaves its lines to no one.
        if let Some(p) = self.paragraphs.as_mut() {
            let d = p.apply(&row.text);
            if d.lines > 0 && d.removed == d.lines {
                return Err("dedup:paragraphs");
            }
            row.text = d.text;
            row.paragraphs_removed = d.removed as u32;
        }
        Ok(())
    }
}

/// The report beside the corpus file `out`: `<out>.report.json` and `<out>.report.md`.
pub fn write_report(out: &std::path::Path, report: &DatasetReport) -> std::io::Result<()> {
    let stem = out.display().to_string();
    std::fs::write(
        format!("{stem}.report.json"),
        serde_json::to_vec_pretty(report)?,
    )?;
    std::fs::write(format!("{stem}.report.md"), markdown_report(report))
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
    let rules = serde_json::to_value(r.rules)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    s.push_str(&format!("\nRules: {rules} ({})\n", r.rules_source));
    if let Some(p) = &r.paragraphs {
        s.push_str(&format!(
            "\nParagraph dedup: {} of {} lines removed; {} documents changed, {} left empty (dropped)\n",
            p.lines_removed, p.lines_in, p.documents_changed, p.documents_emptied
        ));
    }
    if let Some(c) = &r.chunks {
        s.push_str(&format!(
            "\nChunks: {} of {} pages in {} ({} chunks of dropped pages left out, embeddings: {})\n",
            c["chunks"], c["pages"], c["file"], c["chunks_skipped"], c["dim"]
        ));
    }
    s.push_str(&format!(
        "\n{:.1} s, {:.0} documents/s\n",
        r.elapsed_s, r.documents_per_s
    ));
    s
}
