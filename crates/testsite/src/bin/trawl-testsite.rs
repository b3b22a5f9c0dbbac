//! Serves a directory (and the scenario routes) on loopback, logging every request.
//! Used by the benchmark scripts: `trawl-testsite --dir PATH --port 8080 --log access.jsonl`.

use std::path::PathBuf;

use clap::Parser;
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
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
