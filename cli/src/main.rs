//! `trawl`: turn websites into a clean, searchable corpus.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

// Large tensors are allocated and freed on every forward pass: mimalloc keeps the pages,
// where glibc's malloc returns them to the kernel and faults them in again.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use trawl::CrawlArgs;
use trawl_core::settings::Settings;

#[derive(Parser)]
#[command(
    name = "trawl",
    version,
    about = "Crawl websites into a clean, deduplicated, searchable corpus"
)]
struct Cli {
    /// A settings file (JSON; default: `TRAWL_CONFIG`). Layers: defaults, this file,
    /// `TRAWL_*` variables, flags.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// The commands whose flags are settings (the others, `extract`, `ingest` and `export`,
/// have flags of their own that only look alike).
const SETTINGS_COMMANDS: [&str; 10] = [
    "crawl", "watch", "submit", "status", "dlq", "index", "search", "serve", "map", "mcp",
];

/// Parses the command line over the settings' layers (defaults, file, `TRAWL_*`): each
/// flag of a setting defaults to the value those layers give it. Layers that cannot be
/// read fail the commands that use them, not `--help`, `--version` or the others.
fn parse() -> Result<(Cli, Settings), String> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The file is a layer under the flags, so it is read before they are parsed.
    let file = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from)
        .or_else(|| {
            args.iter()
                .filter_map(|a| a.to_str()?.strip_prefix("--config="))
                .map(std::path::PathBuf::from)
                .next()
        });
    let (settings, unreadable) = match Settings::load(file.as_deref()) {
        Ok(s) => (s, None),
        Err(e) => (Settings::default(), Some(e.to_string())),
    };
    let mut cmd = Cli::command();
    for name in SETTINGS_COMMANDS {
        let settings = settings.clone();
        cmd = cmd.mut_subcommand(name, move |s| trawl::options::with_defaults(s, &settings));
    }
    let matches = cmd.get_matches_from(args);
    if let (Some(e), Some((name, _))) = (unreadable, matches.subcommand())
        && SETTINGS_COMMANDS.contains(&name)
    {
        return Err(e);
    }
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    let limits = &settings.cluster;
    match &mut cli.command {
        Command::Submit(a) => a.cluster.take_limits(limits),
        Command::Status(a) => a.cluster.take_limits(limits),
        Command::Dlq(a) => a.cluster.take_limits(limits),
        // Not a settings command (its other flags only look like settings), but this one
        // is the setting's.
        Command::Ingest(a) => {
            a.gate_in_memory
                .get_or_insert(settings.process.gate_in_memory);
        }
        _ => {}
    }
    Ok((cli, settings))
}

#[derive(Subcommand)]
enum Command {
    /// Crawl from seed URLs in one process: fetch politely, extract, write the corpus.
    Crawl(Box<CrawlArgs>),
    /// Monitor a site: re-crawl it every --every into one directory, requesting only the
    /// pages whose revisit time has come, and report (and deliver) what changed.
    Watch(Box<trawl::watch::WatchArgs>),
    /// Extract the main content of saved HTML pages: one page as text, Markdown or JSON;
    /// several as JSON Lines.
    Extract(trawl::extract::ExtractOptions),
    /// Read web archives (WARC, WET, ARC; files or URLs) through the crawl's pipeline:
    /// extraction, dedup, `pages.jsonl`.
    Ingest(trawl::corpus::IngestArgs),
    /// Write a training corpus (JSON Lines, Parquet or CSV) from a crawl or ingest, after
    /// language and quality filters and MinHash dedup, with a dataset report; with
    /// `--chunks`, the kept pages' chunks and embeddings from the index as Parquet.
    Export(trawl::corpus::ExportArgs),
    /// Start a crawl on the cluster (the services run with `TRAWL_CRAWL` set to its id).
    Submit(Box<trawl::cluster::SubmitArgs>),
    /// Per-hop lag and the counts of a crawl on the cluster.
    Status(trawl::cluster::StatusArgs),
    /// Dead letters of a stage: `list` or `replay`.
    Dlq(trawl::cluster::DlqArgs),
    /// Search the index of a crawl: by meaning (vector), by words (text), or both.
    Search(trawl::index::SearchArgs),
    /// Index (or re-index) the pages of a crawl or ingest: chunks, embeddings, LanceDB.
    Index(trawl::index::IndexCmdArgs),
    /// Serve Firecrawl's v2 API (scrape, crawl, map, batch scrape) for its SDKs and
    /// LangChain loader: point their `api_url` here.
    Serve(Box<trawl::serve::ServeArgs>),
    /// Refine pages for LM training, after ReScraper: render them to numbered lines, have
    /// trawl's extractor or a model (candle in process, or an OpenAI-compatible server)
    /// write an edit program, execute it; JSON Lines and a report.
    Refine(Box<trawl::refine::RefineArgs>),
    /// List a site's pages from its sitemaps and the links of a few pages, with titles.
    Map(Box<trawl::map::MapArgs>),
    /// Serve trawl's tools over the Model Context Protocol (scrape, map, crawl, batch scrape,
    /// search of the crawled pages, changes, extract): on stdin and stdout, or with `--http`
    /// as streamable HTTP at `/mcp` on `--listen`. Takes `trawl serve`'s flags.
    Mcp(Box<trawl::serve::McpArgs>),
}

