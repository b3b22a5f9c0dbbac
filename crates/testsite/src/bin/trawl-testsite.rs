//! Serves a directory (and the scenario routes) on loopback, logging every request, or a
//! synthetic web of many hosts. Used by the benchmark scripts:
//! `trawl-testsite --dir PATH --port 8080 --log access.jsonl`, or
//! `trawl-testsite --web 1000000 --hosts 20 --port 8080 --seeds seeds.txt --stats stats.json`.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::Parser;
use trawl_testsite::web::{Web, WebConfig};
use trawl_testsite::{Robots, SiteConfig, TestSite};

#[derive(Parser)]
struct Args {
    /// Directory to serve; its robots.txt is served as is.
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Write the access log here, one JSON object per request.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Serve a synthetic web of this many pages instead (see `--hosts`).
    #[arg(long, value_name = "PAGES")]
    web: Option<u64>,
    /// The synthetic web's hosts, one loopback address each from `--first-addr`.
    #[arg(long, default_value_t = 20)]
    hosts: u32,
    #[arg(long, default_value = "127.1.0.1")]
    first_addr: Ipv4Addr,
    /// Every Nth host is slow (0: none).
    #[arg(long, default_value_t = 10)]
    slow_every: u32,
    /// How long a slow host waits before each answer.
    #[arg(long, default_value_t = 3)]
    slow_ms: u64,
    /// Every Nth host answers 500 to every 10th page (0: none).
    #[arg(long, default_value_t = 10)]
    error_every: u32,
    /// Write the synthetic web's roots here, one URL a line (the crawl's seeds).
    #[arg(long)]
    seeds: Option<PathBuf>,
    /// On exit (SIGINT or SIGTERM), write what the synthetic web saw and what a complete
    /// crawl does here, as JSON.
    #[arg(long)]
    stats: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(pages) = args.web {
        return serve_web(pages, &args).await;
    }
    let cfg = SiteConfig {
        robots: if args.dir.is_some() {
            Robots::FromDir
        } else {
            Robots::default()
        },
        dir: args.dir,
        log_file: args.log,
        ..SiteConfig::default()
    };
    let site = TestSite::start_on(cfg, args.port).await?;
    eprintln!("serving on {}", site.origin());
    tokio::signal::ctrl_c().await?;
    Ok(())
}

async fn serve_web(pages: u64, args: &Args) -> anyhow::Result<()> {
    let web = Web::start(WebConfig {
        pages,
        hosts: args.hosts,
        first_addr: args.first_addr,
        port: args.port,
        slow_every: args.slow_every,
        slow_ms: args.slow_ms,
        error_every: args.error_every,
        ..WebConfig::default()
    })
    .await?;
    if let Some(p) = &args.seeds {
        std::fs::write(p, web.roots().join("\n") + "\n")?;
    }
    eprintln!(
        "serving {} pages on {} hosts from {}",
        web.config().expected().pages,
        args.hosts,
        web.roots()[0]
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    if let Some(p) = &args.stats {
        let out = serde_json::json!({
            "seen": web.stats(),
            "expected": web.config().expected(),
        });
        std::fs::write(p, serde_json::to_string_pretty(&out)?)?;
    }
    Ok(())
}
