//! `trawl export` as a value: a training corpus from `pages.jsonl`, and the chunks of its
//! kept pages (or of a whole index) as a Parquet dataset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use trawl_corpus::export::{DatasetReport, ExportOptions, Format, Row};
use trawl_index::dataset::{ChunkExport, PageMeta};

/// One run of `trawl export`, as a value.
#[derive(Debug, Clone)]
pub struct ExportPlan {
    /// The corpus export; its `from` may also be an index (then only its chunks go out).
    pub options: ExportOptions,
    /// Also write the chunks of the kept pages to this Parquet file.
    pub chunks: Option<PathBuf>,
    /// The index the chunks come from (default: `options.from`/index).
    pub index: Option<PathBuf>,
}

/// What an export wrote.
#[derive(Debug)]
pub enum Exported {
    /// FROM was an index: all its chunks went to OUT.
    Index(ChunkExport),
    /// FROM was a crawl directory: its corpus report (boxed: it dwarfs the other variant),
    /// and the chunk export when one was asked for.
    Corpus {
        report: Box<DatasetReport>,
        chunks: Option<ChunkExport>,
    },
}

impl Exported {
    /// What `trawl export` prints: what went where (`out`: the corpus or chunk file; `chunks`:
    /// the chunk file beside a corpus).
    pub fn summary(&self, out: &Path, chunks: Option<&Path>) -> String {
        match self {
            Exported::Index(c) => format!(
                "exported {} chunks of {} pages to {}",
                c.chunks,
                c.pages,
                out.display()
            ),
            Exported::Corpus {
                report: r,
                chunks: c,
            } => {
                let mut s = format!(
                    "exported {} of {} documents ({} of {} tokens) to {} in {:.1}s; report: {}.report.md",
                    r.documents_out,
                    r.documents_in,
                    r.tokens_out,
                    r.tokens_in,
                    out.display(),
                    r.elapsed_s,
                    out.display()
                );
                let reserved: u64 = r
                    .dropped
                    .iter()
                    .filter(|(k, _)| k.starts_with("usage:ai-train-reserved"))
                    .map(|(_, n)| n)
                    .sum();
                let noindex = r.dropped.get("robots:noindex").copied().unwrap_or(0);
                if reserved + noindex > 0 {
                    s += &format!(
                        "\nleft out: {reserved} documents whose site reserves AI training (--include-reserved keeps them, on your responsibility), {noindex} noindex"
                    );
                }
                let included: u64 = r.reserved_included.values().sum();
                if included > 0 {
                    s += &format!(
                        "\nkept {included} documents whose site reserves AI training (--include-reserved): their use is your responsibility"
                    );
                }
                if let (Some(c), Some(path)) = (c, chunks) {
                    s += &format!(
                        "\nexported {} chunks of {} pages to {} ({} chunks of dropped pages left out)",
                        c.chunks,
                        c.pages,
                        path.display(),
                        c.chunks_skipped
                    );
                }
                s
            }
        }
    }
}

/// Exports `plan.options.from` to `plan.options.out`; with `plan.chunks`, the kept pages'
/// chunks too, and the report is written again with them.
pub async fn export(plan: ExportPlan) -> anyhow::Result<Exported> {
    let ExportPlan {
        options,
        chunks,
        index,
    } = plan;
    // An index given as FROM: its chunks, every one (no pages to filter), to OUT.
    if is_index(&options.from) {
        anyhow::ensure!(
            options.format == Format::Parquet && chunks.is_none(),
            "{} is an index: its chunks are written to --out with --format parquet (--chunks is for a crawl directory)",
            options.from.display()
        );
        let c = export_chunks(&options.from, &options.out, None).await?;
        return Ok(Exported::Index(c));
    }
    let from = options.from.clone();
    let out = options.out.clone();
    let collect = chunks.is_some();
    let (mut report, kept) = tokio::task::spawn_blocking(move || {
        let mut kept = HashMap::new();
        let r = trawl_corpus::export::export_with(&options, &mut |row| {
            if collect {
                kept.insert(row.url.clone(), page_meta(row));
            }
        });
        r.map(|r| (r, kept))
    })
    .await?
    .context("export")?;
    let Some(chunks) = chunks else {
        return Ok(Exported::Corpus {
            report: Box::new(report),
            chunks: None,
        });
    };
    let index = index.unwrap_or_else(|| from.join("index"));
    let c = export_chunks(&index, &chunks, Some(&kept)).await?;
    report.chunks = Some(serde_json::to_value(&c)?);
    trawl_corpus::export::write_report(&out, &report)?;
    Ok(Exported::Corpus {
        report: Box::new(report),
        chunks: Some(c),
    })
}

/// Whether `dir` is a LanceDB index (its `chunks` table) rather than a crawl directory.
fn is_index(dir: &Path) -> bool {
    dir.join(format!("{}.lance", trawl_index::store::CHUNKS))
        .is_dir()
}

/// What the chunk dataset takes from a kept page's row.
fn page_meta(row: &Row) -> PageMeta {
    PageMeta {
        page_id: row.id.clone(),
        language: row.language.clone(),
        source: row.source.clone(),
        source_record_id: row.source_record_id.clone(),
    }
}

/// Writes the chunks of the index at `index` to `out`: only those of `pages` when given.
async fn export_chunks(
    index: &Path,
    out: &Path,
    pages: Option<&HashMap<String, PageMeta>>,
) -> anyhow::Result<ChunkExport> {
    let store = trawl_index::Store::open_existing(&index.display().to_string()).await?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    trawl_index::dataset::export_chunks(&store, out, pages, trawl_index::dataset::ROW_GROUP)
        .await
        .with_context(|| format!("exporting the chunks of {}", index.display()))
}
