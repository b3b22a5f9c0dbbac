//! `trawl refine`: pages from web archives (a crawl's own WARC files or Common Crawl's), a
//! crawl directory or saved HTML, rendered to ReScraper's lines, given an edit program by
//! trawl's extractor (`--engine extract`, no model) or a model (`candle`, in process;
//! `openai`, any OpenAI-compatible server), executed, written as JSON Lines with a report.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;
use trawl_core::settings::RefineSettings;
use trawl_refine::backend::MAX_NEW_TOKENS;
use trawl_refine::page::{Engine, refine_page};
use trawl_refine::program::Mode;
pub use trawl_runtime::refine::{
    NgramDedupPlan, RefinePlan, RefineProgress, RefineReport, expand, refine,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineName {
    /// trawl's extractor written as an `<extract>` program (no model).
    Extract,
    /// A model in process: `--model` is a .gguf file or a Qwen3 checkpoint directory.
    Candle,
    /// An OpenAI-compatible server (`--endpoint`): vLLM, SGLang, llama.cpp's server.
    Openai,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Reader {
    /// Kept text is always copied from the page (an unparsable edit falls back to the
    /// extract-only text; a rewrite cut off at the token limit is rejected).
    Trawl,
    /// ReScraper's own reader, for comparisons.
    Python,
}

#[derive(Debug, clap::Args)]
pub struct RefineArgs {
    /// WARC/ARC files (gzip or plain), crawl output directories (their WARC files), HTML
    /// files, or `-`: one HTML page on standard input, its refined text on standard output.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output directory: `refined.jsonl` and `refine-report.json`.
    #[arg(long, default_value = "./trawl-refined")]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value_t = EngineName::Extract)]
    pub engine: EngineName,
    /// candle: a .gguf file (Qwen3 or Llama architecture) or a Qwen3 safetensors directory.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// openai: the server's base URL (`http://host:8000/v1`).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// openai: the served model's name.
    #[arg(long, default_value = "default")]
    pub served_model: String,
    #[arg(long, env = "TRAWL_REFINE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The context length: pages whose prompt and token budget do not fit are skipped
    /// (openai: unsent; candle: at most the model's own).
    #[arg(long)]
    pub context_length: Option<usize>,
    /// The checkpoint's system prompt (ReScraper's is `prompts/student_system_stage2.txt`).
    #[arg(long)]
    pub system_prompt: Option<PathBuf>,
    #[arg(long, default_value_t = MAX_NEW_TOKENS)]
    pub max_new_tokens: usize,
    /// Sampling temperature (ReScraper: 1.0, top-p 1); seeded per page by its URL.
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    /// Greedy decoding instead of sampling.
    #[arg(long)]
    pub greedy: bool,
    /// Pages refined at once (default: the cores for extract, 1 for candle, 8 for openai).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// openai: retries on connection errors, 429 and 5xx.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// openai: per-request timeout.
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
    #[arg(long, value_enum, default_value_t = Reader::Trawl)]
    pub reader: Reader,
    /// Drop near-copies of earlier refined pages, BFF-style: a page whose word n-grams are
    /// mostly (`--dedup-threshold`) in a Bloom filter of the earlier pages' n-grams.
    #[arg(long)]
    pub dedup: bool,
    #[arg(long, default_value_t = 13)]
    pub dedup_ngram: usize,
    #[arg(long, default_value_t = 0.8)]
    pub dedup_threshold: f64,
    /// The n-grams the Bloom filter is sized for (1% false positives at this many).
    #[arg(long, default_value_t = 50_000_000)]
    pub dedup_expected_ngrams: u64,
    /// Also write `training.jsonl`: (numbered page, program) pairs in ReScraper's SFT shape.
    #[arg(long)]
    pub training_pairs: bool,
    /// Stop after this many pages.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Pages with more HTML than this are recorded as skipped (`too_large`), not rendered.
    #[arg(long, default_value_t = 8 << 20)]
    pub max_html_bytes: usize,
}

/// The refiner's settings the flags give, checked in the flags' own names.
fn settings(args: &RefineArgs) -> anyhow::Result<RefineSettings> {
    let name = match args.engine {
        EngineName::Extract => "extract",
        EngineName::Candle => "candle",
        EngineName::Openai => "openai",
    };
    match args.engine {
        EngineName::Extract => {}
        EngineName::Candle if args.model.is_none() => {
            bail!("--model PATH is needed with --engine candle")
        }
        EngineName::Openai if args.endpoint.is_none() => {
            bail!("--endpoint URL is needed with --engine openai")
        }
        _ if args.system_prompt.is_none() => {
            bail!("--system-prompt FILE is needed with a model engine")
        }
        _ => {}
    }
    Ok(RefineSettings {
        refine_engine: name.into(),
        refine_model: args.model.clone(),
        refine_endpoint: args.endpoint.clone(),
        refine_served_model: args.served_model.clone(),
        refine_api_key: args.api_key.clone(),
        refine_system_prompt: args.system_prompt.clone(),
        refine_max_new_tokens: args.max_new_tokens,
        // The stage reads a temperature of 0 as greedy.
        refine_temperature: if args.greedy { 0.0 } else { args.temperature },
        refine_context_length: args.context_length.unwrap_or(0),
        refine_concurrency: 0,
        refine_retries: args.retries,
        refine_timeout_s: args.timeout_s,
        refine_max_html_bytes: args.max_html_bytes,
    })
}

fn stdin_page(engine: &Engine, mode: Mode) -> anyhow::Result<()> {
    let mut raw = Vec::new();
    std::io::stdin().read_to_end(&mut raw)?;
    let (html, _) = trawl_body::decode_html(&raw, None);
    let r = refine_page(engine, mode, "http://localhost/", "-", &html);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", r.text.unwrap_or_default())?;
    Ok(())
}

/// `trawl refine`: one page from standard input to standard output, or the inputs into
/// `--out` by the runtime's [`refine`].
pub fn run(args: &RefineArgs) -> anyhow::Result<RefineReport> {
    let settings = settings(args)?;
    let mode = match args.reader {
        Reader::Trawl => Mode::Trawl,
        Reader::Python => Mode::Python,
    };
    if args.inputs.len() == 1 && args.inputs[0].as_os_str() == "-" {
        stdin_page(&trawl_refiner::engine::build(&settings)?, mode)?;
        return Ok(RefineReport::default());
    }
    let workers = args.concurrency.unwrap_or(match args.engine {
        EngineName::Extract => std::thread::available_parallelism().map_or(2, |n| n.get()),
        EngineName::Candle => 1,
        EngineName::Openai => 8,
    });
    refine(&RefinePlan {
        inputs: args.inputs.clone(),
        out: args.out.clone(),
        settings,
        mode,
        workers,
        dedup: args.dedup.then_some(NgramDedupPlan {
            ngram: args.dedup_ngram,
            threshold: args.dedup_threshold,
            expected: args.dedup_expected_ngrams,
        }),
        training_pairs: args.training_pairs,
        limit: args.limit,
        progress: Arc::new(crate::progress::Progress::new("auto")),
    })
}
