//! Crawl scope: which discovered URLs belong to the crawl, derived from the seeds.

use serde::{Deserialize, Serialize};
use url::Url;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ScopeKind {
    /// Same host and port as a seed.
    #[default]
    Host,
    /// Same registrable domain as a seed (subdomains included).
    Domain,
    /// Same host, and the path under the seed's path up to its last `/`.
    Prefix,
    /// Anything reachable.
    Any,
}

impl std::str::FromStr for ScopeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "host" => Ok(Self::Host),
            "domain" => Ok(Self::Domain),
            "prefix" => Ok(Self::Prefix),
            "any" => Ok(Self::Any),
            other => Err(format!(
                "unknown scope {other:?}: expected host, domain, prefix or any"
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SeedScope {
    scheme_port: (String, Option<u16>),
    host: String,
    domain: String,
    prefix: String,
}

/// The scope of one crawl: a URL is in scope when it matches any seed under the rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    kind: ScopeKind,
    seeds: Vec<SeedScope>,
}

/// The registrable domain, by a heuristic that covers the common two-level public suffixes
/// (`example.co.uk`); IP addresses and single labels are their own domain.
pub fn registrable_domain(host: &str) -> String {
    let host = host.trim_end_matches('.');
    if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return host.to_string();
    }
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() <= 2 {
        return host.to_string();
    }
    let sld = labels[labels.len() - 2];
    let tld = labels[labels.len() - 1];
    let two_level = tld.len() == 2
        && matches!(
            sld,
            "co" | "com" | "org" | "net" | "ac" | "gov" | "edu" | "gob" | "or" | "ne" | "go"
        );
    let keep = if two_level { 3 } else { 2 };
    labels[labels.len() - keep..].join(".")
}

impl Scope {
    pub fn new(kind: ScopeKind, seeds: &[Url]) -> Self {
        let seeds = seeds
            .iter()
            .filter_map(|u| {
                let host = u.host_str()?.to_string();
                let path = u.path();
                let prefix = match path.rfind('/') {
                    Some(i) => path[..=i].to_string(),
                    None => "/".to_string(),
                };
                Some(SeedScope {
                    scheme_port: (u.scheme().to_string(), u.port_or_known_default()),
                    domain: registrable_domain(&host),
                    host,
                    prefix,
                })
            })
            .collect();
        Self { kind, seeds }
    }

    pub fn contains(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        if self.kind == ScopeKind::Any {
            return true;
        }
        let port = url.port_or_known_default();
        self.seeds.iter().any(|s| match self.kind {
            // http and https of one host are the same site: keep both.
            ScopeKind::Host => s.host == host && same_port(&s.scheme_port, port),
            ScopeKind::Domain => {
                host == s.domain
                    || host
                        .strip_suffix(s.domain.as_str())
                        .is_some_and(|rest| rest.ends_with('.'))
            }
            ScopeKind::Prefix => {
                s.host == host
                    && same_port(&s.scheme_port, port)
                    && url.path().starts_with(&s.prefix)
            }
            ScopeKind::Any => true,
        })
    }
}

