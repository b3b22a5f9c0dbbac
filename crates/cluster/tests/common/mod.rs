//! What the Redis state tests share.

use trawl_core::{FetchJob, MESSAGE_VERSION, UrlKind};

/// A page job for `http://{host}{path}`.
pub fn job(host: &str, path: &str, priority: i64) -> FetchJob {
    FetchJob {
        v: MESSAGE_VERSION,
        crawl: "t".into(),
        url: format!("http://{host}{path}"),
        host: host.into(),
        depth: 0,
        kind: UrlKind::Page,
        priority,
        retries: 0,
        lastmod: None,
        robots_wait_since_ms: None,
        claim: None,
    }
}