fn main() -> ExitCode {
    trawl_index::alloc::keep_freed_pages();
    let (cli, settings) = match parse() {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRAWL_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(trawl_core::DEFAULT_LOG_FILTER)
            }),
        )
        .with_writer(|| trawl::progress::LogWriter)
        .init();
    match run(cli.command, &settings) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command, settings: &Settings) -> anyhow::Result<ExitCode> {
    match command {
        Command::Crawl(args) => crawl(args.into_plan(settings)),
        Command::Watch(args) => block_on(trawl_runtime::watch::watch(args.into_plan(settings)?)),
        Command::Extract(opts) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            // `false`: some files could not be read; the others were written.
            let all_read = trawl::extract::run(&opts, &mut out)?;
            Ok(if all_read {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Export(args) => block_on(trawl::corpus::export(&args)),
        Command::Ingest(args) => ingest(&args),
        Command::Submit(args) => block_on(trawl::cluster::submit(&args)),
        Command::Status(args) => block_on(trawl::cluster::print_status(&args)),
        Command::Dlq(args) => block_on(trawl::cluster::dlq(&args)),
        Command::Search(args) => block_on(async move {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            trawl::index::search(&args, &mut out).await?;
            std::io::Write::flush(&mut out)?;
            Ok(())
        }),
        Command::Serve(args) => block_on(trawl_api::serve(args.into_config(settings))),
        Command::Mcp(args) => {
            let http = args.http;
            let config = args.serve.into_config(settings);
            if http {
                block_on(trawl_api::mcp_http_until_stopped(config))
            } else {
                block_on(trawl_api::mcp_stdio(config))
            }
        }
        Command::Map(args) => block_on(async move {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let n = trawl::map::run(&args, &mut out).await?;
            std::io::Write::flush(&mut out)?;
            eprintln!("{n} URLs");
            Ok(())
        }),
        Command::Refine(args) => {
            let r = trawl::refine::run(&args)?;
            if !(args.inputs.len() == 1 && args.inputs[0].as_os_str() == "-") {
                eprintln!("{}", r.summary(&args.out));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Index(args) => block_on(async move {
            let s = trawl::index::index_pages(&args).await?;
            eprintln!("{}", s.summary(&args.index_dir.to_string_lossy()));
            Ok(())
        }),
    }
}

fn crawl(plan: trawl::CrawlPlan) -> anyhow::Result<ExitCode> {
    let (report, out) = runtime()?.block_on(trawl::crawl(plan))?;
    eprintln!("{}", report.summary(&out));
    // 130: the shell's code for a stop by SIGINT, so scripts can tell.
    Ok(if report.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn ingest(args: &trawl::corpus::IngestArgs) -> anyhow::Result<ExitCode> {
    let r = runtime()?.block_on(trawl::corpus::ingest(args))?;
    eprintln!("{}", r.summary(&args.out));
    Ok(ExitCode::SUCCESS)
}

fn block_on(f: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(f)?;
    Ok(ExitCode::SUCCESS)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}
