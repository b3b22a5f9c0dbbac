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

    /// The crawl's scope, derived from its start URLs; a start sitemap or feed on the host
    /// of a start page does not count (a sitemap at the site's root must not widen a
    /// prefix to the whole host; the frontier reads it all the same).
    pub fn scope(&self) -> crate::scope::Scope {
        let parsed: Vec<(url::Url, crate::UrlKind)> = self
            .start
            .iter()
            .filter_map(|(u, k)| url::Url::parse(u).ok().map(|u| (u, *k)))
            .collect();
        let page_hosts: Vec<&str> = parsed
            .iter()
            .filter(|(_, k)| *k == crate::UrlKind::Page)
            .filter_map(|(u, _)| u.host_str())
            .collect();
        let seeds: Vec<url::Url> = parsed
            .iter()
            .filter(|(u, k)| {
                *k == crate::UrlKind::Page || !u.host_str().is_some_and(|h| page_hosts.contains(&h))
            })
            .map(|(u, _)| u.clone())
            .collect();
        crate::scope::Scope::new(self.settings.scope, &seeds)
    }
}

#[cfg(test)]
mod scope_tests {
    use super::*;
    use crate::scope::ScopeKind;

    #[test]
    fn a_root_sitemap_does_not_widen_a_prefix_crawl() {
        let settings = CrawlSettings {
            scope: ScopeKind::Prefix,
            ..CrawlSettings::default()
        };
        let spec = CrawlSpec {
            crawl: "c".into(),
            start: vec![
                ("http://h/docs/".into(), UrlKind::Page),
                ("http://h/sitemap.xml".into(), UrlKind::Sitemap),
                ("http://other/sitemap.xml".into(), UrlKind::Sitemap),
            ],
            settings,
            index: Default::default(),
            since: None,
            due_only: false,
        };
        let scope = spec.scope();
        let u = |s: &str| url::Url::parse(s).unwrap();
        assert!(scope.contains(&u("http://h/docs/a")));
        assert!(!scope.contains(&u("http://h/blog/a")));
        assert!(scope.contains_listing(&u("http://h/sitemap.xml")));
        // A sitemap of another host still brings that host's pages in, as before.
        assert!(scope.contains(&u("http://other/page")));
    }
}
