//! Spider-trap defences that need no shared state: overlong URLs and repeated path segments
//! (`/a/b/a/b/a/b`, the signature of relative links that keep nesting). The query-variant cap
//! needs a counter and lives in [`crate::Frontier::admit`].

use std::collections::HashMap;

use trawl_core::settings::CrawlSettings;
use url::Url;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrapKind {
    UrlTooLong,
    RepeatedSegments,
    QueryVariants,
}

impl TrapKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::UrlTooLong => "url_too_long",
            Self::RepeatedSegments => "repeated_segments",
            Self::QueryVariants => "query_variants",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TrapConfig {
    pub max_url_len: usize,
    /// A path in which one segment occurs more often than this is a trap.
    pub max_segment_repeats: usize,
    /// Distinct query strings allowed per path pattern (0: no limit).
    pub max_query_variants: u64,
}

impl Default for TrapConfig {
    fn default() -> Self {
        Self::from_settings(&CrawlSettings::default())
    }
}

impl TrapConfig {
    pub fn from_settings(s: &CrawlSettings) -> Self {
        Self {
            max_url_len: s.max_url_length,
            max_segment_repeats: 2,
            max_query_variants: s.max_query_variants,
        }
    }
}

impl TrapConfig {
    pub fn check_static(&self, url: &Url) -> Option<TrapKind> {
        if url.as_str().len() > self.max_url_len {
            return Some(TrapKind::UrlTooLong);
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for seg in url.path().split('/').filter(|s| !s.is_empty()) {
            let c = counts.entry(seg).or_default();
            *c += 1;
            if *c > self.max_segment_repeats {
                return Some(TrapKind::RepeatedSegments);
            }
        }
        None
    }
}

/// The path with every run of digits folded to `0`: calendar and pagination URLs that differ
/// only in numbers share one pattern.
pub fn path_pattern(host: &str, path: &str) -> String {
    let mut out = String::with_capacity(host.len() + path.len());
    out.push_str(host);
    let mut in_digits = false;
    for c in path.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('0');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}
