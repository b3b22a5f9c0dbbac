//! `trawl serve`'s flags, mapped onto the API server's [`ServeConfig`].

use std::net::SocketAddr;
use std::path::PathBuf;

use trawl_api::ServeConfig;
use trawl_core::settings::{ClusterSettings, CrawlSettings, LlmSettings, Settings};

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3002")]
    pub listen: SocketAddr,
    /// Where jobs and scrape history are kept (`serve.db`, `jobs/<id>/`).
    #[arg(long, default_value = "trawl-serve")]
    pub data: PathBuf,
    /// API keys accepted as `Authorization: Bearer KEY` (none: no key needed). Better
    /// given as `TRAWL_API_KEYS`, comma-separated.
    #[arg(
        long = "api-key",
        value_name = "KEY",
        env = "TRAWL_API_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_keys: Vec<String>,
    /// Crawl and batch jobs running at once (the others wait, `scraping` with nothing done).
    #[arg(long, default_value_t = 4)]
    pub max_jobs: usize,
    /// Requests in flight in each job.
    #[arg(long, default_value_t = 16)]
    pub job_concurrency: usize,
    /// Scrape and map requests one key may have in flight; more are answered 429.
    #[arg(long, default_value_t = 32)]
    pub max_requests_per_key: usize,
    /// Jobs one key may have unfinished; more are answered 429.
    #[arg(long, default_value_t = 8)]
    pub max_jobs_per_key: usize,
    /// Largest request body.
    #[arg(long, default_value_t = 10 << 20)]
    pub max_request_bytes: usize,
    /// Pages `/v2/map` reads for their links (besides the sitemaps).
    #[arg(long, default_value_t = 10)]
    pub map_pages: usize,
    /// Run crawl and batch jobs on the cluster's services (one at a time: the services
    /// serve one crawl id) instead of in this process; scrapes and maps stay here.
    #[arg(long)]
    pub cluster: bool,
    /// With --cluster: the crawl id the services were started with (`TRAWL_CRAWL`). Each
    /// job clears that crawl's state before it starts: give the API a crawl id of its own.
    #[arg(long = "cluster-crawl", id = "crawl")]
    pub cluster_crawl: String,
    /// An index `/v2/search` answers from for every key (repeat for more; each key's own
    /// crawl and batch jobs are searched too). Like `trawl search --index`.
    #[arg(
        long = "search-index",
        value_name = "DIR",
        env = "TRAWL_SEARCH_INDEXES",
        value_delimiter = ','
    )]
    pub search_indexes: Vec<PathBuf>,
    /// A SearXNG-compatible JSON search endpoint (`URL?q=...&format=json`) whose web
    /// results `/v2/search` fuses with the indexes'.
    #[arg(long, value_name = "URL", env = "TRAWL_SEARCH_BACKEND")]
    pub search_backend: Option<String>,
    /// Do not index the pages of crawl and batch jobs (they are then not searchable).
    #[arg(long)]
    pub no_job_index: bool,
    /// Credits one key may use a month (a credit is a page scraped, a search result, a
    /// file parsed); past them requests get a 402. 0: no limit.
    #[arg(long, default_value_t = 0)]
    pub monthly_credits: u64,
    /// The shortest time between two runs of a monitor's schedule (a schedule more often
    /// is refused).
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub monitor_min_interval_s: u64,
    #[command(flatten)]
    pub cluster_settings: ClusterSettings,
    #[command(flatten)]
    pub crawl: CrawlSettings,
    /// The model the LLM formats (`json`, `summary`, `/v2/extract`) call.
    #[command(flatten)]
    pub llm: LlmSettings,
}

impl ServeArgs {
    /// The server these flags ask for, over the settings' layers (the flags override
    /// their sections).
    pub fn into_config(self, settings: &Settings) -> ServeConfig {
        let settings = Settings {
            crawl: self.crawl,
            cluster: self.cluster_settings,
            llm: self.llm,
            ..settings.clone()
        };
        ServeConfig {
            listen: self.listen,
            data: self.data,
            api_keys: self.api_keys,
            max_jobs: self.max_jobs,
            job_concurrency: self.job_concurrency,
            max_requests_per_key: self.max_requests_per_key,
            max_jobs_per_key: self.max_jobs_per_key,
            max_request_bytes: self.max_request_bytes,
            map_pages: self.map_pages,
            cluster: self.cluster,
            cluster_crawl: self.cluster_crawl,
            search_indexes: self.search_indexes,
            search_backend: self.search_backend,
            index_jobs: !self.no_job_index,
            monthly_credits: self.monthly_credits,
            monitor_min_interval_s: self.monitor_min_interval_s,
            settings,
        }
    }
}

/// `trawl mcp`: `trawl serve`'s flags, and the transport.
#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    /// Streamable HTTP at `/mcp` on `--listen` instead of stdin and stdout.
    #[arg(long)]
    pub http: bool,
    #[command(flatten)]
    pub serve: ServeArgs,
}
