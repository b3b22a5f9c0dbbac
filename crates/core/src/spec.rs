//! A crawl as every stage of it sees it: its id, start URLs and settings. The embedded
//! runtime builds one from the command line; in the cluster `trawl submit` stores it in
//! Redis and every service reads it from there.

use serde::{Deserialize, Serialize};

use crate::settings::{CrawlSettings, IndexSettings};
use crate::{Discovered, DiscoveredUrl, MESSAGE_VERSION, UrlKind};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrawlSpec {
    pub crawl: String,
    /// Start URLs (normalized) and what they are.
    pub start: Vec<(String, UrlKind)>,
    pub settings: CrawlSettings,
    pub index: IndexSettings,
    /// A re-crawl: the id of the earlier crawl (in the same Redis) its pages are compared
    /// with. The embedded runtime names a directory instead (`--since DIR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// A re-crawl fetches only the pages its adaptive schedule makes due.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub due_only: bool,
    /// The cluster: how many Redis servers the crawl's per-host state is sharded across
    /// (fixed for the crawl's life; every service checks it names as many). 1 everywhere
    /// else.
    #[serde(default = "one_shard", skip_serializing_if = "is_one_shard")]
    pub state_shards: u32,
}

fn one_shard() -> u32 {
    1
}

fn is_one_shard(n: &u32) -> bool {
    *n == 1
}

impl CrawlSpec {
    pub fn normalizer(&self) -> crate::urlnorm::Normalizer {
        self.settings.normalizer()
    }

    /// The start URLs as the crawl's first batch for the frontier (depth 0).
    pub fn seeds_message(&self) -> Discovered {
        Discovered {
            v: MESSAGE_VERSION,
            crawl: self.crawl.clone(),
            source: None,
            urls: self
                .start
                .iter()
                .map(|(url, kind)| DiscoveredUrl {
                    url: url.clone(),
                    depth: 0,
                    kind: *kind,
                    lastmod: None,
                })
                .collect(),
        }
    }

    /// The crawl's scope, derived from its start URLs.
    pub fn scope(&self) -> crate::scope::Scope {
        let seeds: Vec<url::Url> = self
            .start
            .iter()
            .filter_map(|(u, _)| url::Url::parse(u).ok())
            .collect();
        crate::scope::Scope::new(self.settings.scope, &seeds)
    }
}
