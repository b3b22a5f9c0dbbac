//! `trawl crawl` options, shared by the command line and the embedded runtime's callers.

use std::path::PathBuf;

use clap::Args;
use trawl_core::scope::ScopeKind;

#[derive(Debug, Clone, Args)]
pub struct CrawlOptions {
    /// Start URLs.
    #[arg(value_name = "SEED")]
    pub seeds: Vec<String>,
    /// Sitemap URLs (XML, sitemap index, plain text, gzip) to read URLs from.
    #[arg(long = "sitemap", value_name = "URL")]
    pub sitemaps: Vec<String>,
    /// RSS or Atom feed URLs to read URLs from.
    #[arg(long = "feed", value_name = "URL")]
    pub feeds: Vec<String>,
    /// A file with more seed URLs, one per line (`#` starts a comment).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
    /// Stop after admitting this many URLs (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_pages: u64,
    /// Follow links at most this deep (seeds are depth 0). High by default: documentation
    /// sites often chain hundreds of pages through "next" links alone; spider traps have
    /// their own defences.
    #[arg(long, default_value_t = 1000)]
    pub max_depth: u32,
    /// Which URLs belong to the crawl: host, domain, prefix (the seed's path up to its last
    /// `/`) or any.
    #[arg(long, default_value = "host")]
    pub scope: ScopeKind,
    /// Minimum milliseconds between the end of one request to a host and the next (a site's
    /// larger Crawl-delay wins).
    #[arg(long = "delay", value_name = "MS", default_value_t = 500)]
    pub delay_ms: u64,
    /// Requests in flight in total.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Requests in flight to one host.
    #[arg(long, default_value_t = 1)]
    pub concurrency_per_host: u32,
    /// The User-Agent header; its first product token is matched against robots.txt.
    #[arg(long)]
    pub user_agent: Option<String>,
    /// Allow requests to private, loopback and link-local addresses.
    #[arg(long)]
    pub allow_private: bool,
    /// Output directory.
    #[arg(long, default_value = "./trawl-out")]
    pub out: PathBuf,
    /// Most pages admitted per host (0: no limit); a spider-trap defence.
    #[arg(long, default_value_t = 0)]
    pub max_pages_per_host: u64,
    /// Most URLs waiting in the frontier; past it the lowest-priority ones are evicted.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_queued: usize,
    /// Distinct query strings per path pattern before the rest are treated as a trap.
    #[arg(long, default_value_t = 1000)]
    pub max_query_variants: u64,
    /// URLs longer than this are treated as traps.
    #[arg(long, default_value_t = 2048)]
    pub max_url_length: usize,
    /// Seconds a whole request may take.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Seconds to wait for a connection.
    #[arg(long, default_value_t = 10)]
    pub connect_timeout: u64,
    /// Bytes read per response; the rest is cut off and the page marked.
    #[arg(long, default_value_t = 10 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Bytes a compressed body may inflate to.
    #[arg(long, default_value_t = 50 * 1024 * 1024)]
    pub max_decoded_bytes: usize,
    /// Start a new WARC file past this many bytes.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    pub warc_max_bytes: u64,
    /// Do not write WARC files.
    #[arg(long)]
    pub no_warc: bool,
    /// Extra query parameters to strip (a trailing `*` matches a prefix), besides the
    /// built-in tracking parameters.
    #[arg(long = "strip-param", value_name = "NAME")]
    pub strip_params: Vec<String>,
    /// Pages whose text SimHash is within this Hamming distance of a page already kept are
    /// near-duplicates (recorded with `duplicate_of`, not indexed again). At most 3: the band
    /// index finds every match up to 3.
    #[arg(long, default_value_t = trawl_dedup::gate::DEFAULT_MAX_DISTANCE, value_parser = clap::value_parser!(u32).range(0..=3))]
    pub dedup_distance: u32,
    /// Keep every page, duplicates included.
    #[arg(long)]
    pub no_dedup: bool,
    /// A line (paragraph) seen on this many earlier pages of a host is that host's
    /// boilerplate and is dropped from later pages before fingerprinting (0, the default:
    /// keep all). Off by default: pages fingerprinted before a line is known keep it, so a
    /// page and its later copy can end up with different texts.
    #[arg(long, default_value_t = 0)]
    pub boilerplate_min_pages: u32,
    /// Progress display: auto (a bar on a terminal), bar, log or none.
    #[arg(long, default_value = "auto")]
    pub progress: String,
    #[command(flatten)]
    pub index: crate::index::CrawlIndexArgs,
}

impl CrawlOptions {
    /// Options for a crawl of `seeds` with every default, as the command line would give.
    pub fn with_seeds<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            o: CrawlOptions,
        }
        let mut o = Wrap::parse_from(["trawl"]).o;
        o.seeds = seeds.into_iter().map(Into::into).collect();
        o
    }
}