fn same_port(seed: &(String, Option<u16>), port: Option<u16>) -> bool {
    // A seed on a default port also admits the other scheme's default port.
    let default = matches!(seed.1, Some(80) | Some(443));
    seed.1 == port || (default && matches!(port, Some(80) | Some(443)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn host_scope() {
        let s = Scope::new(ScopeKind::Host, &[u("http://docs.example.org/guide/")]);
        assert!(s.contains(&u("http://docs.example.org/other")));
        assert!(s.contains(&u("https://docs.example.org/other")));
        assert!(!s.contains(&u("http://www.example.org/")));
        assert!(!s.contains(&u("http://docs.example.org:8080/")));
    }

    #[test]
    fn domain_scope() {
        let s = Scope::new(ScopeKind::Domain, &[u("https://docs.example.co.uk/")]);
        assert!(s.contains(&u("https://blog.example.co.uk/x")));
        assert!(s.contains(&u("https://example.co.uk/x")));
        assert!(!s.contains(&u("https://other.co.uk/x")));
        assert!(!s.contains(&u("https://badexample.co.uk/x")));
    }

    #[test]
    fn prefix_scope_uses_the_seed_path_up_to_its_last_slash() {
        let s = Scope::new(ScopeKind::Prefix, &[u("http://h/docs/v1/index.html")]);
        assert!(s.contains(&u("http://h/docs/v1/page.html")));
        assert!(s.contains(&u("http://h/docs/v1/deep/er")));
        assert!(!s.contains(&u("http://h/docs/v2/page.html")));
        assert!(!s.contains(&u("http://h/docs/")));
    }

    #[test]
    fn parses_scope_names() {
        assert_eq!("prefix".parse::<ScopeKind>().unwrap(), ScopeKind::Prefix);
        assert!("nope".parse::<ScopeKind>().is_err());
    }
}

/// Which links a crawl follows by their path (or whole URL): any include pattern must
/// match when there are some, and no exclude pattern may. Regular expressions, searched
/// anywhere in the text unless anchored (Firecrawl's `includePaths` / `excludePaths`).
#[derive(Debug, Clone, Default)]
pub struct PathFilter {
    include: Option<regex::RegexSet>,
    exclude: Option<regex::RegexSet>,
    whole_url: bool,
    /// Links must also be under this path (`trawl serve`'s crawls of one directory of a
    /// site whose sitemaps are read: a prefix scope, for pages only).
    prefix: Option<String>,
}

impl PathFilter {
    /// Compiles the patterns; the error names the one that does not compile.
    pub fn new(include: &[String], exclude: &[String], whole_url: bool) -> Result<Self, String> {
        Self::with_prefix(include, exclude, whole_url, None)
    }

    /// [`Self::new`], and links only under the path `prefix`.
    pub fn with_prefix(
        include: &[String],
        exclude: &[String],
        whole_url: bool,
        prefix: Option<&str>,
    ) -> Result<Self, String> {
        let set = |pats: &[String], what: &str| -> Result<Option<regex::RegexSet>, String> {
            if pats.is_empty() {
                return Ok(None);
            }
            for p in pats {
                // Compiled one by one first, so the error names the pattern.
                regex::RegexBuilder::new(p)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| {
                        format!("{what} pattern {p:?} is not a regular expression: {e}")
                    })?;
            }
            regex::RegexSetBuilder::new(pats)
                .size_limit(8 << 20)
                .build()
                .map(Some)
                .map_err(|e| format!("{what} patterns: {e}"))
        };
        Ok(Self {
            include: set(include, "include")?,
            exclude: set(exclude, "exclude")?,
            whole_url,
            prefix: prefix
                .filter(|p| !p.is_empty() && *p != "/")
                .map(str::to_string),
        })
    }

    pub fn allows(&self, url: &Url) -> bool {
        if let Some(p) = &self.prefix
            && !url.path().starts_with(p.as_str())
        {
            return false;
        }
        let text = if self.whole_url {
            url.as_str()
        } else {
            url.path()
        };
        if let Some(inc) = &self.include
            && !inc.is_match(text)
        {
            return false;
        }
        !self.exclude.as_ref().is_some_and(|e| e.is_match(text))
    }
}

#[cfg(test)]
mod path_filter_tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn include_and_exclude_patterns_decide_by_path() {
        let f = PathFilter::new(&["^/blog/".into()], &["draft".into()], false).unwrap();
        assert!(f.allows(&u("http://h/blog/post-1")));
        assert!(!f.allows(&u("http://h/about")));
        assert!(!f.allows(&u("http://h/blog/draft-2")));
        // The host is not part of the path.
        let f = PathFilter::new(&[], &["^/h".into()], false).unwrap();
        assert!(f.allows(&u("http://h/a")));
        let f = PathFilter::new(&[], &["^http://h/".into()], true).unwrap();
        assert!(!f.allows(&u("http://h/a")));
        assert!(PathFilter::default().allows(&u("http://h/x")));
        // A prefix and the patterns must both allow a link.
        let f = PathFilter::with_prefix(&["post".into()], &[], false, Some("/blog/")).unwrap();
        assert!(f.allows(&u("http://h/blog/post-1")));
        assert!(!f.allows(&u("http://h/blog/about")));
        assert!(!f.allows(&u("http://h/news/post-1")));
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let e = PathFilter::new(&["ok".into(), "(unclosed".into()], &[], false).unwrap_err();
        assert!(e.contains("(unclosed"), "{e}");
    }
}
