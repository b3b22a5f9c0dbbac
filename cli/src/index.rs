//! The knowledge base from the command line: the index options `trawl crawl` shares,
//! `trawl index` (index an existing `pages.jsonl`) and `trawl search`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use trawl_core::PageRecord;
use trawl_core::settings::IndexSettings;
use trawl_index::{IndexOptions, IndexStats, Indexer, Mode};

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
    let mut ix = Indexer::open(args.index.options(&args.index_dir)).await?;
    let started = std::time::Instant::now();
    let mut last = started;
    for input in &args.inputs {
        let reader: Box<dyn BufRead> = if input == "-" {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            Box::new(std::io::BufReader::new(
                std::fs::File::open(input).with_context(|| format!("opening {input}"))?,
            ))
        };
        for (n, line) in reader.lines().enumerate() {
            let line = line.with_context(|| format!("reading {input}"))?;
            if line.trim().is_empty() {
                continue;
            }
            let page: PageRecord = serde_json::from_str(&line)
                .with_context(|| format!("{input}:{}: not a page record", n + 1))?;
            ix.add_page(&page).await?;
            if last.elapsed().as_secs() >= 5 {
                let s = ix.stats();
                eprintln!(
                    "indexing: {} pages, {} chunks, {} aliases, {:.0} chunks/s",
                    s.pages,
                    s.chunks,
                    s.aliases_exact + s.aliases_near,
                    s.chunks as f64 / started.elapsed().as_secs_f64()
                );
                last = std::time::Instant::now();
            }
        }
    }
    Ok(ix.finish().await?)
}

pub fn print_stats(s: &IndexStats, dir: &str) {
    eprintln!(
        "index: {} pages ({} replaced), {} chunks stored, {} repeated chunks kept as aliases ({} exact, {} near), {:.1}s embedding; {} in {}",
        s.pages,
        s.pages_replaced,
        s.chunks,
        s.aliases_exact + s.aliases_near,
        s.aliases_exact,
        s.aliases_near,
        s.embed_seconds,
        if s.indexes_built.is_empty() {
            "no search indexes".to_string()
        } else {
            format!("search indexes: {}", s.indexes_built.join(", "))
        },
        dir
    );
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
    let uri = args.index.to_string_lossy().to_string();
    if !uri.contains("://") && !args.index.is_dir() {
        anyhow::bail!(
            "no index at {uri}: crawl first (`trawl crawl URL --out DIR` writes DIR/index) or pass --index"
        );
    }
    let store = trawl_index::Store::open_existing(&uri).await?;
    // A crawl still computing vectors keeps a full-text preview of every page it wrote.
    let preview = trawl_index::preview::open(&uri).await?;
    if preview.is_some() && args.mode != Mode::Vector {
        eprintln!(
            "note: the index is still computing vectors: full-text results come from its \
             preview (every page written so far), vector results from the pages embedded so far"
        );
    }
    // A text-only index (or --mode text) needs no model; hybrid on such an index falls
    // back to text with a note.
    let mut mode = args.mode;
    if store.dim().is_none() && mode == Mode::Hybrid {
        eprintln!("note: this index has no vectors (built with --no-embed): text search only");
        mode = Mode::Text;
    }
    let embedder = if mode == Mode::Text {
        None
    } else {
        let dir = trawl_index::model::resolve_dir(args.model_dir.as_deref());
        Some(tokio::task::spawn_blocking(move || trawl_index::Embedder::load(&dir)).await??)
    };
    let hits = trawl_index::search_with_preview(
        &store,
        preview.as_ref(),
        embedder.as_ref(),
        &args.query,
        args.k,
        mode,
    )
    .await?;
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
