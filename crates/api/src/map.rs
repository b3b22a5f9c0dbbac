//! `trawl map` and `/v2/map`: a site's pages found fast, without crawling it: the URLs of
//! its sitemaps (those robots.txt names, and `/sitemap.xml`, nested ones followed) and the
//! links of a few pages read breadth first from the start URL, with titles where a page
//! was read. Every request goes through the one-shot fetcher (robots.txt, the address
//! policy, per-host politeness).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde::Serialize;
use trawl_core::scope::registrable_domain;
use trawl_core::urlnorm::Normalizer;
use url::Url;

use crate::api::{ApiError, PageOptions, PageParts};
use crate::scrape::Scraper;

/// Firecrawl's default and largest `limit`.
pub const DEFAULT_LIMIT: usize = 5000;
pub const MAX_LIMIT: usize = 100_000;
/// Sitemap files read at most (an index and its children).
const MAX_SITEMAPS: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitemapUse {
    Include,
    Skip,
    Only,
}

impl std::str::FromStr for SitemapUse {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "include" => Ok(Self::Include),
            "skip" => Ok(Self::Skip),
            "only" => Ok(Self::Only),
            o => Err(format!("sitemap must be include, skip or only, not {o:?}")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct MapOptions {
    pub limit: usize,
    /// Links matching these words come first.
    pub search: Option<String>,
    pub include_subdomains: bool,
    pub ignore_query: bool,
    pub sitemap: SitemapUse,
    /// Pages read for their links, at most.
    pub pages: usize,
    /// The whole map's time; what was found by then is the answer.
    pub timeout: Duration,
}

impl Default for MapOptions {
    fn default() -> Self {
        Self {
            limit: DEFAULT_LIMIT,
            search: None,
            include_subdomains: true,
            ignore_query: true,
            sitemap: SitemapUse::Include,
            pages: 10,
            timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MapLink {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

struct Mapper<'a> {
    scraper: &'a Scraper,
    start: Url,
    opts: &'a MapOptions,
    norm: Normalizer,
    deadline: Instant,
    /// In the order found.
    found: Vec<String>,
    known: HashSet<String>,
    titles: HashMap<String, (Option<String>, Option<String>)>,
}

/// The site's URLs, in scope, each once, `search` matches first, at most `limit`.
pub async fn map(
    scraper: &Scraper,
    start: &Url,
    opts: &MapOptions,
) -> Result<Vec<MapLink>, ApiError> {
    let mut m = Mapper {
        scraper,
        start: start.clone(),
        opts,
        norm: Normalizer::default(),
        deadline: Instant::now() + opts.timeout,
        found: Vec::new(),
        known: HashSet::new(),
        titles: HashMap::new(),
    };
    if opts.sitemap != SitemapUse::Only {
        let _ = m.add(start.as_str());
    }
    if opts.sitemap != SitemapUse::Skip {
        m.sitemaps().await;
    }
    if opts.sitemap != SitemapUse::Only {
        m.links().await?;
    }
    Ok(m.finish())
}

impl Mapper<'_> {
    fn left(&self) -> Option<Duration> {
        self.deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }

    fn in_scope(&self, u: &Url) -> bool {
        let (Some(h), Some(start)) = (u.host_str(), self.start.host_str()) else {
            return false;
        };
        if self.opts.include_subdomains {
            registrable_domain(h) == registrable_domain(start)
        } else {
            h == start && u.port_or_known_default() == self.start.port_or_known_default()
        }
    }

    /// Enough URLs found: `limit`, or more for `search` to rank among (bounded: a
    /// hostile site's sitemaps list millions).
    fn full(&self) -> bool {
        let cap = if self.opts.search.is_some() {
            (self.opts.limit * 4).clamp(1000, MAX_LIMIT * 2)
        } else {
            self.opts.limit
        };
        self.found.len() >= cap
    }

    /// Adds a URL found (once); its normalized form, `None` when it is not the site's.
    fn add(&mut self, raw: &str) -> Option<String> {
        let mut u = self.norm.parse(raw, None).ok()?;
        if self.opts.ignore_query {
            u.set_query(None);
        }
        if !self.in_scope(&u) {
            return None;
        }
        let s = u.to_string();
        if !self.full() && self.known.insert(s.clone()) {
            self.found.push(s.clone());
        }
        Some(s)
    }

    async fn sitemaps(&mut self) {
        let mut queue: VecDeque<Url> = VecDeque::new();
        if let Ok(robots) = self.start.join("/robots.txt")
            && let Some(t) = self.left()
            && let Ok(f) = self.scraper.fetch_listing(&robots, Some(t)).await
            && f.status == 200
        {
            // The crawl's robots.txt reader (Sitemap lines belong to no group).
            let rules = trawl_fetcher::robots::Robots::parse(&f.body, "*");
            for u in rules.sitemaps() {
                if let Ok(u) = Url::parse(u.as_str())
                    && self.in_scope(&u)
                    && queue.len() < MAX_SITEMAPS
                {
                    queue.push_back(u);
                }
            }
        }
        if let Ok(u) = self.start.join("/sitemap.xml")
            && !queue.contains(&u)
        {
            queue.push_back(u);
        }
        let mut read = HashSet::new();
        while let Some(sm) = queue.pop_front() {
            if read.len() >= MAX_SITEMAPS || !read.insert(sm.to_string()) {
                continue;
            }
            let Some(t) = self.left() else { break };
            let Ok(f) = self.scraper.fetch_listing(&sm, Some(t)).await else {
                continue;
            };
            if !(200..300).contains(&f.status) {
                continue;
            }
            // Parsing 50 MB of XML is CPU work: off the request threads.
            let Ok(listing) =
                tokio::task::spawn_blocking(move || trawl_extract::parse_sitemap(&f.body)).await
            else {
                continue;
            };
            for p in &listing.pages {
                if self.full() {
                    break;
                }
                let _ = self.add(p);
            }
            // Nested sitemaps of the site only, and no more than will be read.
            for s in listing.sitemaps {
                if read.len() + queue.len() >= MAX_SITEMAPS {
                    break;
                }
                if let Ok(u) = Url::parse(&s)
                    && self.in_scope(&u)
                {
                    queue.push_back(u);
                }
            }
        }
    }

    async fn links(&mut self) -> Result<(), ApiError> {
        let opts = PageOptions {
            formats: Default::default(),
            only_main_content: false,
            include_tags: Vec::new(),
            exclude_tags: Vec::new(),
            script: None,
        };
        let mut queue: VecDeque<String> = VecDeque::from([self.start.to_string()]);
        // Pages queued to be read, whether the sitemaps listed them already or not.
        let mut queued: HashSet<String> = queue.iter().cloned().collect();
        let mut read = 0;
        let mut first = true;
        while let Some(u) = queue.pop_front() {
            if read >= self.opts.pages || self.full() {
                break;
            }
            let Some(t) = self.left() else { break };
            let Ok(url) = Url::parse(&u) else { continue };
            read += 1;
            let f = match self.scraper.fetch(&url, Some(t)).await {
                Ok(f) => f,
                // The start page itself failing is the answer; a later one is skipped.
                Err(e) if first => return Err(e),
                Err(_) => continue,
            };
            first = false;
            // The fetcher decodes HTML pages (and only them) to UTF-8.
            if f.charset.is_none() {
                continue;
            }
            let Ok(base) = Url::parse(&f.final_url) else {
                continue;
            };
            let opts = opts.clone();
            let parts = tokio::task::spawn_blocking(move || {
                let mut parts = PageParts::default();
                let html = String::from_utf8_lossy(&f.body);
                crate::page::render_html(&html, &base, &opts, 0, &mut parts).map(|_| parts)
            })
            .await
            .map_err(ApiError::internal)??;
            if let Ok(n) = self.norm.parse(&u, None) {
                self.titles.insert(
                    n.to_string(),
                    (parts.title.clone(), parts.meta.description.clone()),
                );
            }
            for l in parts.links {
                if let Some(n) = self.add(&l)
                    && queued.insert(n.clone())
                {
                    queue.push_back(n);
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> Vec<MapLink> {
        let words: Vec<String> = self
            .opts
            .search
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        let titles = self.titles;
        let mut links: Vec<MapLink> = self
            .found
            .into_iter()
            .map(|url| {
                let (title, description) = titles.get(&url).cloned().unwrap_or_default();
                MapLink {
                    url,
                    title: title.filter(|t| !t.is_empty()),
                    description: description.filter(|d| !d.is_empty()),
                }
            })
            .collect();
        if !words.is_empty() {
            // Ranked, not filtered (as Firecrawl does): more matching words first, stable.
            let score = |l: &MapLink| {
                let hay = format!(
                    "{} {}",
                    l.url.to_lowercase(),
                    l.title.as_deref().unwrap_or("").to_lowercase()
                );
                words.iter().filter(|w| hay.contains(w.as_str())).count()
            };
            links.sort_by_key(|l| std::cmp::Reverse(score(l)));
        }
        links.truncate(self.opts.limit);
        links
    }
}
