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
            settings,
        }
    }
}
