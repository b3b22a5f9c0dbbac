//! `trawl`: turn websites into a clean, searchable corpus.

use clap::{Parser, Subcommand};

// Large tensors are allocated and freed on every forward pass: mimalloc keeps the pages,
// where glibc's malloc returns them to the kernel and faults them in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use trawl::CrawlOptions;

#[derive(Parser)]
#[command(
    name = "trawl",
    version,
    about = "Crawl websites into a clean, deduplicated, searchable corpus"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Crawl from seed URLs in one process: fetch politely, extract, write the corpus.
    Crawl(CrawlOptions),
    /// Extract the main content of saved HTML pages: one page as text, Markdown or JSON;
    /// several as JSON Lines.
    Extract(trawl::extract::ExtractOptions),
    /// Read web archives (WARC, WET, ARC; files or URLs) through the crawl's pipeline:
    /// extraction, dedup, `pages.jsonl`.
    Ingest(trawl::corpus::IngestArgs),
    /// Write a training corpus (JSON Lines or Parquet) from a crawl or ingest, after language
    /// and quality filters and MinHash dedup, with a dataset report.
    Export(trawl::corpus::ExportArgs),
    /// Start a crawl on the cluster (the services run with `TRAWL_CRAWL` set to its id).
    Submit(trawl::cluster::SubmitArgs),
    /// Per-hop lag and the counts of a crawl on the cluster.
    Status(trawl::cluster::StatusArgs),
    /// Dead letters of a stage: `list` or `replay`.
    Dlq(trawl::cluster::DlqArgs),
    /// Search the index of a crawl: by meaning (vector), by words (text), or both.
    Search(trawl::index::SearchArgs),
    /// Index (or re-index) the pages of a crawl or ingest: chunks, embeddings, LanceDB.
    Index(trawl::index::IndexCmdArgs),
}

fn main() -> std::process::ExitCode {
    trawl_index::alloc::keep_freed_pages();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRAWL_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(trawl_core::DEFAULT_LOG_FILTER)
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let opts = match cli.command {
        Command::Extract(opts) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            return match trawl::extract::run(&opts, &mut out) {
                Ok(true) => std::process::ExitCode::SUCCESS,
                // Some files could not be read; the others were written.
                Ok(false) => std::process::ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            };
        }
        Command::Export(args) => {
            return match trawl::corpus::export(&args) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            };
        }
        Command::Ingest(args) => return run_ingest(&args),
        Command::Submit(args) => return block_on(trawl::cluster::submit(&args)),
        Command::Status(args) => return block_on(trawl::cluster::print_status(&args)),
        Command::Dlq(args) => return block_on(trawl::cluster::dlq(&args)),
        Command::Search(args) => {
            return block_on(async move {
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                trawl::index::search(&args, &mut out).await?;
                std::io::Write::flush(&mut out)?;
                Ok(())
            });
        }
        Command::Index(args) => {
            return block_on(async move {
                let s = trawl::index::index_pages(&args).await?;
                trawl::index::print_stats(&s, &args.index_dir.to_string_lossy());
                Ok(())
            });
        }
        Command::Crawl(opts) => opts,
    };
    let Some(rt) = runtime() else {
        return std::process::ExitCode::FAILURE;
    };
    let result = rt.block_on(async {
        let (report, out) = trawl::crawl(opts).await?;
        if report.interrupted {
            eprintln!("interrupted: the outputs hold what was done before the stop");
        }
        eprintln!(
            "crawled {} pages in {:.1}s ({:.1} pages/s): {} robots-blocked, {} out of scope, {} errors",
            report.pages,
            report.elapsed_s,
            report.pages_per_s,
            report.robots_blocked,
            report.out_of_scope,
            report.errors.values().sum::<i64>()
        );
        if let (Some(ix), Some(dir)) = (&report.index, &out.index) {
            trawl::index::print_stats(ix, &dir.to_string_lossy());
        }
        eprintln!(
            "outputs: {} , {} , {} WARC file(s) in {}",
            out.pages.display(),
            out.report.display(),
            out.warc_files.len(),
            out.dir.join("warc").display()
        );
        anyhow::Ok(report.interrupted)
    });
    match result {
        // 130: the shell's code for a stop by SIGINT, so scripts can tell.
        Ok(true) => std::process::ExitCode::from(130),
        Ok(false) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_ingest(args: &trawl::corpus::IngestArgs) -> std::process::ExitCode {
    let Some(rt) = runtime() else {
        return std::process::ExitCode::FAILURE;
    };
    match rt.block_on(trawl::corpus::ingest(args)) {
        Ok(r) => {
            eprintln!(
                "ingested {} files: {} records, {} documents ({} exact and {} near copies), {} skipped, {} malformed, in {:.1}s ({:.0} documents/s)",
                r.files,
                r.records.values().sum::<u64>(),
                r.documents,
                r.duplicates_exact,
                r.duplicates_near,
                r.skipped.values().sum::<u64>(),
                r.malformed,
                r.elapsed_s,
                r.documents_per_s
            );
            eprintln!(
                "outputs: {} , {}",
                args.out.join("pages.jsonl").display(),
                args.out.join("report.json").display()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn block_on(f: impl std::future::Future<Output = anyhow::Result<()>>) -> std::process::ExitCode {
    let Some(rt) = runtime() else {
        return std::process::ExitCode::FAILURE;
    };
    match rt.block_on(f) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            None
        }
    }
}
