//! `trawl ingest` (web archives through the pipeline) and `trawl export` (a training corpus
//! from `pages.jsonl`).

use std::path::PathBuf;

use anyhow::Context;
use trawl_core::settings::{DedupMethod, PageGate, ProcessSettings};
use trawl_corpus::export::{ExportOptions, Format};
use trawl_corpus::ingest::{IngestOptions, IngestReport};
use trawl_corpus::quality::{C4, Filters, FineWeb, GopherQuality, GopherRepetition, LanguageRules};
use trawl_runtime::export::ExportPlan;
use trawl_runtime::ingest::IngestPlan;

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// WARC, WET or ARC files (gzip or plain), or http(s) URLs of such files.
    #[arg(required = true)]
    pub inputs: Vec<String>,
    /// Output directory: `pages.jsonl` and `report.json`, as `trawl crawl` writes them.
    #[arg(long, default_value = "./trawl-out")]
    pub out: PathBuf,
    /// Extraction threads (default: the machine's cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The page gate, as a crawl's: `minhash` (word 5-gram MinHash-LSH) or `simhash`.
    #[arg(long, value_name = "METHOD", default_value_t = DedupMethod::Minhash)]
    pub dedup_method: DedupMethod,
    /// With `--dedup-method simhash`: the Hamming distance under which pages are
    /// near-copies (0 to 3).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=3))]
    pub dedup_distance: u32,
    /// The estimated word 5-gram Jaccard similarity at which pages are near-copies (the
    /// MinHash gate's).
    #[arg(long, value_name = "JACCARD", default_value_t = trawl_core::settings::DEFAULT_DEDUP_SIMILARITY)]
    pub dedup_similarity: f64,
    /// Keep every page as its own (no page gate).
    #[arg(long)]
    pub no_dedup: bool,
    /// Pages the SimHash gate keeps in memory (about 250 bytes each; the MinHash gate a
    /// quarter as many); past that it moves to OUT/gate.db, so memory stays flat however
    /// many records the archives hold.
    /// Default: the `gate_in_memory` setting (`TRAWL_GATE_IN_MEMORY`, 200,000).
    #[arg(long, value_name = "N")]
    pub gate_in_memory: Option<usize>,
    /// A line seen on this many earlier pages of a host is dropped as boilerplate (0, the
    /// default: off; see `trawl crawl --help`).
    #[arg(long, default_value_t = 0)]
    pub boilerplate_min_pages: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Parquet,
    /// The pages' metadata and a preview of their text (no full text): a table to look at.
    Csv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FilterName {
    GopherQuality,
    GopherRepetition,
    C4,
    Fineweb,
    All,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RulesArg {
    /// FineWeb 2's settings for each language (70 languages), the English settings for
    /// English; C4 only on English; a language without settings is not filtered (the report
    /// says which filters did not run for which language).
    PerLanguage,
    /// The English settings on every document (datatrove's defaults: they reject most
    /// non-English text).
    English,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A crawl or ingest output directory (or its `pages.jsonl`).
    #[arg(long, default_value = "./trawl-out")]
    pub from: PathBuf,
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// The corpus file to write; the report goes beside it (`.report.json`, `.report.md`).
    #[arg(long)]
    pub out: PathBuf,
    /// Keep only these languages (ISO 639-3 codes, comma-separated: `eng,spa`).
    #[arg(long, value_delimiter = ',')]
    pub lang: Vec<String>,
    /// Drop documents whose language confidence is below this (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    pub min_lang_score: f64,
    /// Quality filters to run, with datatrove's thresholds (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub filters: Vec<FilterName>,
    /// Gopher: fewest words a document may have.
    #[arg(long)]
    pub min_words: Option<usize>,
    /// Every filter's thresholds from a JSON file (`{"gopher_quality": {...}, "c4": null,
    /// ...}`; a filter left out or null does not run). Overrides `--filters`.
    #[arg(long)]
    pub quality_config: Option<PathBuf>,
    /// Which settings each document's language gets [default: per-language, or the
    /// configuration's `rules`].
    #[arg(long, value_enum)]
    pub quality_rules: Option<RulesArg>,
    /// MinHash-LSH Jaccard threshold for corpus dedup over word 5-grams: a document whose
    /// estimated similarity with an earlier one (kept or dropped: a family of documents
    /// that drift is one group, as in datatrove) reaches it plus 0.02 is dropped.
    #[arg(long, default_value_t = 0.8)]
    pub minhash_threshold: f64,
    /// No MinHash dedup.
    #[arg(long)]
    pub no_minhash: bool,
    /// Keep pages the SimHash gate marked as copies.
    #[arg(long)]
    pub keep_duplicates: bool,
    /// Keep pages whose site reserves AI training (Content Signals `ai-train=no`, a TDM
    /// reservation, `noai`), left out by default. You take responsibility for using them;
    /// the report counts them (`reserved_included`).
    #[arg(long)]
    pub include_reserved: bool,
    /// Remove from each kept document the lines (paragraphs) an earlier kept document had,
    /// after CCNet's normalization (case, digits, punctuation), as Dolma and CCNet do: menus
    /// and footers stay on the first page only. `text` loses them, `markdown` keeps them;
    /// a document left with no line is dropped.
    #[arg(long)]
    pub paragraph_dedup: bool,
    /// Also write the chunks of the kept pages, with their embeddings, to this Parquet file
    /// (one row per chunk: id, page_id, URL, title, heading path, position, token count,
    /// language, source archive and record id, text, `embedding` as a fixed-size float list).
    #[arg(long, value_name = "FILE")]
    pub chunks: Option<PathBuf>,
    /// The index the chunks come from (default: FROM/index). FROM may itself be an index:
    /// then `--format parquet --out FILE` writes all its chunks, without page metadata.
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
}

fn filters(args: &ExportArgs) -> anyhow::Result<Filters> {
    let mut f = configured_filters(args)?;
    match args.quality_rules {
        Some(RulesArg::PerLanguage) => f.rules = LanguageRules::PerLanguage,
        Some(RulesArg::English) => f.rules = LanguageRules::English,
        None => {}
    }
    Ok(f)
}

fn configured_filters(args: &ExportArgs) -> anyhow::Result<Filters> {
    if let Some(path) = &args.quality_config {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        return serde_json::from_str(&text)
            .with_context(|| format!("{}: not a quality configuration", path.display()));
    }
    let mut f = Filters::default();
    for n in &args.filters {
        match n {
            FilterName::All => f = Filters::all(),
            FilterName::None => f = Filters::default(),
            FilterName::GopherQuality => f.gopher_quality = Some(GopherQuality::default()),
            FilterName::GopherRepetition => f.gopher_repetition = Some(GopherRepetition::default()),
            FilterName::C4 => f.c4 = Some(C4::default()),
            FilterName::Fineweb => f.fineweb = Some(FineWeb::default()),
        }
    }
    if let (Some(g), Some(n)) = (f.gopher_quality.as_mut(), args.min_words) {
        g.min_doc_words = n;
    }
    Ok(f)
}

pub async fn export(args: &ExportArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.minhash_threshold),
        "--minhash-threshold must be between 0 and 1"
    );
    let options = ExportOptions {
        from: args.from.clone(),
        out: args.out.clone(),
        format: match args.format {
            ExportFormat::Jsonl => Format::Jsonl,
            ExportFormat::Parquet => Format::Parquet,
            ExportFormat::Csv => Format::Csv,
        },
        languages: args.lang.clone(),
        min_language_score: args.min_lang_score,
        filters: filters(args)?,
        minhash_threshold: (!args.no_minhash).then_some(args.minhash_threshold),
        keep_duplicates: args.keep_duplicates,
        paragraph_dedup: args.paragraph_dedup,
        include_reserved: args.include_reserved,
    };
    let plan = ExportPlan {
        options,
        chunks: args.chunks.clone(),
        index: args.index.clone(),
    };
    let done = trawl_runtime::export::export(plan).await?;
    eprintln!("{}", done.summary(&args.out, args.chunks.as_deref()));
    Ok(())
}

pub async fn ingest(args: &IngestArgs) -> anyhow::Result<IngestReport> {
    let options = IngestOptions {
        out: args.out.clone(),
        gate: (!args.no_dedup).then_some(match args.dedup_method {
            DedupMethod::Simhash => PageGate::SimHash {
                distance: args.dedup_distance,
            },
            DedupMethod::Minhash => PageGate::MinHash {
                similarity: args.dedup_similarity,
            },
        }),
        gate_in_memory: args
            .gate_in_memory
            .unwrap_or_else(|| ProcessSettings::default().gate_in_memory),
        boilerplate_min_pages: args.boilerplate_min_pages,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
    };
    trawl_runtime::ingest::ingest(IngestPlan {
        inputs: args.inputs.clone(),
        options,
    })
    .await
}
