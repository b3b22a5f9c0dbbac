//! Links for the frontier, read from the same parse as the content: `<a>`/`<area>` hrefs
//! resolved against `<base>`, `rel=nofollow` and `<meta name=robots>` honoured, meta
//! refresh targets, the canonical URL and advertised feeds.

use url::Url;

use super::dom::Dom;
use super::tags::Tag;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Links {
    /// Absolute link targets in document order (not yet normalized or deduplicated).
    pub links: Vec<String>,
    pub canonical: Option<String>,
    pub feeds: Vec<String>,
    /// Absolute `<img src>` addresses in document order (`data:` URIs left out).
    pub images: Vec<String>,
    /// `<meta name=robots content=nofollow>`: links were not collected.
    pub nofollow: bool,
    pub noindex: bool,
}

fn rel_has(dom: &Dom, i: u32, word: &str) -> bool {
    dom.attr(i, "rel")
        .is_some_and(|r| r.split_whitespace().any(|w| w.eq_ignore_ascii_case(word)))
}

pub fn links(dom: &Dom, url: &Url) -> Links {
    let mut out = Links::default();
    let mut base: Option<Url> = None;
    let mut hrefs: Vec<&str> = Vec::new();
    let mut images: Vec<&str> = Vec::new();
    for i in 0..dom.nodes.len() as u32 {
        match dom.node(i).tag {
            Tag::Img => {
                if let Some(s) = dom.attr(i, "src")
                    && !s.trim_start().starts_with("data:")
                {
                    images.push(s);
                }
            }
            Tag::Base if base.is_none() => {
                base = dom.attr(i, "href").and_then(|h| url.join(h.trim()).ok());
            }
            Tag::A | Tag::Area => {
                if let Some(h) = dom.attr(i, "href")
                    && !rel_has(dom, i, "nofollow")
                {
                    hrefs.push(h);
                }
            }
            Tag::Link => {
                let Some(h) = dom.attr(i, "href") else {
                    continue;
                };
                let ty = dom.attr(i, "type").unwrap_or("").to_ascii_lowercase();
                if rel_has(dom, i, "canonical") {
                    if out.canonical.is_none() {
                        out.canonical = Some(h.to_string());
                    }
                } else if rel_has(dom, i, "alternate")
                    && (ty.contains("rss") || ty.contains("atom"))
                {
                    out.feeds.push(h.to_string());
                }
            }
            Tag::Meta => {
                let content = dom.attr(i, "content").unwrap_or("");
                let name = dom.attr(i, "name").unwrap_or("").to_ascii_lowercase();
                if name == "robots" || name == "trawl" {
                    let c = content.to_ascii_lowercase();
                    out.nofollow |= c.contains("nofollow") || c.contains("none");
                    out.noindex |= c.contains("noindex") || c.contains("none");
                }
                if dom
                    .attr(i, "http-equiv")
                    .is_some_and(|e| e.eq_ignore_ascii_case("refresh"))
                    && let Some(at) = content.to_ascii_lowercase().find("url=")
                {
                    let target = content[at + 4..]
                        .trim()
                        .trim_matches(|ch| ch == '\'' || ch == '"');
                    if !target.is_empty() {
                        hrefs.push(target);
                    }
                }
            }
            _ => {}
        }
    }
    let base = base.unwrap_or_else(|| url.clone());
    let resolve = |h: &str| base.join(h.trim()).ok().map(|u| u.to_string());
    if !out.nofollow {
        out.links = hrefs.into_iter().filter_map(resolve).collect();
    }
    out.images = images.into_iter().filter_map(resolve).collect();
    out.canonical = out.canonical.as_deref().and_then(resolve);
    out.feeds = std::mem::take(&mut out.feeds)
        .iter()
        .filter_map(|h| resolve(h))
        .collect();
    out
}
