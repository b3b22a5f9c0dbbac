//! A crawl's settings as the cluster shares them: `trawl submit` writes one to Redis
//! (`trawl:{crawl}:spec`), and every service of the crawl reads it at start-up.

use serde::{Deserialize, Serialize};
use trawl_core::UrlKind;
use trawl_core::scope::ScopeKind;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrawlSpec {
    pub crawl: String,
    /// Start URLs (normalized) and what they are.
    pub start: Vec<(String, UrlKind)>,
    pub scope: ScopeKind,
    pub max_depth: u32,
    pub max_pages: u64,
    pub max_pages_per_host: u64,
    pub max_queued: usize,
    pub max_query_variants: u64,
    pub max_url_length: usize,
    pub strip_params: Vec<String>,
    pub per_host: u32,
    pub delay_ms: u64,
    pub user_agent: Option<String>,
    pub allow_private: bool,
    pub timeout_s: u64,
    pub connect_timeout_s: u64,
    pub max_body_bytes: usize,
    pub max_decoded_bytes: usize,
    /// SimHash distance for near-copies; `None`: no dedup.
    pub dedup_distance: Option<u32>,
}

impl CrawlSpec {
    pub fn normalizer(&self) -> trawl_core::urlnorm::Normalizer {
        trawl_core::urlnorm::Normalizer::new(
            trawl_core::urlnorm::DEFAULT_TRACKING_PARAMS
                .iter()
                .copied()
                .chain(self.strip_params.iter().map(String::as_str)),
        )
    }

    pub fn scope(&self) -> trawl_core::scope::Scope {
        let seeds: Vec<url::Url> = self
            .start
            .iter()
            .filter_map(|(u, _)| url::Url::parse(u).ok())
            .collect();
        trawl_core::scope::Scope::new(self.scope, &seeds)
    }
}

pub fn spec_key(crawl: &str) -> String {
    format!("trawl:{{{crawl}}}:spec")
}

pub async fn put(redis_url: &str, spec: &CrawlSpec) -> Result<(), String> {
    let client = redis::Client::open(redis_url).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    redis::cmd("SET")
        .arg(spec_key(&spec.crawl))
        .arg(json)
        .query_async::<()>(&mut conn)
        .await
        .map_err(|e| e.to_string())
}

/// The crawl's spec, once `trawl submit` has written it.
pub async fn get(redis_url: &str, crawl: &str) -> Result<Option<CrawlSpec>, String> {
    let client = redis::Client::open(redis_url).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let v: Option<String> = redis::cmd("GET")
        .arg(spec_key(crawl))
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    v.map(|s| serde_json::from_str(&s).map_err(|e| format!("crawl spec of {crawl}: {e}")))
        .transpose()
}
