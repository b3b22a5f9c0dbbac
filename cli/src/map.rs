//! `trawl map URL`: a site's pages from its sitemaps and the links of a few pages
//! (`trawl_api::map`, which `/v2/map` answers with), printed.

use std::time::Duration;

use trawl_api::map::{DEFAULT_LIMIT, MAX_LIMIT, MapOptions, SitemapUse, map};
use trawl_api::scrape::Scraper;

/// `trawl map URL`.
#[derive(Debug, Clone, clap::Args)]
pub struct MapArgs {
    /// The site's start URL.
    pub url: String,
    /// URLs listed at most.
    #[arg(long, default_value_t = DEFAULT_LIMIT)]
    pub limit: usize,
    /// Words: the URLs and titles matching them come first.
    #[arg(long)]
    pub search: Option<String>,
    /// Only the start URL's host, not its subdomains.
    #[arg(long)]
    pub same_host: bool,
    /// Keep query strings (by default they are dropped and the URLs merged).
    #[arg(long)]
    pub keep_query: bool,
    /// Sitemaps: include (with links), skip, or only.
    #[arg(long, default_value = "include")]
    pub sitemap: SitemapUse,
    /// Pages read for their links.
    #[arg(long, default_value_t = 10)]
    pub pages: usize,
    /// Seconds the whole map may take.
    #[arg(long = "map-timeout", value_name = "S", default_value_t = 60)]
    pub map_timeout_s: u64,
    /// One JSON array of {url, title, description} instead of one URL per line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub crawl: trawl_core::settings::CrawlSettings,
}

/// Prints the map of `args.url` to `out`.
pub async fn run(args: &MapArgs, out: &mut impl std::io::Write) -> anyhow::Result<usize> {
    args.crawl.validate()?;
    let url = trawl_api::api::http_url(&args.url).map_err(|e| anyhow::anyhow!(e.message))?;
    let scraper = Scraper::new(&args.crawl)?;
    let opts = MapOptions {
        limit: args.limit.clamp(1, MAX_LIMIT),
        search: args.search.clone(),
        include_subdomains: !args.same_host,
        ignore_query: !args.keep_query,
        sitemap: args.sitemap,
        pages: args.pages,
        timeout: Duration::from_secs(args.map_timeout_s.max(1)),
    };
    let links = map(&scraper, &url, &opts)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &links)?;
        writeln!(out)?;
    } else {
        for l in &links {
            writeln!(out, "{}", l.url)?;
        }
    }
    Ok(links.len())
}
