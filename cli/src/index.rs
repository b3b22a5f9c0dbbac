//! The knowledge base from the command line: the index options `trawl crawl` shares,
//! `trawl index` (index an existing `pages.jsonl`) and `trawl search`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use trawl_core::settings::IndexSettings;
use trawl_index::{IndexOptions, IndexStats, Mode};
use trawl_runtime::search::SearchQuery;

/// Where and whether `trawl crawl` indexes.
#[derive(Debug, Clone, Args)]
pub struct CrawlIndexArgs {
    /// Do not build the search index.
    #[arg(long)]
    pub no_index: bool,
    /// Where the index goes (default: OUT/index).
    #[arg(long = "index", value_name = "DIR")]
    pub index_uri: Option<String>,
    #[command(flatten)]
    pub settings: IndexArgs,
}

/// How pages are chunked, embedded and deduplicated (shared by `trawl crawl` and
/// `trawl index`): the index section of the settings, and this process's model.
#[derive(Debug, Clone, Args)]
pub struct IndexArgs {
    /// Embed chunks (`--no-embed`: build the full-text index only, no model needed).
    #[arg(long = "no-embed", action = clap::ArgAction::SetFalse)]
    pub embed: bool,
    /// The embedding model's directory (config.json, tokenizer.json, model.safetensors).
    /// Default: $TRAWL_MODEL_DIR, else the cache `scripts/fetch-model.sh` fills.
    #[arg(long, value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
    /// The embedder's number format: auto (int8 on CPUs with AVX-512 VNNI, else f32; f32
    /// on CUDA), f32, int8 (CPU) or tf32 (CUDA).
    #[arg(long, value_name = "P", value_parser = trawl_core::settings::EMBED_PRECISIONS)]
    pub embed_precision: String,
    #[command(flatten)]
    pub index: IndexSettings,
}

impl From<IndexArgs> for trawl_runtime::IndexChoice {
    fn from(a: IndexArgs) -> Self {
        trawl_runtime::IndexChoice {
            embed: a.embed,
            model_dir: a.model_dir,
            // The flag takes only the names Precision parses.
            precision: a.embed_precision.parse().unwrap_or_default(),
            index: a.index,
        }
    }
}

impl IndexArgs {
    /// The settings for an index at `dir`.
    pub fn options(&self, dir: &Path) -> IndexOptions {
        trawl_runtime::IndexChoice::from(self.clone()).options(dir)
    }
}

/// `trawl index`: (re)index the pages of a crawl or ingest.
#[derive(Debug, Clone, Args)]
pub struct IndexCmdArgs {
    /// `pages.jsonl` files (or `-` for standard input).
    #[arg(value_name = "PAGES", required = true)]
    pub inputs: Vec<String>,
    /// The index directory (created if missing; pages already in it are replaced).
    #[arg(long = "index", value_name = "DIR", default_value = "trawl-out/index")]
    pub index_dir: PathBuf,
    #[command(flatten)]
    pub index: IndexArgs,
}

pub async fn index_pages(args: &IndexCmdArgs) -> anyhow::Result<IndexStats> {
    let options = args.index.options(&args.index_dir);
    trawl_runtime::index_files::index_files(options, &args.inputs, &mut |s, elapsed| {
        eprintln!(
            "indexing: {} pages, {} chunks, {} aliases, {:.0} chunks/s",
            s.pages,
            s.chunks,
            s.aliases_exact + s.aliases_near,
            s.chunks as f64 / elapsed.as_secs_f64()
        );
    })
    .await
}

/// `trawl search`.
#[derive(Debug, Clone, Args)]
pub struct SearchArgs {
    /// What to look for.
    pub query: String,
    /// The index directory.
    #[arg(long = "index", value_name = "DIR", default_value = "trawl-out/index")]
    pub index: PathBuf,
    /// Results to show.
    #[arg(short, long, default_value_t = 10)]
    pub k: usize,
    /// vector (meaning), text (BM25 over words) or hybrid (both, fused by rank).
    #[arg(long, default_value = "hybrid")]
    pub mode: Mode,
    /// One JSON object per result.
    #[arg(long)]
    pub json: bool,
    /// The embedding model's directory (as for `trawl crawl`).
    #[arg(long, value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
}

pub async fn search(args: &SearchArgs, out: &mut dyn Write) -> anyhow::Result<usize> {
    let found = trawl_runtime::search::search(&SearchQuery {
        index: args.index.clone(),
        query: args.query.clone(),
        k: args.k,
        mode: args.mode,
        model_dir: args.model_dir.clone(),
    })
    .await?;
    for note in &found.notes {
        eprintln!("note: {note}");
    }
    let hits = found.hits;
    for (i, h) in hits.iter().enumerate() {
        if args.json {
            serde_json::to_writer(&mut *out, h)?;
            writeln!(out)?;
            continue;
        }
        let path = if h.heading_path.is_empty() {
            String::new()
        } else {
            format!(" > {}", h.heading_path.join(" > "))
        };
        writeln!(out, "{}. [{:.3}] {}{}", i + 1, h.score, h.title, path)?;
        writeln!(out, "   {}", h.url)?;
        let snippet: String = h.text.chars().take(400).collect();
        for line in snippet.lines().filter(|l| !l.trim().is_empty()).take(6) {
            writeln!(out, "   | {line}")?;
        }
        if !h.also_at.is_empty() {
            writeln!(out, "   also at: {}", h.also_at.join(", "))?;
        }
        writeln!(out)?;
    }
    if hits.is_empty() && !args.json {
        writeln!(out, "no results")?;
    }
    Ok(hits.len())
}
